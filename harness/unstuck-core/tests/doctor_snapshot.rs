//! Every recorded snapshot loads, round-trips and diagnoses
//! deterministically.

mod doctor_support;

use doctor_support::{diagnose_and_plan, fixture_names, load_snapshot};
use unstuck_core::doctor::{Snapshot, plan};

#[test]
fn every_fixture_loads_and_round_trips() {
    let names = fixture_names();
    assert!(names.len() >= 7, "{names:?}");
    for name in names {
        let snap = load_snapshot(&name);
        let text = serde_json::to_string_pretty(&snap).unwrap();
        let back: Snapshot = serde_json::from_str(&text).unwrap();
        assert_eq!(back, snap, "{name}");
        // Keys are camelCase, as documented.
        let v = serde_json::to_value(&snap).unwrap();
        for key in [
            "takenAt",
            "namespaces",
            "apiServices",
            "terminating",
            "namespaceContent",
            "pods",
            "leases",
            "discoveryFailures",
            "events",
        ] {
            assert!(v.get(key).is_some(), "{name}: {key}");
        }
    }
}

#[test]
fn minimal_snapshot_needs_only_taken_at() {
    let snap: Snapshot = serde_json::from_str(r#"{"takenAt": "2025-06-01T12:00:00Z"}"#).unwrap();
    assert!(snap.namespaces.is_empty());
    let (findings, plan) = diagnose_and_plan(&snap);
    assert!(findings.is_empty());
    assert!(plan.is_empty());
}

#[test]
fn diagnosis_is_deterministic_whatever_the_list_order() {
    for name in fixture_names() {
        let snap = load_snapshot(&name);
        let (findings, plan_a) = diagnose_and_plan(&snap);
        let mut shuffled = snap.clone();
        shuffled.namespaces.reverse();
        shuffled.api_services.reverse();
        shuffled.terminating.reverse();
        shuffled.namespace_content.reverse();
        shuffled.pods.reverse();
        shuffled.leases.reverse();
        shuffled.discovery_failures.reverse();
        shuffled.events.reverse();
        shuffled.persistent_volumes.reverse();
        let (again, plan_b) = diagnose_and_plan(&shuffled);
        assert_eq!(again, findings, "{name}");
        assert_eq!(plan_b, plan_a, "{name}");
        // And twice in a row.
        assert_eq!(plan(&findings, &snap), plan_a, "{name}");
    }
}

#[test]
fn every_fixture_plan_is_least_force_first_and_safe() {
    for name in fixture_names() {
        let snap = load_snapshot(&name);
        let (findings, plan) = diagnose_and_plan(&snap);
        let levels: Vec<u8> = plan.steps.iter().map(|s| s.force_level).collect();
        let mut sorted = levels.clone();
        sorted.sort();
        assert_eq!(levels, sorted, "{name}");
        for step in &plan.steps {
            assert!(step.finding_index < findings.len(), "{name}");
            assert!(!step.rationale.is_empty(), "{name}");
        }
        // Every finding gets exactly one step.
        let mut idx: Vec<usize> = plan.steps.iter().map(|s| s.finding_index).collect();
        idx.sort();
        assert_eq!(idx, (0..findings.len()).collect::<Vec<_>>(), "{name}");
        // Every finding has a summary and evidence.
        for f in &findings {
            assert!(!f.summary.is_empty(), "{name}");
            assert!(!f.evidence.is_empty(), "{name}: {f:?}");
        }
    }
}
