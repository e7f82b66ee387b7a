//! The reusable GitHub Action (`action.yml` at the repository's root):
//! its definition is checked as GitHub reads it (every input it passes is
//! declared, every output it promises is written by its body), and its
//! body, `ci/action/run.sh`, runs here as a runner would run it — with
//! `GITHUB_STEP_SUMMARY` and `GITHUB_OUTPUT` files — on real local
//! clusters: `command: run` with one scenario, `command: doctor` on a
//! cluster with a stuck namespace. Needs root and the components
//! (ci/setup.sh); never skipped.

use std::{collections::BTreeMap, path::Path, process::Command};

use serde_json::Value;

mod common;

fn action() -> Value {
    let path = common::repo_root().join("action.yml");
    let text = std::fs::read_to_string(&path).expect("action.yml");
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `name=value` lines of a `GITHUB_OUTPUT` file.
fn outputs(file: &Path) -> BTreeMap<String, String> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// Runs the action's body with `env` as its inputs, in a directory of
/// its own that goes when it returns (or panics); its exit code, the job
/// summary it wrote and its outputs.
fn run_action(tag: &str, env: &[(&str, &str)]) -> (i32, String, BTreeMap<String, String>) {
    let dir = common::Scratch::dir(&format!("unstuck-action-{tag}"));
    let (summary, output) = (dir.join("summary"), dir.join("output"));
    let o = Command::new("bash")
        .arg(common::repo_root().join("ci/action/run.sh"))
        .current_dir(&dir)
        .env("GITHUB_STEP_SUMMARY", &summary)
        .env("GITHUB_OUTPUT", &output)
        // The test build's binary: no release build in CI.
        .env("UNSTUCK_BIN", env!("CARGO_BIN_EXE_unstuck"))
        .envs(env.iter().copied())
        .output()
        .expect("bash runs");
    eprintln!("{}", common::output_text(&o));
    let summary = std::fs::read_to_string(&summary).unwrap_or_default();
    (o.status.code().unwrap_or(-1), summary, outputs(&output))
}

#[test]
fn the_action_passes_only_declared_inputs_and_promises_only_written_outputs() {
    let a = action();
    let inputs = a["inputs"].as_object().expect("inputs");
    assert_eq!(a["runs"]["using"], "composite");
    let steps = a["runs"]["steps"].as_array().expect("steps");
    assert_eq!(steps.len(), 1, "{steps:?}");
    let step = &steps[0];
    assert_eq!(step["shell"], "bash");
    assert!(
        step["run"]
            .as_str()
            .unwrap()
            .contains("$GITHUB_ACTION_PATH/ci/action/run.sh"),
        "{step:?}"
    );
    let body = std::fs::read_to_string(common::repo_root().join("ci/action/run.sh"))
        .expect("ci/action/run.sh");
    // Each env value is `${{ inputs.NAME }}` of a declared input, and the
    // body reads each variable it is given.
    let env = step["env"].as_object().expect("env");
    for (var, value) in env {
        let value = value.as_str().unwrap();
        let name = value
            .strip_prefix("${{ inputs.")
            .and_then(|v| v.strip_suffix(" }}"))
            .unwrap_or_else(|| panic!("{var}: {value}"));
        assert!(inputs.contains_key(name), "{var} passes undeclared {name}");
        assert!(body.contains(var.as_str()), "run.sh never reads {var}");
    }
    for name in inputs.keys() {
        assert!(
            env.values()
                .any(|v| v.as_str() == Some(&format!("${{{{ inputs.{name} }}}}"))),
            "input {name} reaches nothing"
        );
    }
    // Each output is the step's output of that name, which the body writes.
    for (name, o) in a["outputs"].as_object().expect("outputs") {
        assert_eq!(
            o["value"].as_str().unwrap(),
            format!("${{{{ steps.unstuck.outputs.{name} }}}}"),
        );
        assert!(
            body.contains(&format!("echo \"{name}=")),
            "run.sh never writes output {name}"
        );
    }
    assert_eq!(step["id"], "unstuck");
}

#[test]
fn command_run_posts_the_run_summary_and_names_its_reports() {
    let out = common::Scratch::path("unstuck-action-runs");
    let out_arg = out.display().to_string();
    let (rc, summary, outs) = run_action(
        "run",
        &[
            ("UNSTUCK_ACTION_COMMAND", "run"),
            ("UNSTUCK_ACTION_ARGS", "--filter orphan-finalizer-configmap"),
            ("UNSTUCK_ACTION_OUT", &out_arg),
            // CI has run ci/setup.sh already.
            ("UNSTUCK_ACTION_SETUP", "false"),
        ],
    );
    assert_eq!(rc, 0, "{summary}");
    assert_eq!(
        outs.get("exit-code").map(String::as_str),
        Some("0"),
        "{outs:?}"
    );
    assert!(
        summary.starts_with("## unstuck: 1 passed, 0 failed"),
        "{summary}"
    );
    assert!(
        summary.contains("orphan-finalizer") && summary.contains("passed"),
        "{summary}"
    );
    for output in ["report", "junit"] {
        let path = outs
            .get(output)
            .unwrap_or_else(|| panic!("no {output}: {outs:?}"));
        assert!(Path::new(path).is_file(), "{output}={path} is no file");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn command_doctor_posts_what_it_found_on_the_jobs_cluster() {
    let cluster = common::up(&common::cluster_name("it-action-doctor")).await;
    let client = cluster.client();
    common::create_namespace(&client, "shop").await;
    common::held_configmap(&client, "shop", "cart", "example.com/gone").await;
    let kubeconfig = cluster.kubeconfig().display().to_string();
    // As a CI job would ask: fail the step when something is stuck.
    let args = format!("--kubeconfig {kubeconfig} -n shop --stuck-after 0s --fail-on-findings");
    let (rc, summary, outs) = run_action(
        "doctor",
        &[
            ("UNSTUCK_ACTION_COMMAND", "doctor"),
            ("UNSTUCK_ACTION_ARGS", &args),
        ],
    );
    // A dry run that found something: the doctor's own exit code (3 with
    // --fail-on-findings), passed through, and its plan in the summary.
    assert_eq!(rc, 3, "exit 3: findings, nothing applied\n{summary}");
    assert_eq!(outs.get("exit-code"), Some(&rc.to_string()), "{outs:?}");
    assert!(
        summary.starts_with(&format!("## unstuck doctor (exit {rc})")),
        "{summary}"
    );
    assert!(
        summary.contains("shop/cart") && summary.contains("example.com/gone"),
        "{summary}"
    );
    // A command the action does not know is refused before anything runs.
    let (rc, _, outs) = run_action("bad", &[("UNSTUCK_ACTION_COMMAND", "install")]);
    assert_eq!(rc, 2);
    assert_eq!(outs.get("exit-code").map(String::as_str), Some("2"));
    let layout = cluster.layout().clone();
    let report = cluster.down().await;
    assert!(report.errors.is_empty(), "{report}");
    assert!(unstuck::cluster::local::leftovers(&layout).is_empty());
}
