//! Source: the object's own managedFields. Whoever wrote to the object
//! lately is at work on it (a controller without leader election leaves
//! no Lease, but it does write; Percona's operator writes
//! `status.state: stopping` to the very object it is finalizing).
//!
//! - A manager named for the owner that wrote in the last two minutes
//!   shows it running.
//! - Any other manager that wrote after the deletion began, in the last
//!   two minutes, shows something at work on the object (`Alive`). An
//!   older write since the deletion is not history while some identity
//!   other than Kubernetes' own still holds a grant to update the object:
//!   a controller that acts from outside the cluster (a management
//!   cluster's Cluster API or Crossplane, a cloud provider's controller)
//!   leaves no pod and no Lease here, only its writes and its grant, so
//!   the key stays `Unknown` until a person confirms the writer is gone
//!   (`--assume-dead KEY`). managedFields name a manager, not who it was;
//!   the grants say who could still act. Once no such grant is left (the
//!   uninstall removed its RBAC), the write is history. Left out:
//!   a person's clients (kubectl, helm, unstuck itself), whose writes
//!   serve no finalizer, and Kubernetes' own components, whose keys are
//!   judged by the built-in table (kube-controller-manager writes every
//!   Terminating namespace's conditions; the kubelet every pod's status).
//!   Writes before the deletion are what made the object.

use super::{
    Ctx, RECENT_SECS, fmt_secs,
    rbac::{Grantee, Request},
    verdict::SourceReport,
};
use crate::text::quoted;

/// Who, other than Kubernetes' own components, may still update the
/// object: the first such grant, as a person reads it. `Some` too when it
/// cannot be told (no request, RBAC not read): then it is not ruled out.
fn someone_may_still_update(ctx: &Ctx, req: Option<&Request>) -> Option<String> {
    let Some(req) = req else {
        return Some("who may update it was not asked (its resource was not at hand)".into());
    };
    let Some(rbac) = &ctx.snapshot.rbac else {
        return Some("the cluster's RBAC was not read".into());
    };
    let grants = rbac.grants(req);
    if let Some(g) = grants.to_outside.first() {
        return Some(format!("{} by {}", g.subject, g.binding));
    }
    let namespace_there =
        |ns: &str| ctx.snapshot.namespaces.is_empty() || ctx.snapshot.namespace(ns).is_some();
    grants.to_service_accounts.iter().find_map(|g| {
        let own = match &g.grantee {
            // Kubernetes' own controllers run as kube-system accounts.
            Grantee::ServiceAccount { namespace, .. }
            | Grantee::NamespaceServiceAccounts { namespace, .. } => {
                namespace == "kube-system" || !namespace_there(namespace)
            }
            Grantee::AllServiceAccounts(_) => false,
        };
        (!own).then(|| format!("{} by {}", g.grantee, g.binding))
    })
}

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

pub(super) fn check(ctx: &Ctx, req: Option<&Request>) -> SourceReport {
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
                "manager {manager} ({how}) wrote to the object {} ago ({what})",
                fmt_secs(age),
                manager = quoted(manager)
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
                "manager {manager} wrote to the object {} ago ({what}), {} into its deletion: something is at work on it",
                fmt_secs(age),
                fmt_secs(deleted_age - age),
                manager = quoted(manager)
            ));
        } else if let Some(who) = someone_may_still_update(ctx, req) {
            r.installed.push(format!(
                "manager {manager} wrote to the object {} ago ({what}), {} into its deletion, and {who} may still update it: a controller acting from outside the cluster leaves only its writes and its grant here; confirm that writer is gone, then --assume-dead the key",
                fmt_secs(age),
                fmt_secs(deleted_age - age),
                manager = quoted(manager)
            ));
        } else {
            older.push(format!(
                "manager {manager} wrote to the object {} ago ({what}), {} into its deletion; no identity but Kubernetes' own may update it any more",
                fmt_secs(age),
                fmt_secs(deleted_age - age),
                manager = quoted(manager)
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
