//! Shared helpers for the doctor tests: loading recorded snapshots.
//!
//! Fixtures live in `tests/recorded/<name>.json`, each a whole
//! [`Snapshot`] as the collector would save it. Recorded ones from a real
//! cluster can be dropped in beside the hand-made ones; every fixture is
//! loaded and diagnosed by `doctor_snapshot.rs`.

#![allow(dead_code)]

use std::path::PathBuf;

use unstuck_core::doctor::{
    DiagnoseOptions, Finding, FindingKind, Plan, ServiceLookup, Snapshot, diagnose, plan,
};

/// `tests/recorded/`.
pub fn recorded_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("recorded")
}

/// Loads `tests/recorded/<name>.json` (the `.json` may be given or not).
pub fn load_snapshot(name: &str) -> Snapshot {
    let file = if name.ends_with(".json") {
        name.to_owned()
    } else {
        format!("{name}.json")
    };
    let path = recorded_dir().join(file);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("parsing {}: {e}", path.display()))
}

/// Every fixture name under `tests/recorded/`, sorted.
pub fn fixture_names() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(recorded_dir())
        .expect("tests/recorded exists")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json"))
        .collect();
    names.sort();
    names
}

/// Diagnoses with the default options (10 s threshold).
pub fn diagnose_default(snapshot: &Snapshot) -> Vec<Finding> {
    diagnose(snapshot, &DiagnoseOptions::default())
}

/// Diagnoses and plans with the default options.
pub fn diagnose_and_plan(snapshot: &Snapshot) -> (Vec<Finding>, Plan) {
    let findings = diagnose_default(snapshot);
    let plan = plan(&findings, snapshot);
    (findings, plan)
}

/// `(kind, "namespace/name")` (or `name` when cluster-scoped) per finding.
pub fn kinds(findings: &[Finding]) -> Vec<(FindingKind, String)> {
    findings
        .iter()
        .map(|f| {
            let who = match &f.subject.namespace {
                Some(ns) => format!("{ns}/{}", f.subject.name),
                None => f.subject.name.clone(),
            };
            (f.kind, who)
        })
        .collect()
}

/// The findings of one kind.
pub fn of_kind(findings: &[Finding], kind: FindingKind) -> Vec<&Finding> {
    findings.iter().filter(|f| f.kind == kind).collect()
}

/// `s` with the collector's lookup of the backend of APIService `api`
/// finding that Service missing (GET 404). Snapshots recorded before the
/// collector looked APIService backends up have no lookup, and the
/// aggregator's condition alone is no proof; in the recorded clusters the
/// Service was indeed missing (the condition quotes it).
pub fn with_missing_backend(mut s: Snapshot, api: &str) -> Snapshot {
    let service = s
        .api_service(api)
        .and_then(unstuck_core::doctor::apiservice::service_key)
        .unwrap_or_else(|| panic!("APIService {api} with a spec.service in the snapshot"));
    s.api_service_backends.push(ServiceLookup {
        service,
        exists: false,
        ..Default::default()
    });
    s
}
