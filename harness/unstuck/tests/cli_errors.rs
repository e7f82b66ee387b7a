//! Bad input gets a clear, actionable error: the `unstuck` binary run the
//! way a user would, with what users get wrong.

use std::process::{Command, Output};

fn unstuck(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_unstuck"));
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("unstuck runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn components_not_built_names_the_setup_command() {
    let o = unstuck(
        &["cluster", "up", "it-nobuild", "--k8s-version", "v1.99.0"],
        &[],
    );
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(
        err.contains("Kubernetes v1.99.0 components are not built"),
        "{err}"
    );
    assert!(
        err.contains("sudo ci/setup.sh --k8s-version v1.99.0"),
        "{err}"
    );
}

#[test]
fn not_root_is_refused_with_the_fix() {
    // setpriv (util-linux) drops to the nobody user for this one command.
    let o = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            env!("CARGO_BIN_EXE_unstuck"),
            "cluster",
            "up",
            "it-notroot",
        ])
        .output()
        .expect("setpriv runs");
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(
        err.contains("must run as root") && err.contains("sudo"),
        "{err}"
    );
}

#[test]
fn a_bad_cluster_name_says_what_is_allowed() {
    let o = unstuck(&["cluster", "up", "Bad_Name"], &[]);
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(
        err.contains("cluster name 'Bad_Name' is not valid") && err.contains("a-z, 0-9 and '-'"),
        "{err}"
    );
}

#[test]
fn a_malformed_scenario_is_named_with_file_line_and_column() {
    let dir = std::env::temp_dir().join(format!("unstuck-cli-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("bad.yaml"),
        "name: bad\ndescription: x\nsteps:\n  - expect:\n      phase: symptom\n      that:\n        - namespaceCondition: {namespace: app, type: NamespaceContentRemaining, status: True}\n",
    )
    .unwrap();
    let o = unstuck(&["scenarios", "--dir", dir.to_str().unwrap()], &[]);
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(err.contains("bad.yaml:7:"), "{err}");
}

#[test]
fn a_wrong_kubeconfig_names_the_file() {
    let o = unstuck(&["doctor", "--kubeconfig", "/nonexistent/kubeconfig"], &[]);
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(err.contains("/nonexistent/kubeconfig"), "{err}");
}

#[test]
fn run_refuses_a_cluster_it_did_not_create_without_opt_in() {
    let o = unstuck(&["run", "--kubeconfig", "/root/some.kubeconfig"], &[]);
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(err.contains("--allow-existing-cluster"), "{err}");
}

#[test]
fn down_of_an_unknown_cluster_says_how_to_list_them() {
    let o = unstuck(&["cluster", "down", "it-never-existed"], &[]);
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(
        err.contains("no local cluster named 'it-never-existed'")
            && err.contains("unstuck cluster list"),
        "{err}"
    );
}

#[test]
fn a_shard_outside_the_split_names_the_form() {
    let o = unstuck(&["run", "--shard", "4/3"], &[]);
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(
        err.contains("--shard '4/3' names a job outside 1..=n") && err.contains("looks like 2/3"),
        "{err}"
    );
}

#[test]
fn merging_a_folder_without_a_report_names_it() {
    let dir = std::env::temp_dir().join(format!("unstuck-no-report-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let o = unstuck(
        &[
            "report",
            "merge",
            dir.to_str().unwrap(),
            "--out",
            "/nonexistent/x",
        ],
        &[],
    );
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(
        err.contains(&format!("{}/report.json", dir.display()))
            && err.contains("the report.json that `unstuck run` wrote"),
        "{err}"
    );
}

#[test]
fn an_empty_shard_writes_an_empty_report_and_succeeds() {
    // Fewer scenarios than jobs: the last job has none. No cluster is
    // started for it (this test runs unprivileged work only).
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let count = std::fs::read_dir(format!("{root}/scenarios"))
        .unwrap()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "yaml"))
        .count();
    assert!(
        count < 99,
        "{count} scenarios: give this test more jobs than that"
    );
    let out = std::env::temp_dir().join(format!("unstuck-empty-shard-{}", std::process::id()));
    let o = unstuck(
        &[
            "run",
            "--shard",
            "99/99",
            "--scenarios",
            &format!("{root}/scenarios"),
            "--fixtures",
            &format!("{root}/fixtures"),
            "--out",
            out.to_str().unwrap(),
        ],
        &[],
    );
    let written: Vec<_> = std::fs::read_dir(&out)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    let report = written
        .first()
        .and_then(|d| std::fs::read_to_string(d.join("report.json")).ok());
    let _ = std::fs::remove_dir_all(&out);
    assert!(o.status.success(), "{}", stderr(&o));
    let report: serde_json::Value =
        serde_json::from_str(&report.expect("report.json written")).unwrap();
    assert_eq!(report["shard"], "99/99");
    assert_eq!(report["scenarios"].as_array().map(Vec::len), Some(0));
}
