use super::*;
use crate::report::Outcome;

fn scenario(name: &str, ns: &str, symptoms: &[&str], passed: bool) -> ScenarioReport {
    let mut s: ScenarioReport = serde_json::from_value(serde_json::json!({
        "name": name, "description": "", "catalog_case": null,
        "file": format!("/s/{name}.yaml"), "namespaces": {"map": {"app": ns}},
        "outcome": {"result": "passed"}, "steps": [], "symptoms": symptoms,
        "findings": [], "remedies": [], "time_to_detect_ms": null,
        "time_to_recover_ms": null, "duration_ms": 5,
        "cleanup": {"reverted": [], "deleted": [], "forced": [], "leaked": []},
        "out_dir": "/o"
    }))
    .unwrap();
    if !passed {
        s.outcome = Outcome::Failed {
            step: 3,
            reason: "symptom never seen".into(),
        };
    }
    s
}

fn run(version: &str, scenarios: Vec<ScenarioReport>) -> RunReport {
    RunReport {
        started_at: String::new(),
        cluster: "local cluster 'run-x'".into(),
        k8s_version: version.into(),
        provider: Default::default(),
        shard: None,
        duration_ms: 1,
        scenarios,
    }
}

fn matrix() -> MatrixReport {
    // The v1.34.4 line is recorded; the v1.37.2 one is a made-up change.
    MatrixReport::new(vec![
        run(
            "v1.34.4",
            vec![
                scenario(
                    "broken-runtime-container",
                    "app-ckc8kk",
                    &[
                        r#"Event Warning Pod/web: FailedKillPod "error killing pod: [failed to "KillContainer" for "app" with KillContainerError: "rpc error: code = DeadlineExceeded desc = context deadline exceeded"]" (pod app-ckc8kk/web)"#,
                    ],
                    true,
                ),
                scenario(
                    "orphan-finalizer-configmap",
                    "app-aaaaaa",
                    &[
                        "ConfigMap app-aaaaaa/mymap has deletionTimestamp 2026-11-23T20:58:10Z and finalizers [\"kubernetes\"]",
                    ],
                    true,
                ),
            ],
        ),
        run(
            "v1.37.2",
            vec![
                scenario(
                    "broken-runtime-container",
                    "app-zzzzzz",
                    &[
                        r#"Event Warning Pod/web: FailedKillPod "error killing pod: [failed to "KillContainer" for "app" with KillContainerError: "rpc error: code = DeadlineExceeded desc = the runtime did not answer"]" (pod app-zzzzzz/web)"#,
                    ],
                    false,
                ),
                scenario(
                    "orphan-finalizer-configmap",
                    "app-bbbbbb",
                    &[
                        "ConfigMap app-bbbbbb/mymap has deletionTimestamp 2026-11-24T01:00:00Z and finalizers [\"kubernetes\"]",
                    ],
                    true,
                ),
            ],
        ),
    ])
}

#[test]
fn the_table_says_which_scenario_passes_where() {
    let m = matrix();
    let t = m.terminal();
    let row = t
        .lines()
        .find(|l| l.starts_with("broken-runtime-container"))
        .unwrap();
    assert!(row.contains("pass") && row.contains("FAIL"), "{t}");
    assert_eq!(m.failed(), 1);
    assert!(t.ends_with("3 passed, 1 failed\n"), "{t}");
    let md = m.markdown();
    assert!(
        md.contains("| broken-runtime-container | ✅ | ❌ |"),
        "{md}"
    );
}

#[test]
fn drift_is_what_a_version_says_differently_not_run_names_or_times() {
    let d = matrix().drift();
    assert_eq!(d.len(), 2, "{d:#?}");
    assert!(d.iter().all(|d| d.scenario == "broken-runtime-container"));
    let only_new = d.iter().find(|d| d.seen_on == ["v1.37.2"]).unwrap();
    assert!(
        only_new.line.contains("the runtime did not answer"),
        "{only_new:?}"
    );
    assert!(only_new.line.contains("pod app-RUN/web"), "{only_new:?}");
    assert_eq!(only_new.not_on, ["v1.34.4"]);
}

#[test]
fn one_junit_suite_per_version() {
    let x = matrix().junit().unwrap();
    assert_eq!(x.matches("<testsuite ").count(), 2, "{x}");
    assert!(x.contains("v1.34.4") && x.contains("v1.37.2"));
}

#[test]
fn versions_are_a_list_or_the_supported_set() {
    let sup = ["v1.33.13", "v1.34.4"];
    assert_eq!(parse_versions("supported", &sup).unwrap(), sup);
    assert_eq!(
        parse_versions("v1.34.4, v1.37.2", &sup).unwrap(),
        ["v1.34.4", "v1.37.2"]
    );
    let e = parse_versions("1.34", &sup).unwrap_err().to_string();
    assert!(e.contains("versions look like v1.34.4"), "{e}");
    let e = parse_versions("v1.34.4,v1.34.4", &sup).unwrap_err();
    assert_eq!(e, VersionsError::Twice("v1.34.4".into()));
    assert!(e.to_string().contains("twice"), "{e}");
}

#[test]
fn findings_are_compared_as_values_not_as_their_wording() {
    use crate::report::{FoundKind, ReportedFinding};
    use unstuck_core::doctor::{FindingKind, ObjectRef, node::NodeCause};
    let found = |ns: &str, kind: FoundKind, name: &str, summary: &str| ReportedFinding {
        kind,
        subject: ObjectRef {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: Some(ns.into()),
            name: name.into(),
            uid: Some(format!("uid-of-{ns}")),
        },
        summary: summary.into(),
    };
    let orphan = FoundKind::Api(FindingKind::OrphanFinalizer);
    let mut old = scenario("orphan", "app-aaaaaa", &[], true);
    old.found = vec![found(
        "app-aaaaaa",
        orphan,
        "mymap",
        "ConfigMap app-aaaaaa/mymap holds finalizer kubernetes (terminating for 12s)",
    )];
    // The same finding, worded otherwise, another run id and UID; and
    // one finding the old version did not make.
    let mut new = scenario("orphan", "app-bbbbbb", &[], true);
    new.found = vec![
        found(
            "app-bbbbbb",
            orphan,
            "mymap",
            "the finalizer kubernetes holds ConfigMap app-bbbbbb/mymap, 31 s after its delete",
        ),
        found(
            "app-bbbbbb",
            FoundKind::Node(NodeCause::BusyVolume),
            "mymap",
            "a volume is busy",
        ),
    ];
    let m = MatrixReport::new(vec![run("v1.34.4", vec![old]), run("v1.37.2", vec![new])]);
    let drift: Vec<_> = m
        .drift()
        .into_iter()
        .filter(|d| d.what == "finding")
        .collect();
    assert_eq!(drift.len(), 1, "{drift:#?}");
    assert_eq!(drift[0].line, "BusyVolume ConfigMap app-RUN/mymap");
    assert_eq!(drift[0].seen_on, ["v1.37.2"]);
    assert_eq!(drift[0].not_on, ["v1.34.4"]);
}
