//! `kubernetes.io/vac-protection` on real components, on the default and
//! the newest supported version (both serve storage.k8s.io/v1
//! VolumeAttributesClass, GA in 1.34; 1.33 serves it only as v1beta1
//! behind a feature gate that is off by default, and unstuck does not
//! turn it on): kube-apiserver's StorageObjectInUseProtection admission
//! sets the key on a new class; while a claim names the class, deleting
//! the class leaves it Terminating, and `unstuck doctor --apply --yes`
//! reports the key in use and never strips it. Once the claim goes,
//! kube-controller-manager's vac-protection controller removes the key
//! and the class goes by itself.
//! Needs root and the components built by ci/setup.sh (CI runs both).

use std::{
    process::{Command, Stdio},
    time::Duration,
};

use k8s_openapi::api::{core::v1::PersistentVolumeClaim, storage::v1::VolumeAttributesClass};
use kube::{
    Api,
    api::{DeleteParams, PostParams},
};
use unstuck::{
    cluster::local::LocalCluster,
    components::{DEFAULT_K8S_VERSION, NEWEST_K8S_VERSION},
    wait::{self, Poll},
};

mod common;

use common::from_json;

const KEY: &str = "kubernetes.io/vac-protection";

async fn a_class_in_use_is_never_stripped(version: &str) {
    let name = common::cluster_name(&format!("it-vac-{}", version.replace('.', "")));
    let mut opts = common::up_options(&name);
    opts.k8s_version = version.to_owned();
    let cluster = LocalCluster::up(opts).await.expect("cluster up");
    let client = cluster.client();
    let kc = cluster.kubeconfig();

    let ns = "it-vac";
    common::create_namespace(&client, ns).await;
    let classes: Api<VolumeAttributesClass> = Api::all(client.clone());
    let class = classes
        .create(
            &PostParams::default(),
            &from_json(serde_json::json!({"metadata": {"name": "gold"},
                "driverName": "hostpath.csi.example.org", "parameters": {"iops": "3000"}})),
        )
        .await
        .expect("create the class");
    assert!(
        class.metadata.finalizers.iter().flatten().any(|f| f == KEY),
        "{version}: admission did not set {KEY}: {:?}",
        class.metadata.finalizers
    );
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), ns);
    claims
        .create(
            &PostParams::default(),
            &from_json(serde_json::json!({"metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "none",
                    "volumeAttributesClassName": "gold",
                    "resources": {"requests": {"storage": "1Gi"}}}})),
        )
        .await
        .expect("create the claim");
    classes
        .delete("gold", &DeleteParams::default())
        .await
        .expect("delete the class");

    // The class must have been stuck for the threshold first.
    tokio::time::sleep(Duration::from_secs(4)).await;
    // One per version: the two tests of this binary run side by side.
    let backups = common::Scratch::path(&format!("it-vac-backups-{}", version.replace('.', "")));
    let out = Command::new(env!("CARGO_BIN_EXE_unstuck"))
        .arg("doctor")
        .arg("--kubeconfig")
        .arg(&kc)
        .args(["--stuck-after", "3s", "--apply", "--yes", "-o", "json"])
        .arg("--backup-dir")
        .arg(&backups)
        .stdin(Stdio::null())
        .env("UNSTUCK_LOG", "warn")
        .output()
        .expect("unstuck doctor runs");
    let text = format!(
        "{version}: exit {:?}\n{}\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {text}"));
    let about_gold: Vec<&serde_json::Value> = report["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| f["subject"].as_str().is_some_and(|s| s.ends_with(" gold")))
        .collect();
    assert!(
        about_gold.len() == 1
            && about_gold[0]["kind"] == "ProtectedFinalizerInUse"
            && about_gold[0]["evidence"]
                .to_string()
                .contains("claim it-vac/data names it in spec.volumeAttributesClassName"),
        "{text}"
    );
    let still = classes.get("gold").await.expect("the class is still there");
    assert!(
        still.metadata.finalizers.iter().flatten().any(|f| f == KEY),
        "{KEY} was stripped: {text}"
    );
    // Nothing to apply, and the class is still stuck: a CI gate must not
    // read that as fixed.
    assert_eq!(out.status.code(), Some(7), "{text}");
    assert!(
        report["outcome"]
            .as_str()
            .is_some_and(|o| o.contains("stuck target(s) still there")),
        "{text}"
    );

    // Its real owner finishes once nothing names the class.
    claims
        .delete("data", &DeleteParams::default())
        .await
        .expect("delete the claim");
    wait::until(
        format!("{version}: the class gone once no claim names it"),
        Duration::from_secs(120),
        Duration::from_secs(1),
        || async {
            match classes.get_opt("gold").await {
                Ok(None) => Poll::Ready(()),
                Ok(Some(c)) => Poll::Pending(format!("finalizers {:?}", c.metadata.finalizers)),
                Err(e) => Poll::Pending(e.to_string()),
            }
        },
    )
    .await
    .expect("kube-controller-manager finishes the class");

    let layout = cluster.layout().clone();
    let report = cluster.down().await;
    assert!(report.errors.is_empty(), "{report}");
    assert!(unstuck::cluster::local::leftovers(&layout).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vac_protection_on_the_default_version() {
    a_class_in_use_is_never_stripped(DEFAULT_K8S_VERSION).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vac_protection_on_the_newest_version() {
    a_class_in_use_is_never_stripped(NEWEST_K8S_VERSION).await;
}
