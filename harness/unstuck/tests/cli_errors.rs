//! Bad input gets a clear, actionable error: the `unstuck` binary run the
//! way a user would, with what users get wrong.

use std::process::{Command, Output};

mod common;

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
    let dir = common::Scratch::dir("unstuck-cli-bad");
    std::fs::write(
        dir.join("bad.yaml"),
        "name: bad\ndescription: x\nsteps:\n  - expect:\n      phase: symptom\n      that:\n        - namespaceCondition: {namespace: app, type: NamespaceContentRemaining, status: True}\n",
    )
    .unwrap();
    let o = unstuck(&["scenarios", "--dir", dir.to_str().unwrap()], &[]);
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
    let dir = common::Scratch::dir("unstuck-no-report");
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
    let root = common::repo_root().display().to_string();
    let count = std::fs::read_dir(format!("{root}/scenarios"))
        .unwrap()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "yaml"))
        .count();
    assert!(
        count < 99,
        "{count} scenarios: give this test more jobs than that"
    );
    let out = common::Scratch::path("unstuck-empty-shard");
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
    assert!(o.status.success(), "{}", stderr(&o));
    let report: serde_json::Value =
        serde_json::from_str(&report.expect("report.json written")).unwrap();
    assert_eq!(report["shard"], "99/99");
    assert_eq!(report["scenarios"].as_array().map(Vec::len), Some(0));
}

#[test]
fn new_scenario_loads_as_written_and_never_writes_over_a_file() {
    let root = common::repo_root().display().to_string();
    let snapshot = format!(
        "{root}/harness/unstuck-core/tests/recorded/real-v1.34.4/orphan-finalizer-configmap.json"
    );
    let dir = common::Scratch::path("unstuck-new-scenario");
    let (scenarios, fixtures) = (dir.join("scenarios"), dir.join("fixtures"));
    let args = |name: &str| {
        vec![
            "new-scenario".to_string(),
            name.to_string(),
            "--from-snapshot".into(),
            snapshot.clone(),
            "--scenarios".into(),
            scenarios.display().to_string(),
            "--fixtures".into(),
            fixtures.display().to_string(),
        ]
    };
    let run = |name: &str| {
        let a = args(name);
        unstuck(&a.iter().map(String::as_str).collect::<Vec<_>>(), &[])
    };
    let o = run("my-orphan");
    assert!(o.status.success(), "{}", stderr(&o));
    let written = std::fs::read_to_string(scenarios.join("my-orphan.yaml")).unwrap();
    // What it wrote loads, fixtures included.
    let listed = unstuck(
        &[
            "scenarios",
            "--dir",
            scenarios.to_str().unwrap(),
            "--fixtures",
            fixtures.to_str().unwrap(),
        ],
        &[],
    );
    assert!(listed.status.success(), "{}", stderr(&listed));
    assert!(String::from_utf8_lossy(&listed.stdout).contains("my-orphan"));
    // A second time: refused, naming the file, and nothing changed.
    std::fs::write(scenarios.join("my-orphan.yaml"), "edited by hand\n").unwrap();
    let again = run("my-orphan");
    assert!(!again.status.success());
    let err = stderr(&again);
    assert!(
        err.contains("my-orphan.yaml already exists") && err.contains("nothing was written"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(scenarios.join("my-orphan.yaml")).unwrap(),
        "edited by hand\n"
    );
    assert!(written.contains("OrphanFinalizer"), "{written}");
    // Not a snapshot: said so, with the way to make one.
    let bad = unstuck(
        &[
            "new-scenario",
            "x",
            "--from-snapshot",
            concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"),
        ],
        &[],
    );
    assert!(!bad.status.success());
    assert!(stderr(&bad).contains("--save-snapshot"), "{}", stderr(&bad));
}

#[test]
fn a_kind_node_image_not_built_names_the_kind_setup_command() {
    // Docker and kind are set up (ci/test.sh); no image of this version is.
    let o = unstuck(
        &[
            "cluster",
            "up",
            "it-kind-noimage",
            "--provider",
            "kind",
            "--k8s-version",
            "v1.99.0",
        ],
        &[],
    );
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(
        err.contains("node image unstuck.local/kind-node:v1.99.0 is not in Docker")
            && err.contains("never pulls"),
        "{err}"
    );
    assert!(
        err.contains("sudo ci/kind/setup.sh --k8s-version v1.99.0"),
        "{err}"
    );
}

#[test]
fn a_kind_cli_not_built_names_the_kind_setup_command() {
    let o = unstuck(
        &["cluster", "up", "it-kind-nocli", "--provider", "kind"],
        &[("UNSTUCK_KIND", "/nonexistent/kind")],
    );
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(
        err.contains("the kind CLI is not built (/nonexistent/kind)")
            && err.contains("sudo ci/kind/setup.sh"),
        "{err}"
    );
}

#[test]
fn a_provider_and_a_kubeconfig_together_are_refused() {
    let o = unstuck(
        &[
            "run",
            "--provider",
            "kind",
            "--kubeconfig",
            "/nonexistent/kubeconfig",
        ],
        &[],
    );
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(
        err.contains(
            "--provider kind makes throwaway clusters; --kubeconfig runs on an existing one"
        ),
        "{err}"
    );
}

#[test]
fn scenarios_outside_a_checkout_name_the_path_and_the_flag() {
    let elsewhere = common::Scratch::dir("it-no-checkout");
    let o = Command::new(env!("CARGO_BIN_EXE_unstuck"))
        .arg("scenarios")
        .current_dir(&elsewhere)
        .output()
        .expect("unstuck runs");
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(
        err.contains("no scenario directory at scenarios (from ")
            && err.contains(&elsewhere.display().to_string())
            && err.contains("name one with --dir"),
        "{err}"
    );
}

#[test]
fn run_help_documents_its_exit_codes() {
    let o = unstuck(&["run", "--help"], &[]);
    assert!(o.status.success());
    let help = String::from_utf8_lossy(&o.stdout);
    for code in [
        "  0    every scenario passed",
        "  1    a scenario failed",
        "  130  interrupted twice",
    ] {
        assert!(help.contains(code), "{code:?} not in\n{help}");
    }
}

/// `--version` says which commit and which Kubernetes versions; `-V`
/// stays one line for scripts.
#[test]
fn version_names_the_commit_and_the_kubernetes_versions() {
    let long = unstuck(&["--version"], &[]);
    assert!(long.status.success(), "{}", stderr(&long));
    let text = String::from_utf8_lossy(&long.stdout);
    let first = text.lines().next().unwrap_or_default();
    assert!(
        first.starts_with(&format!("unstuck {} (commit ", env!("CARGO_PKG_VERSION"))),
        "{text}"
    );
    assert!(
        text.contains(unstuck::components::NEWEST_K8S_VERSION)
            && text.contains(&format!(
                "default {}",
                unstuck::components::DEFAULT_K8S_VERSION
            )),
        "{text}"
    );
    let short = unstuck(&["-V"], &[]);
    assert_eq!(
        String::from_utf8_lossy(&short.stdout).trim(),
        format!("unstuck {}", env!("CARGO_PKG_VERSION"))
    );
}

/// `unstuck completion SHELL` prints a script the shell accepts, that
/// completes subcommands and the doctor's flags.
#[test]
fn completion_scripts_load_and_know_the_doctors_flags() {
    let bash = unstuck(&["completion", "bash"], &[]);
    assert!(bash.status.success(), "{}", stderr(&bash));
    let script = String::from_utf8_lossy(&bash.stdout).into_owned();
    for words in [
        "_unstuck()",
        "doctor",
        "--allow-apiservice-removal",
        "--context",
    ] {
        assert!(script.contains(words), "{words} not in the bash script");
    }
    // bash itself parses it (syntax only).
    let path = common::Scratch::path("unstuck-completion");
    std::fs::write(&path, &script).unwrap();
    let checked = Command::new("bash").arg("-n").arg(&path).output().unwrap();
    assert!(checked.status.success(), "{}", stderr(&checked));
    for shell in ["zsh", "fish"] {
        let o = unstuck(&["completion", shell], &[]);
        assert!(o.status.success(), "{shell}: {}", stderr(&o));
        assert!(
            String::from_utf8_lossy(&o.stdout).contains("allow-apiservice-removal"),
            "{shell}"
        );
    }
    let bad = unstuck(&["completion", "tcsh"], &[]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        stderr(&bad).contains("possible values: bash"),
        "{}",
        stderr(&bad)
    );
}

/// A run that fails before its first scenario (here: no components for
/// the version) still writes its reports, each scenario failed at step 0
/// with the reason: CI reads them.
#[test]
fn a_run_that_cannot_start_still_writes_its_reports() {
    let out = common::Scratch::path("unstuck-unstarted");
    let (scenarios, fixtures) = (
        common::repo_root().join("scenarios"),
        common::repo_root().join("fixtures"),
    );
    let o = unstuck(
        &[
            "run",
            "--scenarios",
            scenarios.to_str().unwrap(),
            "--fixtures",
            fixtures.to_str().unwrap(),
            "--k8s-version",
            "v1.99.0",
            "--filter",
            "orphan-finalizer-configmap",
            "--out",
            out.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let run = std::fs::read_dir(&out)
        .expect("the run folder")
        .flatten()
        .next()
        .expect("one run")
        .path();
    let junit = std::fs::read_to_string(run.join("junit.xml")).expect("junit.xml");
    let summary = std::fs::read_to_string(run.join("summary.md")).expect("summary.md");
    // Its report read back, with colour forced on and off (`--color`).
    let merged = out.join("merged");
    let merged = merged.to_str().unwrap();
    let painted = |color: &str| {
        let o = unstuck(
            &[
                "--color",
                color,
                "report",
                "merge",
                run.to_str().unwrap(),
                "--out",
                merged,
            ],
            &[],
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let (always, never) = (painted("always"), painted("never"));
    assert!(always.contains("\x1b[1;31mFAIL\x1b[0m"), "{always:?}");
    assert!(
        never.contains("FAIL  orphan-finalizer-configmap") && !never.contains('\x1b'),
        "{never:?}"
    );
    assert!(junit.contains("failures=\"1\""), "{junit}");
    assert!(
        junit.contains("the run could not start") && junit.contains("v1.99.0"),
        "{junit}"
    );
    assert!(summary.contains("0 passed, 1 failed"), "{summary}");
}

/// `run` and `cluster gc` take `--context` as kubectl does: a context the
/// kubeconfig does not have is an error that lists the ones it has.
#[test]
fn a_context_the_kubeconfig_lacks_is_named_with_the_ones_it_has() {
    let path = common::Scratch::path("unstuck-ctx");
    std::fs::write(
        &path,
        "apiVersion: v1\nkind: Config\ncurrent-context: staging\n\
         clusters:\n- name: s\n  cluster: {server: 'https://127.0.0.1:1'}\n- name: p\n  cluster: {server: 'https://127.0.0.1:2'}\n\
         contexts:\n- name: staging\n  context: {cluster: s, user: u}\n- name: prod\n  context: {cluster: p, user: u}\n\
         users:\n- name: u\n  user: {token: t}\n",
    )
    .unwrap();
    let kc = path.to_str().unwrap();
    for args in [
        vec!["run", "--kubeconfig", kc, "--context", "prd"],
        vec!["cluster", "gc", "--kubeconfig", kc, "--context", "prd"],
    ] {
        let o = unstuck(&args, &[]);
        let err = stderr(&o);
        assert!(!o.status.success(), "{args:?}: {err}");
        assert!(
            err.contains("no context 'prd'") && err.contains("staging, prod"),
            "{args:?}: {err}"
        );
    }
}
