//! A run on a cluster unstuck did not create, whose namespace gets a
//! finalizer from a controller the run did not install. The scenario puts
//! its own key (`scenario.example.com/mine`) on its namespace and on a
//! ConfigMap in it, then waits for an Event; the test, acting as another
//! controller, adds `other.example.com/keep` to both and posts that
//! Event. Cleanup must remove the scenario's key from both, leave the
//! other controller's key where it is, and report it as left; once the
//! test removes its key, the namespace goes.

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use k8s_openapi::api::core::v1::{ConfigMap, Event, Namespace};
use kube::{
    Api, Client,
    api::{ListParams, Patch, PatchParams, PostParams},
};

use unstuck::wait::{self, Poll};

use super::production::wait_until;

const MINE: &str = "scenario.example.com/mine";
const OTHERS: &str = "other.example.com/keep";

const SCENARIO: &str = "name: foreign-finalizer
description: a namespace and a ConfigMap with the scenario's own finalizer; another controller adds its own while the scenario runs
namespaces: [held]
timeout: 4m
steps:
  - apply: held/namespace.yaml
  - apply: {file: held/kept.yaml, namespace: held}
  - expect:
      phase: symptom
      timeout: 3m
      that:
        - event: {namespace: held, involvedName: kept, reason: OtherControllerAttached}
";

fn write_scenario(root: &Path) -> (PathBuf, PathBuf) {
    let scenarios = root.join("scenarios");
    let fixtures = root.join("fixtures");
    std::fs::create_dir_all(&scenarios).unwrap();
    std::fs::create_dir_all(fixtures.join("held")).unwrap();
    std::fs::write(scenarios.join("foreign-finalizer.yaml"), SCENARIO).unwrap();
    std::fs::write(
        fixtures.join("held/namespace.yaml"),
        format!(
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: held\n  finalizers: [{MINE}]\n"
        ),
    )
    .unwrap();
    std::fs::write(
        fixtures.join("held/kept.yaml"),
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kept\n  finalizers: [{MINE}]\ndata: {{k: v}}\n"
        ),
    )
    .unwrap();
    (scenarios, fixtures)
}

/// Adds `key` to an object's finalizers with a JSON patch that `test`s the
/// list it extends, as a careful controller does.
fn add_key(current: &[String], key: &str) -> Patch<()> {
    let patch = serde_json::json!([
        {"op": "test", "path": "/metadata/finalizers", "value": current},
        {"op": "add", "path": "/metadata/finalizers/-", "value": key},
    ]);
    Patch::Json(serde_json::from_value(patch).unwrap())
}

fn without_key(current: &[String], key: &str) -> Patch<()> {
    let kept: Vec<&String> = current.iter().filter(|k| *k != key).collect();
    let patch = serde_json::json!([
        {"op": "test", "path": "/metadata/finalizers", "value": current},
        {"op": "replace", "path": "/metadata/finalizers", "value": kept},
    ]);
    Patch::Json(serde_json::from_value(patch).unwrap())
}

/// The other controller: waits for the run's namespace and ConfigMap,
/// adds its key to both and says so with an Event. Returns the namespace.
async fn other_controller(client: Client) -> String {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns_name = wait::until(
        "the run's namespace held-* and its ConfigMap kept",
        Duration::from_secs(300),
        Duration::from_millis(500),
        || async {
            let list = match namespaces.list(&ListParams::default()).await {
                Ok(l) => l,
                Err(e) => return Poll::Pending(e.to_string()),
            };
            let Some(name) = list
                .items
                .into_iter()
                .filter_map(|n| n.metadata.name)
                .find(|n| n.starts_with("held-"))
            else {
                return Poll::Pending("no namespace held-* yet".into());
            };
            match Api::<ConfigMap>::namespaced(client.clone(), &name)
                .get_opt("kept")
                .await
            {
                Ok(Some(_)) => Poll::Ready(name),
                Ok(None) => Poll::Pending(format!("no ConfigMap {name}/kept yet")),
                Err(e) => Poll::Pending(e.to_string()),
            }
        },
    )
    .await
    .expect("the run's namespace and ConfigMap appear");
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns_name);
    let cm = cms.get("kept").await.expect("the run's ConfigMap");
    cms.patch(
        "kept",
        &PatchParams::default(),
        &add_key(&cm.metadata.finalizers.unwrap_or_default(), OTHERS),
    )
    .await
    .expect("the other controller adds its key to the ConfigMap");
    let ns = namespaces.get(&ns_name).await.expect("the run's namespace");
    namespaces
        .patch(
            &ns_name,
            &PatchParams::default(),
            &add_key(&ns.metadata.finalizers.unwrap_or_default(), OTHERS),
        )
        .await
        .expect("the other controller adds its key to the namespace");
    let event: Event = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "kept.other-controller", "namespace": ns_name},
        "involvedObject": {"kind": "ConfigMap", "name": "kept", "namespace": ns_name,
                           "apiVersion": "v1", "uid": cm.metadata.uid},
        "reason": "OtherControllerAttached",
        "message": format!("{OTHERS} added by another controller"),
        "type": "Normal",
        "source": {"component": "other-controller"}
    }))
    .unwrap();
    Api::<Event>::namespaced(client, &ns_name)
        .create(&PostParams::default(), &event)
        .await
        .expect("the other controller's Event");
    ns_name
}

fn finalizers_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> Vec<String> {
    meta.finalizers.clone().unwrap_or_default()
}

pub async fn exercise(client: Client, kubeconfig: PathBuf, out: PathBuf) {
    let context = crate::common::make_it_someone_elses(&client, &kubeconfig).await;
    let (scenarios, fixtures) = write_scenario(&out);
    let runs = out.join("runs");
    let allow = format!("--allow-existing-cluster={context}");
    let mut run = super::unstuck_run_with(&kubeconfig, &scenarios, &fixtures, &runs, &[&allow]);
    let run = tokio::spawn(async move { run.output().await });
    let ns = other_controller(client.clone()).await;
    let o = tokio::time::timeout(Duration::from_secs(600), run)
        .await
        .expect("the run finishes")
        .expect("the run's task")
        .expect("unstuck runs");
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    eprintln!("{stdout}\n{stderr}");
    let failed = match o.status.success() {
        true => String::new(),
        false => crate::common::run_failure(&runs, "existing-cluster-foreign-finalizer"),
    };
    assert!(o.status.success(), "the scenario failed:\n{failed}");
    assert!(
        stderr.contains("(not created by unstuck)"),
        "the guard saw someone else's cluster:\n{stderr}"
    );

    // The report names what was left and what the run removed.
    let report_dir = std::fs::read_dir(&runs)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .find(|p| p.join("report.json").exists())
        .expect("a run folder with report.json");
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(report_dir.join("report.json")).unwrap()).unwrap();
    let cleanup = &report["scenarios"][0]["cleanup"];
    let lines = |field: &str| -> Vec<String> {
        cleanup[field]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect()
    };
    let (left, forced, leaked) = (lines("left"), lines("forced"), lines("leaked"));
    assert!(leaked.is_empty(), "{cleanup:#}");
    for what in [format!("Namespace {ns}:"), format!("ConfigMap {ns}/kept:")] {
        assert!(
            left.iter()
                .any(|l| l.starts_with(&what) && l.contains(OTHERS)),
            "{what} named as left with {OTHERS}: {cleanup:#}"
        );
        assert!(
            forced.iter().any(|l| l.starts_with(&what)
                && l.contains(&format!("removed this run's finalizer(s) {MINE}"))),
            "{what}'s own key removed: {cleanup:#}"
        );
    }
    assert!(
        left.iter().all(|l| !l.contains(MINE)),
        "the run's own key is never left: {left:?}"
    );
    assert!(
        stdout.contains("cleanup left (not the run's)") && stdout.contains(OTHERS),
        "the terminal report says what was left:\n{stdout}"
    );

    // On the cluster: the other controller's key is still there, alone.
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let n = namespaces
        .get(&ns)
        .await
        .expect("the namespace is still there");
    assert!(n.metadata.deletion_timestamp.is_some(), "it was deleted");
    assert_eq!(finalizers_of(&n.metadata), vec![OTHERS.to_string()]);
    let cm = cms.get("kept").await.expect("the ConfigMap is still there");
    assert!(cm.metadata.deletion_timestamp.is_some(), "it was deleted");
    assert_eq!(finalizers_of(&cm.metadata), vec![OTHERS.to_string()]);

    // The other controller finishes: its key goes, and so does the namespace.
    cms.patch(
        "kept",
        &PatchParams::default(),
        &without_key(&finalizers_of(&cm.metadata), OTHERS),
    )
    .await
    .expect("removing the other key from the ConfigMap");
    namespaces
        .patch(
            &ns,
            &PatchParams::default(),
            &without_key(&finalizers_of(&n.metadata), OTHERS),
        )
        .await
        .expect("removing the other key from the namespace");
    wait_until(&format!("namespace {ns} to go"), || async {
        match namespaces.get_opt(&ns).await {
            Ok(None) => Ok(()),
            Ok(Some(n)) => Err(format!(
                "still there: finalizers {:?}, spec.finalizers {:?}",
                n.metadata.finalizers,
                n.spec.and_then(|s| s.finalizers)
            )),
            Err(e) => Err(e.to_string()),
        }
    })
    .await;
}
