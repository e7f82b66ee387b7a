//! The whole suite end to end on the newest supported Kubernetes version
//! (besides the default version, which every other test runs): the
//! `unstuck run --k8s-version` a team validating a new version runs, with
//! the components ci/setup.sh built for that version.

use std::process::Command;

use unstuck::components::{DEFAULT_K8S_VERSION, NEWEST_K8S_VERSION};

mod common;

#[test]
fn every_scenario_passes_on_the_newest_supported_version() {
    assert_ne!(
        NEWEST_K8S_VERSION, DEFAULT_K8S_VERSION,
        "the newest version is the default: this test would repeat tests/scenarios.rs"
    );
    let root = common::repo_root();
    let out = common::Scratch::path("unstuck-newest");
    let run = Command::new(env!("CARGO_BIN_EXE_unstuck"))
        .arg("run")
        .args(["--k8s-version", NEWEST_K8S_VERSION])
        .arg("--scenarios")
        .arg(root.join("scenarios"))
        .arg("--fixtures")
        .arg(root.join("fixtures"))
        .arg("--out")
        .arg(&out)
        // Two clusters of its own at once, not four: beside the other test
        // binaries a 2-core machine is short of CPU already (see
        // ci/run-tests.sh).
        .args(["--clusters", "2"])
        .output()
        .expect("unstuck run starts");
    let stderr = String::from_utf8_lossy(&run.stderr).into_owned();
    let dir = std::fs::read_dir(&out)
        .ok()
        .and_then(|d| {
            d.flatten()
                .map(|e| e.path())
                .find(|p| p.join("report.json").exists())
        })
        .unwrap_or_else(|| panic!("no report written; unstuck run said:\n{stderr}"));
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();

    assert_eq!(report["k8s_version"], NEWEST_K8S_VERSION, "{stderr}");
    let scenarios = report["scenarios"].as_array().expect("scenarios");
    let on_disk = unstuck::core::scenario::load_dir(&root.join("scenarios"))
        .expect("scenarios load")
        .len();
    assert_eq!(scenarios.len(), on_disk, "every scenario ran");
    let failed: Vec<String> = scenarios
        .iter()
        .filter(|s| {
            s["outcome"]["result"] != "passed"
                || !s["cleanup"]["leaked"].as_array().is_none_or(Vec::is_empty)
        })
        .map(|s| {
            format!(
                "{}: {} leaked {}",
                s["name"], s["outcome"], s["cleanup"]["leaked"]
            )
        })
        .collect();
    // The run's folder goes with `out`: kept first when it failed.
    let kept = match failed.is_empty() && run.status.success() {
        true => std::path::PathBuf::new(),
        false => common::keep_evidence(&dir, "newest-version"),
    };
    assert!(
        failed.is_empty() && run.status.success(),
        "on Kubernetes {NEWEST_K8S_VERSION} (evidence kept in {}):\n{}\n{stderr}",
        kept.display(),
        failed.join("\n")
    );
}
