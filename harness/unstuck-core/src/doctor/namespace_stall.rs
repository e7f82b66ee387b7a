//! Never silent: a Terminating namespace past the threshold that nothing
//! else explains, or that the namespace controller has not written a
//! single condition on, gets a [`FindingKind::NamespaceNotProgressing`]
//! saying why the controller is not getting on with it.
//!
//! The reasons looked at, each quoted: kube-controller-manager's leader
//! Lease (missing or expired: the process is down or not leading), its own
//! `workqueue_*{name="namespace"}` metrics when the collector could read
//! them (stuck in one namespace, idle, or no namespace controller at all),
//! and other Terminating namespaces' conditions naming a failure every
//! namespace deletion shares (discovery or group/version parsing).
//! Report only: the remedy is to get the controller running again.

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::jiff::SignedDuration;

use super::conditions::{
    NS_DISCOVERY_FAILURE, NS_GV_PARSING_FAILURE, failing_namespace_condition,
    quote_namespace_condition,
};
use super::model::object::namespace_ref;
use super::model::{
    ApiServiceFacts, ConversionWebhookFacts, DeadWebhookFacts, Finding, FindingDetail, FindingKind,
    Snapshot,
};
use super::owner::fmt_secs;

pub use super::model::namespace::{
    ControllerManagerMetrics, NamespaceStall, StallCause, WorkqueueMetrics,
};
use crate::text::quoted;

/// The metric names read, all with the label `name="namespace"`.
const METRICS: [&str; 4] = [
    "workqueue_depth",
    "workqueue_unfinished_work_seconds",
    "workqueue_longest_running_processor_seconds",
    "workqueue_adds_total",
];

/// Parses the namespace workqueue out of a Prometheus text exposition.
/// `None` when none of its series is present.
pub fn parse_namespace_queue(text: &str) -> Option<WorkqueueMetrics> {
    let mut values = [None; 4];
    for line in text.lines() {
        if line.starts_with('#') {
            continue;
        }
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let Some((metric, labels)) = series.split_once('{') else {
            continue;
        };
        let Some(i) = METRICS.iter().position(|m| *m == metric) else {
            continue;
        };
        if !labels
            .trim_end_matches('}')
            .split(',')
            .any(|l| l == "name=\"namespace\"")
        {
            continue;
        }
        values[i] = value.trim().parse::<f64>().ok();
    }
    if values.iter().all(Option::is_none) {
        return None;
    }
    let v = |i: usize| values[i].unwrap_or(0.0);
    Some(WorkqueueMetrics {
        depth: v(0),
        unfinished_work_seconds: v(1),
        longest_running_processor_seconds: v(2),
        adds_total: v(3),
    })
}

/// One finding per Terminating namespace past `threshold` that `found`
/// does not explain or that has no status condition at all.
pub fn namespaces_not_progressing(
    snapshot: &Snapshot,
    threshold: SignedDuration,
    found: &[Finding],
) -> Vec<Finding> {
    let mut out: Vec<Finding> = snapshot
        .namespaces
        .iter()
        .filter_map(|ns| not_progressing(snapshot, threshold, found, ns))
        .collect();
    out.sort_by(|a, b| a.subject.name.cmp(&b.subject.name));
    out
}

fn not_progressing(
    snapshot: &Snapshot,
    threshold: SignedDuration,
    found: &[Finding],
    ns: &Namespace,
) -> Option<Finding> {
    let name = ns.metadata.name.as_deref()?;
    let deleted = ns.metadata.deletion_timestamp.as_ref()?.0;
    let age = snapshot.age_of(deleted);
    if age <= threshold {
        return None;
    }
    let has_conditions = ns
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| !c.is_empty());
    if has_conditions && found.iter().any(|f| explains(f, name)) {
        return None;
    }
    // What is left in it, before anything is blamed on the controller:
    // pods inside their grace period are waited on, as they should be.
    let (content, in_grace) = super::normal::namespace_content(snapshot, name);
    if in_grace.is_some() {
        return None;
    }

    let mut evidence = vec![
        format!(
            "deletionTimestamp {deleted} ({} before the snapshot)",
            fmt_secs(age.as_secs())
        ),
        if has_conditions {
            "the namespace controller has written conditions, but no other finding explains why the namespace is still here".to_owned()
        } else {
            "the namespace controller has written no status condition on it (it writes them on its first pass)".to_owned()
        },
    ];
    if content.is_empty() {
        evidence.push("nothing of it is left in the listed types".to_owned());
    } else {
        evidence.extend(content.into_iter().map(|c| format!("still in it: {c}")));
    }
    let mut causes = Vec::new();
    let lease = controller_manager_lease(snapshot);
    if !lease_is_held(snapshot, lease, &mut evidence) {
        causes.push(StallCause::ControllerManagerNotLeading);
    }
    let failing_conversions = failing_conversions(snapshot, &mut evidence);
    if !failing_conversions.is_empty() {
        causes.push(StallCause::ConversionWebhookFailing);
    }
    if let Some(cause) = workqueue_cause(snapshot, threshold, &mut evidence) {
        causes.push(cause);
    }
    let blocked_elsewhere = cluster_wide_blockers(snapshot, name, &mut evidence);
    if !blocked_elsewhere.is_empty() {
        causes.push(StallCause::ClusterWideBlocker);
    }
    let cause = causes.first().copied().unwrap_or(StallCause::Unknown);
    Some(Finding {
        subject: namespace_ref(ns),
        summary: format!(
            "namespace {name} has been terminating for {} and the namespace controller is not progressing: {}",
            fmt_secs(age.as_secs()),
            cause.explain()
        ),
        evidence,
        detail: FindingDetail::NamespaceNotProgressing(NamespaceStall {
            cause,
            has_conditions,
            blocked_elsewhere,
            failing_conversions,
        }),
    })
}

/// Whether finding `f` accounts for namespace `ns` still being there.
fn explains(f: &Finding, ns: &str) -> bool {
    if matches!(
        f.kind(),
        FindingKind::NamespaceNotProgressing | FindingKind::PodNotStarting
    ) {
        return false;
    }
    let about_ns = f.subject.kind == "Namespace" && f.subject.namespace.is_none();
    if about_ns {
        return f.subject.name == ns;
    }
    if f.subject.namespace.as_deref() == Some(ns) {
        return true;
    }
    match &f.detail {
        FindingDetail::DeadApiService(ApiServiceFacts {
            blocks_namespaces, ..
        })
        | FindingDetail::ApiServiceUnavailable(ApiServiceFacts {
            blocks_namespaces, ..
        })
        | FindingDetail::DeadWebhook(DeadWebhookFacts {
            blocks_namespaces, ..
        })
        | FindingDetail::DeadConversionWebhook(ConversionWebhookFacts {
            blocks_namespaces, ..
        }) => blocks_namespaces.iter().any(|b| b == ns),
        _ => false,
    }
}

fn controller_manager_lease(snapshot: &Snapshot) -> Option<&Lease> {
    snapshot.leases.iter().find(|l| {
        l.metadata.namespace.as_deref() == Some("kube-system")
            && l.metadata.name.as_deref() == Some("kube-controller-manager")
    })
}

/// Whether the leader lease is held: renewed within its own
/// `leaseDurationSeconds` (15 s when unset), the rule leader election
/// itself uses to take over. Quotes holder, renewTime and age.
fn lease_is_held(snapshot: &Snapshot, lease: Option<&Lease>, evidence: &mut Vec<String>) -> bool {
    let Some(lease) = lease else {
        evidence.push(format!(
            "no lease kube-system/kube-controller-manager in the snapshot ({} leases read): no kube-controller-manager has ever led, or its lease was deleted",
            snapshot.leases.len()
        ));
        return false;
    };
    let spec = lease.spec.clone().unwrap_or_default();
    let holder = spec.holder_identity.as_deref().unwrap_or("<none>");
    let duration = i64::from(spec.lease_duration_seconds.unwrap_or(15).max(1));
    let Some(renew) = spec.renew_time.as_ref().map(|t| t.0) else {
        evidence.push(format!(
            "lease kube-system/kube-controller-manager has no renewTime (holder {holder})",
            holder = quoted(holder)
        ));
        return false;
    };
    let age = snapshot.age_of(renew);
    let held = age <= SignedDuration::from_secs(duration);
    evidence.push(format!(
        "lease kube-system/kube-controller-manager is {} (holder {holder}, renewTime {renew}, {} before the snapshot, leaseDurationSeconds {duration})",
        if held { "fresh" } else { "stale" },
        fmt_secs(age.as_secs()),
        holder = quoted(holder)
    ));
    held
}

/// What the namespace workqueue says, if the collector read it.
fn workqueue_cause(
    snapshot: &Snapshot,
    threshold: SignedDuration,
    evidence: &mut Vec<String>,
) -> Option<StallCause> {
    let Some(m) = &snapshot.controller_manager_metrics else {
        evidence.push(
            "kube-controller-manager's metrics were not read (only on a local cluster, with --local-cluster)".into(),
        );
        return None;
    };
    if let Some(error) = &m.error {
        evidence.push(format!(
            "kube-controller-manager's metrics at {} are unreadable: {error}",
            m.endpoint
        ));
        return None;
    }
    let Some(q) = m.namespace_queue else {
        evidence.push(format!(
            "kube-controller-manager's metrics at {} have no workqueue named \"namespace\"",
            m.endpoint
        ));
        return Some(StallCause::NamespaceControllerMissing);
    };
    evidence.push(format!(
        "namespace workqueue at {}: depth {}, unfinished work {:.0} s, longest running processor {:.0} s, adds {}",
        m.endpoint, q.depth, q.unfinished_work_seconds, q.longest_running_processor_seconds, q.adds_total
    ));
    let threshold_secs = threshold.as_secs_f64();
    if q.longest_running_processor_seconds > threshold_secs {
        Some(StallCause::WorkqueueStuck)
    } else if q.depth == 0.0 && q.unfinished_work_seconds == 0.0 {
        Some(StallCause::WorkqueueIdle)
    } else {
        None
    }
}

/// The CRDs (by name) whose conversion webhook failed a list the
/// collector made, each quoted once. The namespace controller lists every
/// namespaced type of a namespace it deletes: the same lists fail for it.
fn failing_conversions(snapshot: &Snapshot, evidence: &mut Vec<String>) -> Vec<String> {
    let mut crds: Vec<String> = Vec::new();
    for failure in &snapshot.discovery_failures {
        for c in crate::doctor::conversion::failed_conversions(&failure.message) {
            let name = snapshot
                .conversion_webhook_crds
                .iter()
                .find(|crd| crd.spec.group == c.group && crd.spec.names.kind == c.kind)
                .and_then(|crd| crd.metadata.name.clone())
                .unwrap_or_else(|| format!("the CRD of {}, Kind={}", c.group, c.kind));
            if !crds.contains(&name) {
                evidence.push(format!(
                    "the collector's own list of {} failed on {name}'s conversion webhook: {}",
                    failure.group_version, failure.message
                ));
                crds.push(name);
            }
        }
    }
    crds
}

/// Other Terminating namespaces whose failing conditions name something
/// every namespace deletion depends on; quoted.
fn cluster_wide_blockers(
    snapshot: &Snapshot,
    this: &str,
    evidence: &mut Vec<String>,
) -> Vec<String> {
    let mut names = Vec::new();
    for ns in &snapshot.namespaces {
        let Some(name) = ns.metadata.name.as_deref() else {
            continue;
        };
        if name == this || ns.metadata.deletion_timestamp.is_none() {
            continue;
        }
        let mut quoted = false;
        for t in [NS_DISCOVERY_FAILURE, NS_GV_PARSING_FAILURE] {
            if let Some(c) = failing_namespace_condition(ns, t) {
                evidence.push(format!(
                    "namespace {name}: {} (this blocks every namespace deletion)",
                    quote_namespace_condition(c)
                ));
                quoted = true;
            }
        }
        if quoted {
            names.push(name.to_owned());
        }
    }
    names
}
