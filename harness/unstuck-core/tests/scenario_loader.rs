//! The scenario loader, without a cluster: every malformed file in
//! `tests/malformed/` must fail at an exact `line:column`, and valid files
//! must come out as the right types.

use std::{
    fs,
    path::{Path, PathBuf},
    time,
};

use unstuck_core::{
    duration::Duration,
    scenario::{
        Condition, ConditionStatus, DEFAULT_EXPECT_TIMEOUT, DEFAULT_SCENARIO_TIMEOUT, DeleteSpec,
        LoadError, LogicalRef, Phase, Position, Scenario, Step, default_api_version, is_namespaced,
        load_dir, load_file, load_str,
    },
};

/// Which stage rejects a malformed file.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Stage {
    /// The YAML parser / serde: syntax, unknown keys, wrong types.
    Parse,
    /// Post-parse validation: names, namespaces, kinds.
    Invalid,
}
use Stage::{Invalid, Parse};

/// (file in tests/malformed, expected `line:column`, stage, part of the message)
const MALFORMED: &[(&str, &str, Stage, &str)] = &[
    (
        "apply-long-form-unknown-field.yaml",
        "5:35",
        Parse,
        "unknown field `namepsace`, expected one of file, namespace",
    ),
    (
        "bad-duration.yaml",
        "7:16",
        Parse,
        r#"invalid duration "30 seconds": it contains spaces"#,
    ),
    (
        "bad-incident-id.yaml",
        "3:11",
        Invalid,
        r#"incident "https://github.com/kubescape/kubescape/issues/1571" should name a public thread as owner/repo#number"#,
    ),
    (
        "bad-name-chars.yaml",
        "1:7",
        Invalid,
        r#"invalid scenario name "Orphan_Finalizer""#,
    ),
    (
        "bad-seed-id.yaml",
        "4:16",
        Invalid,
        r#"seed id "4" should be the three-digit number"#,
    ),
    (
        "cluster-scoped-with-namespace.yaml",
        "5:60",
        Invalid,
        "PersistentVolume is cluster-scoped",
    ),
    (
        "container-image-not-built.yaml",
        "7:14",
        Invalid,
        r#"image "nginx:latest" is not one unstuck builds"#,
    ),
    (
        "container-undeclared-namespace.yaml",
        "9:28",
        Invalid,
        r#"namespace "monitoring" is not declared"#,
    ),
    (
        "container-unknown-field.yaml",
        "8:7",
        Parse,
        "unknown field `falut`, expected one of name, image, role, fault, service, register",
    ),
    (
        "delete-unknown-propagation-policy.yaml",
        "7:26",
        Parse,
        "unknown variant `Cascade`, expected one of Foreground, Background, Orphan",
    ),
    (
        "doctor-apiservice-removal-without-apply.yaml",
        "8:32",
        Invalid,
        "allowApiServiceRemoval needs apply: true",
    ),
    (
        "doctor-conversion-changes-without-apply.yaml",
        "9:32",
        Invalid,
        "allowConversionChanges needs apply: true",
    ),
    (
        "doctor-finding-expected-and-forbidden.yaml",
        "8:49",
        Invalid,
        "\"OrphanFinalizer\" is both expected and forbidden",
    ),
    (
        "doctor-unknown-field.yaml",
        "8:7",
        Parse,
        "unknown field `dryRun`, expected one of expectFindings, expectSaying, forbidFindings, apply",
    ),
    (
        "duplicate-key.yaml",
        "4:1",
        Parse,
        "duplicate mapping key `description`",
    ),
    (
        "duplicate-namespace.yaml",
        "3:23",
        Invalid,
        r#"namespace "app" is declared twice"#,
    ),
    (
        "duration-without-unit.yaml",
        "4:10",
        Parse,
        "300 has no unit (write 300s for seconds)",
    ),
    (
        "empty-description.yaml",
        "2:14",
        Invalid,
        "description is empty",
    ),
    (
        "empty-file.yaml",
        "1:1",
        Parse,
        "the file holds no scenario",
    ),
    ("empty-steps.yaml", "4:8", Invalid, "steps is empty"),
    ("expect-empty-that.yaml", "8:13", Invalid, "`that` is empty"),
    (
        "expect-missing-phase.yaml",
        "6:7",
        Parse,
        "missing field `phase`",
    ),
    (
        "expect-timeout-exceeds-scenario.yaml",
        "8:16",
        Invalid,
        "waits up to 3m, longer than the whole scenario's timeout of 2m",
    ),
    (
        "fault-missing-namespace.yaml",
        "6:19",
        Parse,
        "missing field `namespace`",
    ),
    (
        "fault-missing-param.yaml",
        "6:7",
        Invalid,
        "fault holdVolume needs `volume` (the volume's name in the pod spec); it is written holdVolume: {pod, namespace, volume}",
    ),
    (
        "fault-param-it-does-not-take.yaml",
        "5:51",
        Invalid,
        "fault busyMount takes no parameter `volume`; it is written busyMount: {pod, namespace}",
    ),
    (
        "fault-unknown-param.yaml",
        "5:52",
        Invalid,
        "fault holdVolume takes no parameter `volum`; it is written holdVolume: {pod, namespace, volume}",
    ),
    (
        "finding-kind-not-pascal-case.yaml",
        "5:31",
        Invalid,
        r#""orphan-finalizer" is not a finding the doctor reports"#,
    ),
    (
        "fixture-path-escapes.yaml",
        "5:12",
        Invalid,
        "must be relative to the fixtures directory",
    ),
    (
        "kubelet-log-pod-without-namespace.yaml",
        "8:57",
        Invalid,
        "`pod` needs `namespace` too",
    ),
    (
        "lowercase-quoted-status.yaml",
        "8:88",
        Parse,
        r#"invalid condition status "false""#,
    ),
    ("missing-name.yaml", "3:1", Parse, "missing field `name`"),
    (
        "misspelled-condition-field.yaml",
        "9:42",
        Parse,
        "unknown field `nmae`, expected one of apiVersion, kind, name, namespace",
    ),
    ("name-too-long.yaml", "1:7", Invalid, "it has 46 characters"),
    (
        "namespace-object-undeclared.yaml",
        "5:37",
        Invalid,
        r#"namespace "other" is not declared"#,
    ),
    (
        "namespaced-kind-without-namespace.yaml",
        "5:20",
        Invalid,
        "a ConfigMap lives in a namespace",
    ),
    (
        "negative-catalog-case.yaml",
        "4:14",
        Parse,
        "catalogCase must be a case number from failure-catalog.md, counted from 1; got -1",
    ),
    (
        "ready-on-a-pod.yaml",
        "8:25",
        Invalid,
        "`ready` applies to Deployments, ReplicaSets and StatefulSets, not to Pod",
    ),
    (
        "recovered-before-doctor.yaml",
        "6:5",
        Invalid,
        "phase: recovered must come after a doctor step",
    ),
    (
        "registry-bad-push-name.yaml",
        "7:14",
        Invalid,
        r#"push "App:v1": repository "App" must be lowercase path components"#,
    ),
    (
        "registry-push-on-a-later-step.yaml",
        "6:35",
        Invalid,
        r#"registry "shop" was started by an earlier step, which pushes its images"#,
    ),
    (
        "registry-unknown-fault.yaml",
        "8:14",
        Parse,
        "unknown variant `offline`, expected one of none, down, tagDeleted, slow",
    ),
    (
        "registry-unknown-field.yaml",
        "7:7",
        Parse,
        "unknown field `pushes`, expected one of name, push, auth, fault",
    ),
    (
        "running-not-a-pod.yaml",
        "8:27",
        Invalid,
        "`running` applies to Pods only, not to Deployment",
    ),
    ("tab-indentation.yaml", "5:2", Parse, "tabs disallowed"),
    (
        "timeout-wrong-type.yaml",
        "4:1",
        Parse,
        "expected a duration",
    ),
    ("two-documents.yaml", "7:1", Parse, "multiple found"),
    (
        "unclosed-flow-mapping.yaml",
        "6:10",
        Parse,
        "did not find expected ',' or '}'",
    ),
    (
        "undeclared-namespace.yaml",
        "6:55",
        Invalid,
        r#"namespace "db" is not declared in the scenario's `namespaces` (declared: app)"#,
    ),
    (
        "unknown-fault.yaml",
        "5:13",
        Parse,
        "unknown variant `killNode`, expected one of busyMount, wedgeShim, stopKubelet",
    ),
    (
        "unknown-kind-without-apiversion.yaml",
        "7:13",
        Invalid,
        "kind Widget is not a well-known kind, so its apiVersion must be given",
    ),
    (
        "unknown-namespace-condition-type.yaml",
        "8:54",
        Invalid,
        r#""NamespaceContentRemainig" is not a condition type of a namespace"#,
    ),
    (
        "unknown-node-condition-type.yaml",
        "8:59",
        Invalid,
        r#""Readyy" is not a condition type of a node; expected one of: Ready,"#,
    ),
    (
        "unknown-phase.yaml",
        "6:14",
        Parse,
        "unknown variant `fixed`, expected one of symptom, recovered",
    ),
    (
        "unknown-step-kind.yaml",
        "6:5",
        Parse,
        "unknown variant `wait`, expected one of apply, delete, fault, expect, doctor",
    ),
    (
        "unknown-top-level-key.yaml",
        "4:1",
        Parse,
        "unknown field `labels`",
    ),
    (
        "unquoted-boolean-status.yaml",
        "11:21",
        Parse,
        r#"condition status is the boolean true, but the API uses strings: quote it, as in status: "True""#,
    ),
    ("yaml11-boolean.yaml", "4:9", Parse, "invalid boolean"),
    (
        "zero-timeout.yaml",
        "4:10",
        Invalid,
        "a timeout of zero can never be met",
    ),
];

const MALFORMED_DIR: &str = "tests/malformed";

fn malformed_files_on_disk() -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(MALFORMED_DIR)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml"))
        .collect();
    names.sort();
    names
}

#[test]
fn every_malformed_file_fails_at_its_exact_line_and_column() {
    let mut failures = Vec::new();
    for &(file, at, stage, message) in MALFORMED {
        let path = Path::new(MALFORMED_DIR).join(file);
        let err = match load_file(&path) {
            Ok(s) => {
                failures.push(format!("{file}: loaded as scenario {}", s.name.as_str()));
                continue;
            }
            Err(e) => e,
        };
        let rendered = err.to_string();
        let prefix = format!("{}:{at}: ", path.display());
        let actual_stage = match &err {
            LoadError::Parse(_) => Some(Parse),
            LoadError::Invalid(_) => Some(Invalid),
            _ => None,
        };
        if !rendered.starts_with(&prefix)
            || !rendered.contains(message)
            || actual_stage != Some(stage)
        {
            failures.push(format!(
                "{file}: expected {stage:?} error starting with {prefix:?} containing {message:?}, got {actual_stage:?}:\n{rendered}"
            ));
        }
        // The one-line form is the first line of the full form.
        assert_eq!(err.headline(), rendered.lines().next().unwrap(), "{file}");
        assert_eq!(err.path(), path, "{file}");
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n\n"));
}

#[test]
fn the_malformed_table_covers_every_file_in_the_directory() {
    let table: Vec<String> = MALFORMED.iter().map(|(f, ..)| f.to_string()).collect();
    assert_eq!(
        malformed_files_on_disk(),
        table,
        "keep MALFORMED sorted and in step with tests/malformed/"
    );
    assert!(MALFORMED.len() >= 24);
}

#[test]
fn an_error_shows_the_offending_line_with_a_caret() {
    let err = load_file(&Path::new(MALFORMED_DIR).join("undeclared-namespace.yaml")).unwrap_err();
    let expected = "\
tests/malformed/undeclared-namespace.yaml:6:55: namespace \"db\" is not declared in the scenario's `namespaces` (declared: app)
  |
6 |   - delete: {kind: ConfigMap, name: mymap, namespace: db}
  |                                                       ^";
    assert_eq!(err.to_string(), expected);
    let d = err.diagnostic().unwrap();
    assert_eq!(d.position, Position::new(6, 55));
    assert_eq!(
        d.source_line.as_deref(),
        Some("  - delete: {kind: ConfigMap, name: mymap, namespace: db}")
    );
}

#[test]
fn the_caret_lines_up_under_tab_indented_lines() {
    let err = load_file(&Path::new(MALFORMED_DIR).join("tab-indentation.yaml")).unwrap_err();
    let last = err.to_string().lines().last().unwrap().to_owned();
    assert_eq!(last, "  | \t^");
}

#[test]
fn a_missing_file_names_the_path_and_the_os_error() {
    let err = load_file(Path::new("tests/no-such-dir/scenario.yaml")).unwrap_err();
    assert!(matches!(err, LoadError::Read { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.starts_with("tests/no-such-dir/scenario.yaml: failed to read: "),
        "{text}"
    );
    assert!(text.contains("No such file or directory"), "{text}");
    assert!(err.diagnostic().is_none());
}

#[test]
fn load_dir_reports_one_error_per_bad_file_in_name_order() {
    let errors = load_dir(Path::new(MALFORMED_DIR)).unwrap_err();
    let paths: Vec<String> = errors
        .errors()
        .iter()
        .map(|e| e.path().file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(paths, malformed_files_on_disk());
    // The aggregate shows every error in full.
    let text = errors.to_string();
    for (file, at, ..) in MALFORMED {
        assert!(
            text.contains(&format!("{file}:{at}: ")),
            "{file} missing from:\n{text}"
        );
    }
}

#[test]
fn load_dir_on_a_missing_directory_is_a_read_error() {
    let errors = load_dir(Path::new("tests/no-such-dir")).unwrap_err();
    assert_eq!(errors.errors().len(), 1);
    assert!(matches!(errors.errors()[0], LoadError::Read { .. }));
}

/// A fresh directory under cargo's per-target temporary directory.
fn temp_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("scenario_loader")
        .join(name);
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

fn minimal(name: &str) -> String {
    format!("name: {name}\ndescription: Minimal.\nsteps:\n  - apply: x/cm.yaml\n")
}

#[test]
fn load_dir_reads_only_yaml_files_sorted_by_file_name() {
    let dir = temp_dir("load_dir_ok");
    fs::write(dir.join("b.yml"), minimal("second")).unwrap();
    fs::write(dir.join("a.yaml"), minimal("first")).unwrap();
    fs::write(dir.join("c.yaml"), minimal("third")).unwrap();
    fs::write(dir.join("notes.txt"), "not a scenario").unwrap();
    fs::write(dir.join(".#a.yaml"), "editor lock file").unwrap();
    fs::create_dir(dir.join("sub.yaml")).unwrap();
    let scenarios = load_dir(&dir).unwrap();
    let names: Vec<&str> = scenarios.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["first", "second", "third"]);
    assert_eq!(scenarios[1].path(), dir.join("b.yml"));
}

#[test]
fn load_dir_rejects_two_files_with_the_same_scenario_name() {
    let dir = temp_dir("load_dir_dup");
    fs::write(dir.join("a.yaml"), minimal("same")).unwrap();
    fs::write(dir.join("b.yaml"), minimal("same")).unwrap();
    let errors = load_dir(&dir).unwrap_err();
    assert_eq!(errors.errors().len(), 1);
    let text = errors.errors()[0].headline();
    let expected = format!(
        "{}:1:7: scenario name \"same\" is already used by {}",
        dir.join("b.yaml").display(),
        dir.join("a.yaml").display()
    );
    assert_eq!(text, expected);
}

/// Case 2 of the failure catalog, written out in full, plus every
/// condition kind. Line numbers matter to the tests below.
const FULL: &str = r#"# Case 2 of the failure catalog, end to end.
name: crd-orphan-namespace
description: >
  A namespace stays Terminating because a custom resource in it carries
  the finalizer of an operator that was uninstalled.
catalogCase: 2
seeds: ["002", "001"]
namespaces: [app, monitoring]
timeout: 3m
serial: false
steps:
  - apply: crd-orphan/crd.yaml
  - apply: {file: crd-orphan/widget.yaml, namespace: app}
  - delete: {kind: Namespace, name: app}
  - expect:
      phase: symptom
      timeout: 90s
      that:
        - terminating: {kind: Namespace, name: app}
        - terminating: {apiVersion: example.com/v1, kind: Widget, name: w1, namespace: app}
        - namespaceCondition:
            namespace: app
            type: NamespaceContentRemaining
            status: "True"
            reason: SomeResourcesRemain
            messageContains: "widgets.example.com has 1 resource instances"
        - apiServiceCondition: {name: v1beta1.metrics.k8s.io, type: Available, status: 'False', reason: ServiceNotFound}
        - event: {namespace: app, involvedKind: Widget, involvedName: w1, reason: FailedDelete}
        - kubeletLog: {contains: "UnmountVolume.TearDown failed"}
        - running: {kind: Pod, name: web, namespace: monitoring}
  - doctor:
      expectFindings: [OrphanFinalizer]
  - expect:
      phase: recovered
      that:
        - gone: {kind: Namespace, name: app}
        - noContentLeft: {namespace: app}
        - discoveryComplete: {}
        - namespaceCondition: {namespace: monitoring, type: NamespaceDeletionDiscoveryFailure, status: "Unknown"}
"#;

/// 1-based line and column where `needle` starts in `src`.
fn position_of(src: &str, needle: &str) -> Position {
    let offset = src
        .find(needle)
        .unwrap_or_else(|| panic!("{needle:?} not in source"));
    let before = &src[..offset];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().unwrap().chars().count() + 1;
    Position::new(line as u64, column as u64)
}

fn load_full() -> Scenario {
    load_str(FULL, Path::new("scenarios/crd-orphan-namespace.yaml")).unwrap()
}

fn obj(api_version: &str, kind: &str, name: &str, namespace: Option<&str>) -> LogicalRef {
    LogicalRef {
        api_version: Some(api_version.to_owned()),
        kind: kind.to_owned().into(),
        name: name.to_owned().into(),
        namespace: namespace.map(|ns| ns.to_owned().into()),
    }
}

#[test]
fn a_full_scenario_loads_into_the_right_types() {
    let s = load_full();
    assert_eq!(s.name.as_str(), "crd-orphan-namespace");
    assert_eq!(s.name.position, Position::new(2, 7));
    assert!(s.description.starts_with("A namespace stays Terminating"));
    assert_eq!(s.catalog_case, Some(2));
    let seeds: Vec<&str> = s.seeds.iter().map(|s| s.as_str()).collect();
    assert_eq!(seeds, ["002", "001"]);
    assert_eq!(
        s.namespace_names().collect::<Vec<_>>(),
        ["app", "monitoring"]
    );
    assert_eq!(*s.timeout, Duration::from_mins(3));
    assert!(!s.serial);
    assert!(!s.runs_alone());
    assert_eq!(s.path(), Path::new("scenarios/crd-orphan-namespace.yaml"));
    assert_eq!(s.to_string(), "crd-orphan-namespace");

    let steps: Vec<&Step> = s.steps.iter().map(|step| &step.value).collect();
    let kinds: Vec<&str> = steps.iter().map(|step| step.kind()).collect();
    assert_eq!(
        kinds,
        ["apply", "apply", "delete", "expect", "doctor", "expect"]
    );

    // Each step knows its line, for "step 3 (line 14) failed".
    // The list itself is located at its first `-`; each step at its key.
    assert_eq!(s.steps.position, Position::new(12, 3));
    assert_eq!(
        s.steps[0].position,
        position_of(FULL, "apply: crd-orphan/crd.yaml")
    );
    assert_eq!(
        s.steps[2].position,
        position_of(FULL, "delete: {kind: Namespace")
    );
    assert_eq!(s.steps[3].position, Position::new(15, 5));

    // The well-known kind got its apiVersion filled in.
    assert_eq!(
        *steps[2],
        Step::Delete(DeleteSpec {
            object: obj("v1", "Namespace", "app", None),
            propagation_policy: None,
        })
    );

    let Step::Expect(symptom) = steps[3] else {
        panic!("{:?}", steps[3])
    };
    assert_eq!(symptom.phase, Phase::Symptom);
    assert_eq!(*symptom.timeout, Duration::from_secs(90));
    assert_eq!(symptom.that.len(), 7);
    assert_eq!(
        symptom.that[0],
        Condition::Terminating(obj("v1", "Namespace", "app", None))
    );
    assert_eq!(
        symptom.that[1],
        Condition::Terminating(obj("example.com/v1", "Widget", "w1", Some("app")))
    );
    let Condition::NamespaceCondition(ns) = &symptom.that[2] else {
        panic!()
    };
    assert_eq!(ns.namespace.as_str(), "app");
    assert_eq!(ns.condition_type.as_str(), "NamespaceContentRemaining");
    assert_eq!(ns.status, ConditionStatus::True);
    assert_eq!(ns.reason.as_deref(), Some("SomeResourcesRemain"));
    assert_eq!(
        ns.message_contains.as_deref().map(String::as_str),
        Some("widgets.example.com has 1 resource instances")
    );
    let Condition::ApiServiceCondition(api) = &symptom.that[3] else {
        panic!()
    };
    assert_eq!(api.name.as_str(), "v1beta1.metrics.k8s.io");
    assert_eq!(api.status, ConditionStatus::False);
    assert_eq!(api.reason.as_deref(), Some("ServiceNotFound"));
    let Condition::Event(event) = &symptom.that[4] else {
        panic!()
    };
    assert_eq!(event.involved_kind.as_deref(), Some("Widget"));
    assert_eq!(event.involved_name.as_deref(), Some("w1"));
    assert_eq!(event.reason.as_deref(), Some("FailedDelete"));
    assert!(event.message_contains.is_none());
    let Condition::KubeletLog(log) = &symptom.that[5] else {
        panic!()
    };
    assert_eq!(log.contains.as_str(), "UnmountVolume.TearDown failed");
    assert!(log.pod.is_none() && log.namespace.is_none());
    assert_eq!(
        symptom.that[6],
        Condition::Running(obj("v1", "Pod", "web", Some("monitoring")))
    );
    assert_eq!(symptom.that[6].kind(), "running");

    let Step::Doctor(doctor) = steps[4] else {
        panic!()
    };
    assert_eq!(
        doctor.expect_findings,
        vec!["OrphanFinalizer".to_owned().into()]
    );
    assert!(doctor.apply, "apply defaults to true");

    let Step::Expect(recovered) = steps[5] else {
        panic!()
    };
    assert_eq!(recovered.phase, Phase::Recovered);
    assert_eq!(*recovered.timeout, DEFAULT_EXPECT_TIMEOUT);
    assert!(
        !recovered.timeout.position.is_known(),
        "a defaulted value has no position"
    );
    let kinds: Vec<&str> = recovered.that.iter().map(Condition::kind).collect();
    assert_eq!(
        kinds,
        [
            "gone",
            "noContentLeft",
            "discoveryComplete",
            "namespaceCondition"
        ]
    );
    assert_eq!(recovered.that[2], Condition::DiscoveryComplete {});
    let Condition::NamespaceCondition(unknown) = &recovered.that[3] else {
        panic!()
    };
    assert_eq!(unknown.status, ConditionStatus::Unknown);
}

#[test]
fn steps_have_one_line_summaries_for_reports() {
    let s = load_full();
    let summaries: Vec<String> = s.steps.iter().map(|step| step.summary()).collect();
    assert_eq!(summaries[0], "apply crd-orphan/crd.yaml");
    assert_eq!(
        summaries[1],
        "apply crd-orphan/widget.yaml in namespace app"
    );
    assert_eq!(summaries[2], "delete Namespace app");
    assert_eq!(
        summaries[3],
        "expect symptom within 1m30s: Namespace app is Terminating; Widget app/w1 is Terminating; \
         namespace app has NamespaceContentRemaining=True (reason SomeResourcesRemain, message contains \
         \"widgets.example.com has 1 resource instances\"); APIService v1beta1.metrics.k8s.io has \
         Available=False (reason ServiceNotFound); an event FailedDelete for Widget app/w1; a kubelet log \
         contains \"UnmountVolume.TearDown failed\"; Pod monitoring/web is Running"
    );
    assert_eq!(
        summaries[4],
        "doctor: expect OrphanFinalizer, then apply the plan"
    );
    assert_eq!(
        summaries[5],
        "expect recovered within 1m: Namespace app is gone; nothing from namespace app is left in storage; \
         API discovery is complete; namespace monitoring has NamespaceDeletionDiscoveryFailure=Unknown"
    );
}

#[test]
fn apply_has_a_short_and_a_long_form() {
    let s = load_full();
    let Step::Apply(short) = &s.steps[0].value else {
        panic!()
    };
    assert_eq!(short.file.as_path(), Path::new("crd-orphan/crd.yaml"));
    assert!(short.namespace.is_none());
    // The short form's path is located at the value after `apply:`.
    assert_eq!(
        short.file.position,
        position_of(FULL, "crd-orphan/crd.yaml")
    );

    let Step::Apply(long) = &s.steps[1].value else {
        panic!()
    };
    assert_eq!(long.file.as_path(), Path::new("crd-orphan/widget.yaml"));
    assert_eq!(long.namespace.as_deref().map(String::as_str), Some("app"));
    assert_eq!(
        long.file.position,
        position_of(FULL, "crd-orphan/widget.yaml")
    );

    // The long form also works as a block mapping, and needs `file`.
    let block = "name: a\ndescription: d\nsteps:\n  - apply:\n      file: x/y.yaml\n";
    let s = load_str(block, Path::new("block.yaml")).unwrap();
    let Step::Apply(apply) = &s.steps[0].value else {
        panic!()
    };
    assert_eq!(apply.file.position, Position::new(5, 13));
    let no_file =
        "name: a\ndescription: d\nnamespaces: [app]\nsteps:\n  - apply: {namespace: app}\n";
    let err = load_str(no_file, Path::new("nofile.yaml")).unwrap_err();
    assert!(err.headline().starts_with("nofile.yaml:5:"), "{err}");
    assert!(err.headline().contains("missing field `file`"), "{err}");
    let wrong = "name: a\ndescription: d\nsteps:\n  - apply: 42\n";
    let err = load_str(wrong, Path::new("wrong.yaml")).unwrap_err();
    // A wrong type inside `apply` is reported at the step's key.
    assert!(err.headline().starts_with("wrong.yaml:4:5: "), "{err}");
    assert!(
        err.headline()
            .contains("a fixture path, or a mapping with `file`"),
        "{err}"
    );
}

#[test]
fn defaults_apply_when_optional_keys_are_left_out() {
    let s = load_str(&minimal("bare"), Path::new("bare.yaml")).unwrap();
    assert_eq!(s.catalog_case, None);
    assert!(s.seeds.is_empty());
    assert!(s.namespaces.is_empty());
    assert_eq!(*s.timeout, DEFAULT_SCENARIO_TIMEOUT);
    assert_eq!(DEFAULT_SCENARIO_TIMEOUT.to_string(), "5m");
    assert!(!s.serial);
}

const FAULTY: &str = r#"name: busy-mount
description: A pod stays Terminating because its volume is busy on the node.
catalogCase: 4
namespaces: [app]
steps:
  - apply: {file: busy-mount/pod.yaml, namespace: app}
  - expect: {phase: symptom, that: [{running: {kind: Pod, name: web, namespace: app}}]}
  - fault: {busyMount: {pod: web, namespace: app}}
  - delete: {kind: Pod, name: web, namespace: app}
  - expect:
      phase: symptom
      timeout: 2m
      that:
        - terminating: {kind: Pod, name: web, namespace: app}
        - kubeletLog: {contains: "target is busy", pod: web, namespace: app}
        - event: {namespace: app, involvedName: web, messageContains: "device or resource busy"}
  - doctor: {expectFindings: [BusyVolume, PodStuckTerminating], apply: false}
  - fault:
      wedgeShim:
        pod: web
        namespace: app
  - apply: busy-mount/pod.yaml
"#;

#[test]
fn faults_make_a_scenario_run_alone() {
    let s = load_str(FAULTY, Path::new("busy-mount.yaml")).unwrap();
    assert!(!s.serial);
    assert!(s.runs_alone());
    let Step::Fault(fault) = &s.steps[2].value else {
        panic!()
    };
    assert_eq!(fault.kind(), "busyMount");
    assert_eq!(fault.pod().pod.as_str(), "web");
    assert_eq!(fault.pod().namespace.as_str(), "app");
    assert!(
        matches!(&s.steps[6].value, Step::Fault(f) if f.kind() == "wedgeShim" && f.pod().pod.as_str() == "web")
    );
    assert_eq!(s.steps[2].summary(), "inject busyMount on pod app/web");
    assert_eq!(s.steps[6].summary(), "inject wedgeShim on pod app/web");
    assert_eq!(
        s.steps[4].summary(),
        "expect symptom within 2m: Pod app/web is Terminating; kubelet log of the node of pod app/web \
         contains \"target is busy\"; an event for app/web with message containing \"device or resource busy\""
    );
    assert_eq!(
        s.steps[5].summary(),
        "doctor: expect BusyVolume, PodStuckTerminating (diagnose only)"
    );

    let serial = load_str(
        &minimal("alone").replace("steps:", "serial: true\nsteps:"),
        Path::new("a.yaml"),
    )
    .unwrap();
    assert!(serial.serial && serial.runs_alone());
}

/// A fault's own parameters are read beside its pod, kept in the model
/// (and in its summary), and written back the way they were read.
#[test]
fn fault_parameters_are_read_summarised_and_written_back() {
    let text = minimal("held").replace(
        "steps:",
        "namespaces: [app]\nsteps:\n  - fault: {holdVolume: {pod: envoy, namespace: app, volume: cfg}}",
    );
    let s = load_str(&text, Path::new("held.yaml")).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let Step::Fault(fault) = &s.steps[0].value else {
        panic!("{:?}", s.steps[0].value)
    };
    assert_eq!(fault.kind(), "holdVolume");
    assert_eq!(fault.param("volume"), Some("cfg"));
    assert_eq!(fault.params_json(), serde_json::json!({"volume": "cfg"}));
    assert!(fault.is_node_level() && s.runs_alone() && s.needs_node());
    assert_eq!(
        s.steps[0].summary(),
        "inject holdVolume on pod app/envoy (volume cfg)"
    );
    let yaml = serde_saphyr::to_string(&s).unwrap();
    assert!(
        yaml.contains("holdVolume:") && yaml.contains("volume: cfg"),
        "{yaml}"
    );
    let again = load_str(&yaml, Path::new("again.yaml")).unwrap_or_else(|e| panic!("{e}\n{yaml}"));
    assert_eq!(*again.steps, *s.steps);
}

#[test]
fn fixture_files_are_listed_once_in_order_of_use() {
    let s = load_str(FAULTY, Path::new("busy-mount.yaml")).unwrap();
    assert_eq!(s.fixture_files(), [Path::new("busy-mount/pod.yaml")]);
    let s = load_full();
    assert_eq!(
        s.fixture_files(),
        [
            Path::new("crd-orphan/crd.yaml"),
            Path::new("crd-orphan/widget.yaml")
        ]
    );
}

#[test]
fn validate_fixtures_names_the_scenario_file_and_the_line_of_the_step() {
    let fixtures = temp_dir("fixtures");
    fs::create_dir_all(fixtures.join("crd-orphan")).unwrap();
    fs::write(
        fixtures.join("crd-orphan/crd.yaml"),
        "kind: CustomResourceDefinition\n",
    )
    .unwrap();

    let s = load_full();
    let err = s.validate_fixtures(&fixtures).unwrap_err();
    assert!(matches!(err, LoadError::MissingFixture(_)), "{err:?}");
    let headline = err.headline();
    let expected = "scenarios/crd-orphan-namespace.yaml:13:19: fixture crd-orphan/widget.yaml cannot be read: ";
    assert!(headline.starts_with(expected), "{headline}");
    assert!(
        headline.contains(
            &fixtures
                .join("crd-orphan/widget.yaml")
                .display()
                .to_string()
        ),
        "{headline}"
    );
    assert!(
        err.to_string()
            .contains("13 |   - apply: {file: crd-orphan/widget.yaml, namespace: app}"),
        "{err}"
    );

    fs::write(fixtures.join("crd-orphan/widget.yaml"), "kind: Widget\n").unwrap();
    s.validate_fixtures(&fixtures).unwrap();

    // A directory where a file should be is reported too.
    let s = load_str(&minimal("dir"), Path::new("dir.yaml")).unwrap();
    fs::create_dir_all(fixtures.join("x/cm.yaml")).unwrap();
    let err = s.validate_fixtures(&fixtures).unwrap_err();
    assert!(
        err.headline()
            .starts_with("dir.yaml:4:12: fixture x/cm.yaml is not a file"),
        "{err}"
    );
}

#[test]
fn condition_status_accepts_only_the_three_quoted_strings() {
    let with_status = |status: &str| {
        format!(
            "name: s\ndescription: d\nnamespaces: [app]\nsteps:\n  - expect:\n      phase: symptom\n      that:\n        \
             - namespaceCondition: {{namespace: app, type: NamespaceContentRemaining, status: {status}}}\n"
        )
    };
    for (status, expected) in [
        (r#""True""#, ConditionStatus::True),
        ("'False'", ConditionStatus::False),
        (r#""Unknown""#, ConditionStatus::Unknown),
        // A plain `Unknown` is a string in YAML, not a boolean: nothing to confuse.
        ("Unknown", ConditionStatus::Unknown),
    ] {
        let s = load_str(&with_status(status), Path::new("s.yaml")).unwrap();
        let Step::Expect(expect) = &s.steps[0].value else {
            panic!()
        };
        let Condition::NamespaceCondition(check) = &expect.that[0] else {
            panic!()
        };
        assert_eq!(check.status, expected, "{status}");
    }
    for (status, message) in [
        ("True", "the boolean true"),
        ("false", "the boolean false"),
        ("FALSE", "the boolean false"),
        (r#""yes""#, r#"invalid condition status "yes""#),
        ("1", "expected a quoted condition status"),
    ] {
        let err = load_str(&with_status(status), Path::new("s.yaml")).unwrap_err();
        assert!(err.headline().starts_with("s.yaml:8:"), "{status}: {err}");
        assert!(err.headline().contains(message), "{status}: {err}");
    }
}

#[test]
fn a_loaded_scenario_serializes_to_yaml_that_loads_back_the_same() {
    let original = load_full();
    let yaml = serde_saphyr::to_string(&original).unwrap();
    let again =
        load_str(&yaml, Path::new("again.yaml")).unwrap_or_else(|e| panic!("{e}\n\n{yaml}"));
    assert_eq!(again.name, original.name);
    assert_eq!(again.catalog_case, original.catalog_case);
    assert_eq!(again.timeout, original.timeout);
    assert_eq!(*again.steps, *original.steps);
}

#[test]
fn well_known_kinds_have_default_api_versions() {
    for (kind, api_version) in [
        ("ConfigMap", "v1"),
        ("Secret", "v1"),
        ("Pod", "v1"),
        ("Service", "v1"),
        ("Namespace", "v1"),
        ("PersistentVolumeClaim", "v1"),
        ("PersistentVolume", "v1"),
        ("ServiceAccount", "v1"),
        ("Endpoints", "v1"),
        ("Deployment", "apps/v1"),
        ("StatefulSet", "apps/v1"),
        ("DaemonSet", "apps/v1"),
        ("ReplicaSet", "apps/v1"),
        ("APIService", "apiregistration.k8s.io/v1"),
        ("CustomResourceDefinition", "apiextensions.k8s.io/v1"),
        ("Lease", "coordination.k8s.io/v1"),
    ] {
        assert_eq!(default_api_version(kind), Some(api_version), "{kind}");
        assert!(is_namespaced(kind).is_some(), "{kind}");
    }
    assert_eq!(default_api_version("Widget"), None);
    assert_eq!(
        default_api_version("configmap"),
        None,
        "kinds are case-sensitive"
    );
    assert_eq!(is_namespaced("Namespace"), Some(false));
    assert_eq!(is_namespaced("Pod"), Some(true));
    assert_eq!(is_namespaced("Widget"), None);
}

/// The scope table must agree with the real API types.
#[test]
fn the_scope_table_agrees_with_k8s_openapi() {
    use k8s_openapi::{
        Resource,
        api::{apps::v1 as apps, coordination::v1 as coordination, core::v1 as core},
        apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiextensions,
        kube_aggregator::pkg::apis::apiregistration::v1 as apiregistration,
    };
    fn check<R: Resource>() {
        let namespaced = std::any::type_name::<R::Scope>().ends_with("NamespaceResourceScope");
        assert_eq!(
            default_api_version(R::KIND),
            Some(R::API_VERSION),
            "{}",
            R::KIND
        );
        assert_eq!(is_namespaced(R::KIND), Some(namespaced), "{}", R::KIND);
    }
    check::<core::ConfigMap>();
    check::<core::Secret>();
    check::<core::Pod>();
    check::<core::Service>();
    check::<core::Namespace>();
    check::<core::PersistentVolumeClaim>();
    check::<core::PersistentVolume>();
    check::<core::ServiceAccount>();
    check::<core::Endpoints>();
    check::<apps::Deployment>();
    check::<apps::StatefulSet>();
    check::<apps::DaemonSet>();
    check::<apps::ReplicaSet>();
    check::<apiregistration::APIService>();
    check::<apiextensions::CustomResourceDefinition>();
    check::<coordination::Lease>();
}

#[test]
fn durations_parse_from_the_usual_notation() {
    let ms = |n| Duration::from(time::Duration::from_millis(n));
    for (text, expected) in [
        ("500ms", ms(500)),
        ("30s", ms(30_000)),
        ("2m", ms(120_000)),
        ("1m30s", ms(90_000)),
        ("1h", ms(3_600_000)),
        ("1h30m", ms(5_400_000)),
        ("2h0m5s", ms(7_205_000)),
        ("1s250ms", ms(1_250)),
        ("90s", ms(90_000)),
        ("0s", ms(0)),
        ("1m0500ms", ms(60_500)),
    ] {
        let parsed: Duration = text.parse().unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(parsed, expected, "{text}");
        assert_eq!(parsed.as_std(), expected.as_std());
    }
}

#[test]
fn durations_reject_what_they_cannot_read_and_say_why() {
    for (text, reason) in [
        ("", "it is empty"),
        ("30", "30 has no unit (write 30s for seconds)"),
        ("1m30", "30 has no unit"),
        ("30 seconds", "it contains spaces"),
        ("30seconds", r#"unknown unit "seconds""#),
        ("30x", r#"unknown unit "x""#),
        ("1.5m", "fractions are not supported"),
        ("s", r#"expected a number at "s""#),
        ("-5s", "durations have no sign"),
        ("30s1m", r#"unit "m" comes after "s""#),
        ("1m1m", r#"unit "m" comes after "m""#),
        ("99999999999999999999999999999999999999999h", "too large"),
    ] {
        let err = text.parse::<Duration>().unwrap_err();
        assert!(err.reason().contains(reason), "{text:?}: {err}");
        assert_eq!(err.input(), text);
        let message = err.to_string();
        assert!(
            message.starts_with(&format!("invalid duration {text:?}: ")),
            "{message}"
        );
        assert!(
            message.ends_with("like 500ms, 30s, 2m, 1m30s or 1h"),
            "{message}"
        );
    }
}

#[test]
fn durations_print_in_canonical_form_and_read_back() {
    for (ms, text) in [
        (0, "0s"),
        (1, "1ms"),
        (500, "500ms"),
        (1_000, "1s"),
        (90_000, "1m30s"),
        (3_600_000, "1h"),
        (3_661_001, "1h1m1s1ms"),
        (300_000, "5m"),
    ] {
        let d = Duration::from_millis(ms);
        assert_eq!(d.to_string(), text);
        assert_eq!(text.parse::<Duration>().unwrap(), d);
    }
}

#[test]
fn durations_read_from_yaml_and_json() {
    #[derive(Debug, serde::Deserialize, serde::Serialize)]
    struct T {
        t: Duration,
    }
    let t: T = serde_saphyr::from_str("t: 1m30s").unwrap();
    assert_eq!(t.t, Duration::from_secs(90));
    assert_eq!(serde_json::to_string(&t).unwrap(), r#"{"t":"1m30s"}"#);
    let t: T = serde_json::from_str(r#"{"t":"250ms"}"#).unwrap();
    assert_eq!(t.t, Duration::from_millis(250));
    let err = serde_json::from_str::<T>(r#"{"t":60}"#)
        .unwrap_err()
        .to_string();
    assert!(err.contains("60 has no unit"), "{err}");
}
