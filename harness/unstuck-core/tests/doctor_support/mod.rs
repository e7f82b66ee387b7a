//! Shared helpers for the doctor tests: the one loader of what is recorded
//! under `tests/recorded/`.
//!
//! Snapshots live in `tests/recorded/<name>.json` (hand-made) and
//! `tests/recorded/real-v1.34.4/<name>.json` (recorded on real clusters),
//! each a whole [`Snapshot`] as the collector would save it; node facts
//! in `tests/recorded/node/<case>/facts.json`. Every top-level fixture is
//! loaded and diagnosed by `doctor_snapshot.rs`, every snapshot anywhere
//! under `recorded/` is redacted by `doctor_redact.rs`.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use unstuck_core::doctor::{
    DiagnoseOptions, Finding, FindingKind, Plan, ServiceLookup, Snapshot, diagnose,
    node::NodeFacts, plan,
};

/// `tests/recorded/`.
pub fn recorded_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("recorded")
}

/// The text of `tests/recorded/<path>`, or a panic naming the file.
pub fn recorded_text(path: impl AsRef<Path>) -> String {
    let path = recorded_dir().join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// `tests/recorded/<path>` parsed as JSON into a `T`, or a panic naming
/// the file.
pub fn read_recorded<T: serde::de::DeserializeOwned>(path: impl AsRef<Path>) -> T {
    let path = path.as_ref();
    serde_json::from_str(&recorded_text(path))
        .unwrap_or_else(|e| panic!("parsing {}: {e}", recorded_dir().join(path).display()))
}

/// Loads `tests/recorded/<name>.json` (the `.json` may be given or not).
pub fn load_snapshot(name: &str) -> Snapshot {
    let file = if name.ends_with(".json") {
        name.to_owned()
    } else {
        format!("{name}.json")
    };
    read_recorded(file)
}

/// A snapshot recorded on a real v1.34.4 cluster:
/// `tests/recorded/real-v1.34.4/<name>.json`.
pub fn recorded(name: &str) -> Snapshot {
    load_snapshot(&format!("real-v1.34.4/{name}"))
}

/// What the node doctor gathered in one recorded case:
/// `tests/recorded/node/<case>/facts.json`.
pub fn node_facts(case: &str) -> NodeFacts {
    read_recorded(format!("node/{case}/facts.json"))
}

/// Every snapshot anywhere under `tests/recorded/` (node facts excepted),
/// named by its path there, sorted.
pub fn all_snapshots() -> Vec<(String, Snapshot)> {
    let root = recorded_dir();
    let mut out = Vec::new();
    let mut dirs = vec![root.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "json") {
                continue;
            }
            let name = path.strip_prefix(&root).unwrap().display().to_string();
            let value: serde_json::Value = read_recorded(&name);
            // Node facts carry a takenAt too; they are not Snapshots.
            if value.get("takenAt").is_none() || path.components().any(|c| c.as_os_str() == "node")
            {
                continue;
            }
            let snapshot: Snapshot = serde_json::from_value(value)
                .unwrap_or_else(|e| panic!("parsing {}: {e}", path.display()));
            out.push((name, snapshot));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
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
            (f.kind(), who)
        })
        .collect()
}

/// The findings of one kind.
pub fn of_kind(findings: &[Finding], kind: FindingKind) -> Vec<&Finding> {
    findings.iter().filter(|f| f.kind() == kind).collect()
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
