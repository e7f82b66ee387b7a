//! What the doctor could not read, and what that forbids.
//!
//! A user with partial rights (RBAC) or a slow API server leaves sources
//! unread. A finalizer's owner is argued dead from the absence of leases,
//! pods and events; an absence that was never read proves nothing. So
//! while any liveness source is unreadable, a would-be `OrphanFinalizer`
//! is reported as `UnknownFinalizerOwner`, which the plan never strips.

use super::model::{FinalizerFacts, Finding, FindingDetail, Snapshot};

/// The sources a finalizer owner's liveness is argued from.
/// Named as kubectl spells them, as [`Snapshot::unreadable`] records them.
pub const LIVENESS_SOURCES: [&str; 3] = ["leases.coordination.k8s.io", "pods", "events"];

/// Downgrades owner-is-dead findings when a liveness source was unreadable.
pub fn downgrade_unproven(snapshot: &Snapshot, findings: &mut [Finding]) {
    let missing: Vec<&str> = snapshot
        .unreadable
        .iter()
        .map(|u| u.resource.as_str())
        .filter(|r| LIVENESS_SOURCES.contains(r))
        .collect();
    if missing.is_empty() {
        return;
    }
    for f in findings.iter_mut() {
        let Some(removal) = f.detail.finalizer_removal() else {
            continue;
        };
        f.detail = FindingDetail::UnknownFinalizerOwner(FinalizerFacts {
            resource: removal.resource.clone(),
            age_seconds: removal.age_seconds,
            verdicts: removal.verdicts.clone(),
        });
        f.evidence.push(format!(
            "the collector could not read {}: an owner's absence there is not proven, so nothing is stripped",
            missing.join(", ")
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::{DiagnoseOptions, FindingKind, diagnose};

    #[test]
    fn unreadable_leases_turn_an_orphan_into_unknown() {
        let snapshot: Snapshot = serde_json::from_value(serde_json::json!({
            "takenAt": "2026-01-01T00:10:00Z",
            "rbac": {},
            "terminating": [{
                "apiVersion": "v1", "kind": "ConfigMap", "resource": "configmaps",
                "namespaced": true,
                "metadata": {"name": "cm", "namespace": "app", "uid": "u1",
                    "deletionTimestamp": "2026-01-01T00:00:00Z",
                    "finalizers": ["gone.example.com/cleanup"]}
            }]
        }))
        .expect("snapshot");
        let opts = DiagnoseOptions::default();
        assert!(
            diagnose(&snapshot, &opts)
                .iter()
                .any(|f| f.kind() == FindingKind::OrphanFinalizer),
            "the control: with every source read, the owner is dead"
        );
        let mut blind = snapshot.clone();
        blind.unreadable = vec![crate::doctor::model::Unreadable {
            resource: "leases.coordination.k8s.io".into(),
            message: "leases.coordination.k8s.io is forbidden".into(),
        }];
        let findings = diagnose(&blind, &opts);
        assert!(
            findings
                .iter()
                .all(|f| f.kind() != FindingKind::OrphanFinalizer)
        );
        assert!(findings.iter().any(|f| {
            f.kind() == FindingKind::UnknownFinalizerOwner
                && f.evidence
                    .iter()
                    .any(|e| e.contains("leases.coordination.k8s.io"))
        }));
    }
}
