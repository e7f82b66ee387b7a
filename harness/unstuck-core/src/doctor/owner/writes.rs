//! Source: the object's own managedFields. Whoever wrote to the object
//! lately is at work on it (a controller without leader election leaves
//! no Lease, but it does write; Percona's operator writes
//! `status.state: stopping` to the very object it is finalizing).
//!
//! - A manager named for the owner that wrote in the last two minutes
//!   shows it running.
//! - Any other manager that wrote after the deletion began, in the last
//!   two minutes, shows something at work on the object (`Alive`). An
//!   older write since the deletion is not history: a controller that
//!   acts from outside the cluster (a management cluster's Cluster API or
//!   Crossplane, a cloud provider's controller) leaves no pod and no Lease
//!   here, only its writes, so the key stays `Unknown` until a person
//!   confirms the writer is gone (`--assume-dead KEY`). Left out:
//!   a person's clients (kubectl, helm, unstuck itself), whose writes
//!   serve no finalizer, and Kubernetes' own components, whose keys are
//!   judged by the built-in table (kube-controller-manager writes every
//!   Terminating namespace's conditions; the kubelet every pod's status).
//!   Writes before the deletion are what made the object.

use super::{Ctx, RECENT_SECS, fmt_secs, verdict::SourceReport};

/// Field managers of a person's tools, matched exactly: Flux's
/// `helm-controller` is a controller, not a person's `helm`.
const PERSON_CLIENTS: &[&str] = &["kubectl", "helm", "k9s", "unstuck", "before-first-apply"];

/// Prefixes that name a person's tool whatever follows: kubectl's own
/// variants (`kubectl-client-side-apply`, `kubectl-edit`, ...) and a
/// browser's user agent (`Mozilla/5.0 ...`, the dashboard's default).
const PERSON_CLIENT_PREFIXES: &[&str] = &["kubectl-", "Mozilla/"];

/// Field managers of Kubernetes' own components.
const CONTROL_PLANE: &[&str] = &[
    "kube-controller-manager",
    "kube-apiserver",
    "kube-scheduler",
    "kubelet",
    "cloud-controller-manager",
];

/// Whether `manager` is a person's tool or Kubernetes' own component.
pub(super) fn says_nothing(manager: &str) -> bool {
    PERSON_CLIENTS.contains(&manager)
        || PERSON_CLIENT_PREFIXES
            .iter()
            .any(|p| manager.starts_with(p))
        || CONTROL_PLANE.contains(&manager)
}

pub(super) fn check(ctx: &Ctx) -> SourceReport {
    let mut r = SourceReport::default();
    let Some(record) = ctx.record else {
        r.unreadable = Some("writes: the object's managedFields were not at hand".to_owned());
        return r;
    };
    let meta = &record.metadata;
    let deleted_age = meta
        .deletion_timestamp
        .as_ref()
        .map(|t| ctx.snapshot.age_of(t.0).as_secs());
    let mut older = Vec::new();
    let entries = meta.managed_fields.as_deref().unwrap_or_default();
    for m in entries {
        let manager = m.manager.as_deref().unwrap_or_default();
        let Some(time) = &m.time else {
            continue;
        };
        let age = ctx.snapshot.age_of(time.0).as_secs();
        let what = format!(
            "{}{}",
            m.operation.as_deref().unwrap_or_default(),
            m.subresource
                .as_deref()
                .map(|s| format!(" {s}"))
                .unwrap_or_default()
        );
        if let Some(how) = ctx.target.named_in(manager) {
            let line = format!(
                "manager {manager:?} ({how}) wrote to the object {} ago ({what})",
                fmt_secs(age)
            );
            if age <= RECENT_SECS {
                r.alive.push(line);
            } else {
                older.push(line);
            }
            continue;
        }
        if says_nothing(manager) {
            continue;
        }
        // Only writes since the deletion say someone handles it. Times
        // are whole seconds: one in the very second of the deletion
        // counts (a controller reacts within milliseconds; the deleter,
        // if it wrote too, is a person's tool and left out above).
        let Some(deleted_age) = deleted_age.filter(|d| age <= *d) else {
            continue;
        };
        if age <= RECENT_SECS {
            r.alive.push(format!(
                "manager {manager:?} wrote to the object {} ago ({what}), {} into its deletion: something is at work on it",
                fmt_secs(age),
                fmt_secs(deleted_age - age)
            ));
        } else {
            r.installed.push(format!(
                "manager {manager:?} wrote to the object {} ago ({what}), {} into its deletion, and nothing shows it gone since: a controller acting from outside the cluster leaves only its writes here; confirm that writer is gone, then --assume-dead the key",
                fmt_secs(age),
                fmt_secs(deleted_age - age)
            ));
        }
    }
    r.checked = format!(
        "writes: no manager other than a person's client or Kubernetes' own wrote to the object since its deletion began, and none named for {} in the last 2 minutes ({} managedFields entries checked){}",
        if ctx.target.is_empty() {
            "it".to_owned()
        } else {
            ctx.target.describe()
        },
        entries.len(),
        if older.is_empty() {
            String::new()
        } else {
            format!("; only {}", older.join("; "))
        }
    );
    r
}
