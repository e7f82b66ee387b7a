//! `unstuck run` as a user runs it, on a real local cluster: the
//! Markdown report (what a CI job summary shows) draws each scenario's
//! doctor step as a Mermaid diagram that names the root cause the
//! scenario planted, and report.json carries the same graph.
//! Needs root and the components built by ci/setup.sh (CI runs both).

use std::{path::PathBuf, process::Command};

mod common;

/// A scenarios folder holding two built-in scenarios: a ConfigMap held
/// by a dead finalizer, and a namespace held by a CR held by one.
fn scenarios() -> common::Scratch {
    common::scenarios_folder(
        "graph",
        &[
            "01-orphan-finalizer-configmap.yaml",
            "02-uninstalled-crd-controller.yaml",
        ],
    )
}

/// The folded diagram of scenario `name`: its `<summary>` line and the
/// Mermaid text.
fn diagram<'a>(md: &'a str, name: &str) -> (&'a str, &'a str) {
    let start = md
        .find(&format!("<summary><b>{name}</b>"))
        .unwrap_or_else(|| panic!("a diagram of {name}:\n{md}"));
    let part = &md[start..];
    let summary = part.lines().next().unwrap();
    let block = part
        .split("```mermaid\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .unwrap_or_else(|| panic!("a mermaid block for {name}:\n{md}"));
    (summary, block)
}

/// The Mermaid id of the node whose label contains every one of `parts`,
/// checked to be drawn as a root cause.
fn root_node(block: &str, parts: &[&str]) -> String {
    let line = block
        .lines()
        .find(|l| l.contains("[\"") && parts.iter().all(|p| l.contains(p)))
        .unwrap_or_else(|| panic!("a node with {parts:?}:\n{block}"));
    let id = line.trim().split('[').next().unwrap().to_owned();
    let roots = block
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("class ")
                .and_then(|l| l.strip_suffix(" root"))
        })
        .unwrap_or_else(|| panic!("a root class line:\n{block}"));
    assert!(
        roots.split(',').any(|r| r == id),
        "{id} drawn as a root:\n{block}"
    );
    id
}

#[test]
fn the_markdown_report_of_a_run_draws_each_doctor_step_down_to_its_root_cause() {
    let out = common::repo_root().join(format!(
        "target/unstuck-test-runs/report-graph-{}",
        std::process::id()
    ));
    let scenarios = scenarios();
    let run = Command::new(env!("CARGO_BIN_EXE_unstuck"))
        .arg("run")
        .arg("--scenarios")
        .arg(&scenarios)
        .arg("--fixtures")
        .arg(common::repo_root().join("fixtures"))
        .arg("--out")
        .arg(&out)
        .env("UNSTUCK_LOG", "warn")
        .output()
        .expect("unstuck run");
    let said = format!(
        "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
        run.status.code(),
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    assert_eq!(run.status.code(), Some(0), "{said}");
    let dirs: Vec<PathBuf> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(dirs.len(), 1, "one run folder in {}", out.display());
    let md = std::fs::read_to_string(dirs[0].join("summary.md")).expect("summary.md");

    // The ConfigMap waits on its key, whose owner is dead: the root, and
    // the plan's first step removes it.
    let (summary, block) = diagram(&md, "orphan-finalizer-configmap");
    assert!(
        summary.contains("doctor step 4: root cause: finalizer kubernetes on ConfigMap app-")
            && summary.ends_with("/mymap: owner dead (RemoveFinalizers (step 1))</summary>"),
        "{summary}"
    );
    let cm = block
        .lines()
        .find(|l| l.contains("ConfigMap app-") && l.contains("/mymap (Terminating"))
        .unwrap_or_else(|| panic!("the ConfigMap:\n{block}"));
    let cm = cm.trim().split('[').next().unwrap();
    let key = root_node(
        block,
        &["finalizer kubernetes: owner dead", "root: RemoveFinalizers"],
    );
    assert!(
        block.contains(&format!("  {cm} -->|\"#35;1\"| {key}\n")),
        "{block}"
    );

    // The namespace waits on the Kiali CR, the CR on its key (the run's
    // own API group), whose owner is dead.
    let (summary, block) = diagram(&md, "uninstalled-crd-controller");
    assert!(
        summary.contains("/finalizer on Kiali istio-")
            && summary.contains("/kiali: owner dead (RemoveFinalizers (step "),
        "{summary}"
    );
    let ns = block
        .lines()
        .find(|l| l.contains("[\"namespace istio-"))
        .unwrap_or_else(|| panic!("the namespace:\n{block}"));
    let ns = ns.trim().split('[').next().unwrap();
    let cr = block
        .lines()
        .find(|l| l.contains("[\"Kiali istio-"))
        .unwrap_or_else(|| panic!("the CR:\n{block}"));
    let cr = cr.trim().split('[').next().unwrap();
    let key = root_node(block, &["finalizer kiali", "/finalizer: owner dead"]);
    assert!(block.contains(&format!("  {ns} -->|")), "{block}");
    assert!(
        block
            .lines()
            .any(|l| l.starts_with(&format!("  {ns} -->|")) && l.ends_with(&format!("| {cr}"))),
        "{block}"
    );
    assert!(
        block
            .lines()
            .any(|l| l.starts_with(&format!("  {cr} -->|")) && l.ends_with(&format!("| {key}"))),
        "{block}"
    );

    // report.json has the same graphs, whole.
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dirs[0].join("report.json")).unwrap())
            .unwrap();
    let s = json["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "orphan-finalizer-configmap")
        .expect("the scenario in report.json");
    let graph = &s["graphs"][0];
    assert_eq!(graph["step"], 4, "{graph:#}");
    let roots = graph["graph"]["roots"].as_array().unwrap();
    assert_eq!(roots.len(), 1, "{graph:#}");
    assert_eq!(roots[0]["state"], "dead");
    assert_eq!(roots[0]["remedy"]["action"], "RemoveFinalizers");
    assert!(
        roots[0]["id"]
            .as_str()
            .unwrap()
            .starts_with("finalizer:kubernetes@object:v1:ConfigMap:app-"),
        "{graph:#}"
    );
    let _ = std::fs::remove_dir_all(&out);
}
