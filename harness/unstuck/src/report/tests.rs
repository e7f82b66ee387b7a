use super::*;
use unstuck_core::doctor::{BlockerGraph, DiagnoseOptions, Snapshot, diagnose, plan};

/// A snapshot recorded while scenario dead-admission-webhook's webhook
/// rejected its namespace's deletes (the core's test fixture).
fn recorded_graph() -> BlockerGraph {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../unstuck-core/tests/recorded/real-v1.34.4/dead-admission-webhook.json");
    let s: Snapshot = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let opts = DiagnoseOptions {
        stuck_after: std::time::Duration::from_secs(3),
        ..Default::default()
    };
    let findings = diagnose(&s, &opts);
    BlockerGraph::build(&findings, &plan(&findings, &s), &s)
}

fn run_with(graphs: Vec<StepGraph>) -> RunReport {
    let mut s: ScenarioReport = serde_json::from_value(serde_json::json!({
        "name": "dead-admission-webhook", "description": "", "catalog_case": null,
        "file": "/s/10.yaml", "namespaces": {"map": {"shop": "shop"}},
        "outcome": {"result": "passed"}, "steps": [], "symptoms": [],
        "findings": [], "remedies": [], "time_to_detect_ms": null,
        "time_to_recover_ms": null, "duration_ms": 5,
        "cleanup": {"reverted": [], "deleted": [], "forced": [], "leaked": []},
        "out_dir": "/o"
    }))
    .unwrap();
    s.graphs = graphs;
    RunReport {
        started_at: String::new(),
        cluster: "local cluster 'run-x'".into(),
        k8s_version: "v1.34.4".into(),
        provider: Default::default(),
        shard: None,
        duration_ms: 1,
        scenarios: vec![s],
    }
}

#[test]
fn the_markdown_draws_each_doctor_steps_graph_naming_its_root_cause() {
    let report = run_with(vec![StepGraph {
        step: 4,
        graph: recorded_graph(),
    }]);
    let md = report.markdown();
    assert!(md.contains("### What waited on what"), "{md}");
    assert!(
        md.contains("<summary><b>dead-admission-webhook</b>, doctor step 4: root cause: Service policy-system/policy-webhook: gone (ServiceNotFound) (SetWebhookFailurePolicy (step "),
        "{md}"
    );
    let block = md
        .split("```mermaid\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .unwrap_or_else(|| panic!("a mermaid block: {md}"));
    assert!(block.starts_with("flowchart TD\n"));
    let root = block
        .lines()
        .find(|l| l.contains("Service policy-system/policy-webhook: gone"))
        .unwrap_or_else(|| panic!("{block}"));
    let id = root.trim().split('[').next().unwrap();
    assert!(block.contains(&format!("class {id} root")), "{block}");
    // The JSON report keeps it, and a merge reads it back.
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["scenarios"][0]["graphs"][0]["step"], 4);
    let back: RunReport = serde_json::from_value(json).unwrap();
    assert_eq!(
        back.scenarios[0].graphs[0].graph,
        report.scenarios[0].graphs[0].graph
    );
}

#[test]
fn the_junit_suite_and_classes_are_stable_from_run_to_run() {
    let a = run_with(Vec::new());
    let mut b = run_with(Vec::new());
    b.cluster = "local cluster 'run-y'".into();
    let (xa, xb) = (a.junit().unwrap(), b.junit().unwrap());
    let suite = |x: &str| {
        x.split("<testsuite name=\"")
            .nth(1)
            .and_then(|r| r.split('"').next())
            .map(str::to_owned)
    };
    assert_eq!(suite(&xa), suite(&xb), "{xa}\n{xb}");
    assert_eq!(
        suite(&xa).as_deref(),
        Some("unstuck scenarios (v1.34.4, provider local)")
    );
    // A class per scenario file, under the provider and version.
    assert!(
        xa.contains("classname=\"unstuck.local.v1_34_4.10\""),
        "{xa}"
    );
    assert!(
        xb.contains("<property name=\"cluster\" value=\"local cluster &apos;run-y&apos;\"/>"),
        "{xb}"
    );
}

#[test]
fn an_interrupted_scenario_is_skipped_with_why_and_not_counted_as_failed() {
    let mut r = run_with(Vec::new());
    let mut stopped = r.scenarios[0].clone();
    stopped.scenario.name = "orphan-finalizer-configmap".into();
    stopped.scenario.file = "/s/01-orphan-finalizer-configmap.yaml".into();
    stopped.outcome = Outcome::Interrupted {
        step: 3,
        reason: "the run was interrupted".into(),
    };
    r.scenarios.push(stopped);
    assert_eq!((r.passed(), r.failed(), r.interrupted()), (1, 0, 1));
    let x = r.junit().unwrap();
    assert!(
        x.contains("skipped=\"1\"") && x.contains("failures=\"0\""),
        "{x}"
    );
    assert!(
        x.contains("classname=\"unstuck.local.v1_34_4.01-orphan-finalizer-configmap\""),
        "{x}"
    );
    assert!(x.contains("the run was interrupted"), "{x}");
    assert!(r.markdown().contains("1 passed, 0 failed, 1 interrupted"));
    let t = r.terminal();
    assert!(t.contains("STOP  orphan-finalizer-configmap"), "{t}");
    assert!(
        t.contains("stopped:   the run was interrupted") && !t.contains("failure:"),
        "{t}"
    );
}

#[test]
fn the_summary_table_stays_aligned_for_long_scenario_names() {
    let mut r = run_with(Vec::new());
    let mut long = r.scenarios[0].clone();
    long.scenario.name = String::from("webhook-backend-hangs-behind-finalizer-x");
    r.scenarios.push(long);
    let t = r.terminal();
    let rows: Vec<&str> = t
        .lines()
        .filter(|l| l.starts_with("scenario ") || l.contains(" pass "))
        .collect();
    assert_eq!(rows.len(), 3, "{t}");
    let result_at: Vec<usize> = rows
        .iter()
        .map(|l| l.find(" result").or_else(|| l.find(" pass ")).unwrap())
        .collect();
    assert!(result_at.windows(2).all(|w| w[0] == w[1]), "{t}");
}

/// What cleanup could not do and evidence that was not written are
/// in the terminal summary, not only in the JSON.
#[test]
fn the_terminal_says_what_cleanup_and_the_writes_could_not_do() {
    let mut run = run_with(Vec::new());
    let s = &mut run.scenarios[0];
    s.cleanup
        .failed
        .push("deleting ConfigMap a/b: denied (403 Forbidden)".into());
    s.cleanup
        .leaked
        .push("busy mount on pod a/web: reverting it failed".into());
    s.unwritten
        .push("could not write /o/doctor.json: No space left on device".into());
    let text = run.terminal();
    assert!(
        text.contains("cleanup failed: deleting ConfigMap a/b: denied (403 Forbidden)"),
        "{text}"
    );
    assert!(
        text.contains("LEAKED: busy mount on pod a/web: reverting it failed"),
        "{text}"
    );
    assert!(
        text.contains("evidence could not write /o/doctor.json: No space left on device"),
        "{text}"
    );
    let json = serde_json::to_value(&run).unwrap();
    assert_eq!(
        json["scenarios"][0]["unwritten"][0],
        "could not write /o/doctor.json: No space left on device"
    );
    assert_eq!(
        json["scenarios"][0]["cleanup"]["failed"][0],
        "deleting ConfigMap a/b: denied (403 Forbidden)"
    );
}

#[test]
fn without_a_doctor_step_there_is_no_graph_section() {
    assert!(
        !run_with(Vec::new())
            .markdown()
            .contains("What waited on what")
    );
}
