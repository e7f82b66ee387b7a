//! `unstuck new-scenario`'s scaffold, on snapshots recorded from real
//! incidents (v1.34.4): the scenario it writes loads, its fixtures exist,
//! and it reproduces what was stuck and expects what the doctor found.

mod doctor_support;

use std::path::{Path, PathBuf};

use unstuck_core::doctor::Snapshot;
use unstuck_core::scenario::{
    Condition, Step, load_file,
    scaffold::{ScaffoldError, scaffold},
};

use doctor_support::recorded;

/// Writes the scaffold under a fresh directory and loads it back, as
/// `unstuck scenarios` would.
fn written(name: &str, snapshot: &Snapshot) -> (unstuck_core::scenario::Scenario, PathBuf) {
    let made = scaffold(name, snapshot).expect("scaffold");
    let root = std::env::temp_dir().join(format!("unstuck-scaffold-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let scenarios = root.join("scenarios");
    let fixtures = root.join("fixtures");
    std::fs::create_dir_all(&scenarios).unwrap();
    let path = scenarios.join(&made.scenario.0);
    std::fs::write(&path, &made.scenario.1).unwrap();
    for (rel, body) in &made.fixtures {
        let p = fixtures.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, body).unwrap();
    }
    let s = load_file(&path).unwrap_or_else(|e| panic!("{e}\n---\n{}", made.scenario.1));
    s.validate_fixtures(&fixtures)
        .unwrap_or_else(|e| panic!("{e}"));
    (s, root)
}

fn fixture_text(root: &Path, contains: &str) -> String {
    let dir = root.join("fixtures");
    let mut found = Vec::new();
    for d in std::fs::read_dir(&dir).unwrap() {
        for f in std::fs::read_dir(d.unwrap().path()).unwrap() {
            let text = std::fs::read_to_string(f.unwrap().path()).unwrap();
            if text.contains(contains) {
                found.push(text);
            }
        }
    }
    assert_eq!(
        found.len(),
        1,
        "fixtures containing {contains:?}: {found:?}"
    );
    found.pop().unwrap()
}

fn expected_findings(s: &unstuck_core::scenario::Scenario) -> Vec<String> {
    s.steps
        .iter()
        .find_map(|st| match &st.value {
            Step::Doctor(d) => Some(d.expect_findings.iter().map(|k| k.to_string()).collect()),
            _ => None,
        })
        .expect("a doctor step")
}

#[test]
fn a_custom_resource_in_a_stuck_namespace_becomes_crd_object_and_namespace_steps() {
    let (s, root) = written("my-kiali", &recorded("uninstalled-crd-controller"));
    assert!(expected_findings(&s).contains(&"OrphanFinalizer".to_string()));
    // The CR keeps its finalizer and loses what the server set.
    let cr = fixture_text(&root, "\nkind: Kiali\n");
    assert!(cr.contains("kiali.io/finalizer"), "{cr}");
    assert!(
        !cr.contains("uid") && !cr.contains("deletionTimestamp"),
        "{cr}"
    );
    // Its CRD is made, and waited for before the CR is applied.
    let crd = fixture_text(&root, "kind: CustomResourceDefinition");
    assert!(crd.contains("kialis"), "{crd}");
    let text: Vec<String> = s.steps.iter().map(|st| st.value.to_string()).collect();
    let crd_at = text.iter().position(|t| t.contains("crd-")).unwrap();
    let cr_at = text.iter().position(|t| t.contains("kiali-")).unwrap();
    assert!(crd_at < cr_at, "{text:#?}");
    // The namespace is deleted, and must be gone with nothing left.
    let last = s.steps.last().unwrap();
    let Step::Expect(e) = &last.value else {
        panic!("last step {last:?}")
    };
    assert!(
        e.that
            .iter()
            .any(|c| matches!(c, Condition::NoContentLeft(_))),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(root);
}

#[test]
fn a_dead_webhook_and_a_dead_apiservice_are_re_created_as_fixtures() {
    let (s, root) = written("my-webhook", &recorded("dead-admission-webhook"));
    assert!(expected_findings(&s).contains(&"DeadWebhook".to_string()));
    let hook = fixture_text(&root, "kind: ValidatingWebhookConfiguration");
    assert!(hook.contains("failurePolicy: Fail"), "{hook}");
    let _ = std::fs::remove_dir_all(root);

    let dead = doctor_support::with_missing_backend(
        recorded("dead-metrics-apiservice"),
        "v1beta1.metrics.k8s.io",
    );
    let (s, root) = written("my-apiservice", &dead);
    assert!(expected_findings(&s).contains(&"DeadApiService".to_string()));
    let api = fixture_text(&root, "kind: APIService");
    assert!(api.contains("metrics"), "{api}");
    let _ = std::fs::remove_dir_all(root);
}

#[test]
fn a_snapshot_with_nothing_stuck_or_a_bad_name_is_refused() {
    let empty = Snapshot::default();
    assert_eq!(
        scaffold("calm", &empty).unwrap_err(),
        ScaffoldError::NothingStuck
    );
    let stuck = recorded("orphan-finalizer-configmap");
    assert!(matches!(
        scaffold("My_Incident", &stuck),
        Err(ScaffoldError::BadName(_))
    ));
}

/// A pod stuck on its node is left to a node fault; the note names every
/// fault of the catalogue by the node doctor's finding it reproduces.
#[test]
fn a_stuck_pod_is_left_to_a_node_fault_from_the_catalogue() {
    let made = scaffold("lost-node", &recorded("node-lost")).expect("scaffold");
    let note = made
        .notes
        .iter()
        .find(|n| n.starts_with("pod lost/web is left out"))
        .unwrap_or_else(|| panic!("{:#?}", made.notes));
    for f in unstuck_core::scenario::CATALOGUE {
        assert!(note.contains(f.name), "{} not in {note}", f.name);
        assert!(
            note.contains(f.reproduces.name()),
            "{} not in {note}",
            f.reproduces
        );
    }
    assert!(note.contains("holdVolume (with volume)"), "{note}");
    assert!(note.contains("KubeletDown: stopKubelet"), "{note}");
}
