//! `unstuck doctor` on real components, two promises:
//! - `--save-snapshot F` writes a snapshot safe to hand to a vendor: a
//!   Secret's value (in its last-applied annotation), a pod's env value and
//!   args, a Deployment's template env are nowhere in F; F is 0600; a second
//!   run never writes over F; `unstuck new-scenario --from-snapshot F`
//!   still makes a scenario from it.
//! - an object served in several versions (a HorizontalPodAutoscaler as
//!   autoscaling/v1 and v2, a custom resource as v1alpha1 and v1) is one
//!   finding and one patch: `--apply` succeeds and the object is gone.
//!
//! Needs root and the components built by ci/setup.sh (CI runs both).

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use k8s_openapi::{
    api::{
        apps::v1::Deployment,
        autoscaling::v2::HorizontalPodAutoscaler,
        core::v1::{ConfigMap, Namespace, Pod, Secret},
    },
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kube::{
    Api, Client,
    api::{ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams},
};
use unstuck::wait::{self, Poll};

mod common;

/// The values planted in the cluster; none may reach the snapshot file.
const SECRET_VALUE: &str = "zq-secret-value-5ad1e";
const ENV_VALUE: &str = "zq-env-value-77c2b";
const ARG_VALUE: &str = "zq-arg-value-90e4f";
const TEMPLATE_ENV_VALUE: &str = "zq-template-env-3b8a0";

const SNAP_NS: &str = "it-snap-vendor";
/// A namespace the incident has nothing to do with.
const UNRELATED_NS: &str = "it-snap-payroll";
/// A key nothing serves.
const SNAP_KEY: &str = "vault.zq-gone.dev/protect";

const VERSIONS_NS: &str = "it-snap-versions";
const VERSIONS_KEY: &str = "cleanup.zq-retired.dev/hold";
const HPA: &str = "web-hpa";
const CRD_GROUP: &str = "versions.zq-retired.dev";
const GADGET: &str = "g1";

fn b64(s: &str) -> String {
    serde_json::to_value(k8s_openapi::ByteString(s.as_bytes().to_vec()))
        .unwrap()
        .as_str()
        .unwrap()
        .to_owned()
}

/// The report's findings whose subject names `name` (after a namespace).
fn findings_about<'a>(report: &'a serde_json::Value, name: &str) -> Vec<&'a serde_json::Value> {
    let suffix = format!("/{name}");
    report["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f["subject"].as_str().unwrap().ends_with(&suffix))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshots_are_redacted_private_and_new_and_every_object_is_found_once() {
    let name = common::cluster_name("it-doctor-snap");
    let cluster = common::up(&name).await;
    let client = cluster.client();
    let kc = cluster.kubeconfig().to_str().unwrap().to_string();
    let dir = common::Scratch::dir("unstuck-it-snapshot");

    saved_snapshot_holds_no_planted_value(&client, &kc, &dir).await;
    one_finding_per_object_whatever_its_versions(&client, &kc, &dir).await;

    let layout = cluster.layout().clone();
    let report = cluster.down().await;
    assert!(report.errors.is_empty(), "{report}");
    assert!(unstuck::cluster::local::leftovers(&layout).is_empty());
}

async fn saved_snapshot_holds_no_planted_value(client: &Client, kc: &str, dir: &Path) {
    common::create_namespace(client, SNAP_NS).await;
    let pp = PostParams::default();
    // A Secret as `kubectl apply` leaves it: its value in `data` and again
    // in the last-applied annotation; held by a dead key, then deleted.
    let applied = serde_json::json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "vendor-db", "namespace": SNAP_NS, "annotations": {},
                     "finalizers": [SNAP_KEY]},
        "stringData": {"password": SECRET_VALUE},
    });
    let secrets: Api<Secret> = Api::namespaced(client.clone(), SNAP_NS);
    secrets
        .create(
            &pp,
            &common::from_json(serde_json::json!({
                "metadata": {"name": "vendor-db", "finalizers": [SNAP_KEY], "annotations": {
                    "kubectl.kubernetes.io/last-applied-configuration": format!("{applied}\n")
                }},
                "data": {"password": b64(SECRET_VALUE)},
            })),
        )
        .await
        .expect("secret");
    secrets
        .delete("vendor-db", &DeleteParams::default())
        .await
        .expect("delete secret");
    // Something stuck beside it.
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), SNAP_NS);
    cms.create(
        &pp,
        &common::from_json(
            serde_json::json!({"metadata": {"name": "vendor-settings", "finalizers": [SNAP_KEY]}}),
        ),
    )
    .await
    .expect("configmap");
    cms.delete("vendor-settings", &DeleteParams::default())
        .await
        .expect("delete configmap");
    // A pod given a value in its env and another in its args, and a
    // Deployment whose template carries one too.
    let pods: Api<Pod> = Api::namespaced(client.clone(), SNAP_NS);
    pods.create(
        &pp,
        &common::from_json(serde_json::json!({
            "metadata": {"name": "vendor-app"},
            "spec": {"terminationGracePeriodSeconds": 0, "containers": [{
                "name": "app", "image": "unstuck.local/busybox:1.35",
                "command": ["sh", "-c"], "args": ["exec sleep 3600", ARG_VALUE],
                "env": [{"name": "VENDOR_TOKEN", "value": ENV_VALUE}]
            }]}
        })),
    )
    .await
    .expect("pod");
    let template_env = serde_json::json!([{"name": "VENDOR_TOKEN", "value": TEMPLATE_ENV_VALUE}]);
    let deployment = serde_json::json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "vendor-web", "namespace": SNAP_NS},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "vendor-web"}},
                 "template": {"metadata": {"labels": {"app": "vendor-web"}},
                              "spec": {"containers": [{"name": "web",
                                  "image": "unstuck.local/busybox:1.35",
                                  "env": template_env}]}}}
    });
    let mut with_annotation = deployment.clone();
    with_annotation["metadata"]["annotations"] = serde_json::json!({
        "kubectl.kubernetes.io/last-applied-configuration": deployment.to_string()
    });
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), SNAP_NS);
    deployments
        .create(&pp, &common::from_json(with_annotation))
        .await
        .expect("deployment");

    let file = dir.join("vendor.json");
    let f = file.to_str().unwrap();
    let first = common::unstuck(&[
        "doctor",
        "--kubeconfig",
        kc,
        "--stuck-after",
        "1s",
        "-o",
        "json",
        "--save-snapshot",
        f,
    ]);
    assert_eq!(
        first.status.code(),
        Some(0),
        "{}",
        common::output_text(&first)
    );
    let saved = std::fs::read(&file).expect("the snapshot file");
    let saved_text = String::from_utf8_lossy(&saved).to_string();
    // It holds the incident: the stuck objects, the pod, the workload,
    // the env var's name.
    for expected in [
        "vendor-db",
        "vendor-settings",
        "vendor-app",
        "vendor-web",
        "VENDOR_TOKEN",
        SNAP_KEY,
    ] {
        assert!(
            saved_text.contains(expected),
            "{expected} is not in the snapshot"
        );
    }
    for planted in [
        SECRET_VALUE.to_owned(),
        b64(SECRET_VALUE),
        ENV_VALUE.to_owned(),
        ARG_VALUE.to_owned(),
        TEMPLATE_ENV_VALUE.to_owned(),
    ] {
        assert!(
            !saved_text.contains(&planted),
            "{planted} is in the saved snapshot {}",
            file.display()
        );
    }
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "mode {mode:o}");

    // Scoped to the incident's namespace: what the diagnosis of that
    // namespace read, nothing of a namespace nobody used (issue 26).
    common::create_namespace(client, UNRELATED_NS).await;
    let unrelated: Api<Deployment> = Api::namespaced(client.clone(), UNRELATED_NS);
    unrelated
        .create(
            &pp,
            &common::from_json(serde_json::json!({
                "metadata": {"name": "ledger-batch"},
                "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "ledger"}},
                    "template": {"metadata": {"labels": {"app": "ledger"}},
                        "spec": {"containers": [{"name": "c", "image": "ledger:1"}]}}}
            })),
        )
        .await
        .expect("an unrelated deployment");
    let scoped_file = dir.join("vendor-scoped.json");
    let scoped = common::unstuck(&[
        "doctor",
        "--kubeconfig",
        kc,
        "--stuck-after",
        "1s",
        "-n",
        SNAP_NS,
        "--save-snapshot",
        scoped_file.to_str().unwrap(),
    ]);
    assert_eq!(
        scoped.status.code(),
        Some(0),
        "{}",
        common::output_text(&scoped)
    );
    let scoped_text = std::fs::read_to_string(&scoped_file).expect("the scoped snapshot");
    for expected in ["vendor-db", "vendor-settings", SNAP_KEY] {
        assert!(
            scoped_text.contains(expected),
            "{expected} is not in the scoped snapshot"
        );
    }
    assert!(
        !scoped_text.contains(UNRELATED_NS) && !scoped_text.contains("ledger-batch"),
        "the scoped snapshot holds {UNRELATED_NS}"
    );

    // Never over an existing file, and said before any work.
    let second = common::unstuck(&[
        "doctor",
        "--kubeconfig",
        kc,
        "--stuck-after",
        "1s",
        "--save-snapshot",
        f,
    ]);
    assert_eq!(
        second.status.code(),
        Some(2),
        "{}",
        common::output_text(&second)
    );
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(
        err.contains(f) && err.contains("already exists") && err.contains("move"),
        "{}",
        common::output_text(&second)
    );
    assert_eq!(
        std::fs::read(&file).unwrap(),
        saved,
        "the second run changed the file"
    );

    // A scenario can still be made from what a vendor receives.
    let scenarios = dir.join("scenarios");
    let fixtures = dir.join("fixtures");
    let made = common::unstuck(&[
        "new-scenario",
        "vendor-case",
        "--from-snapshot",
        f,
        "--scenarios",
        scenarios.to_str().unwrap(),
        "--fixtures",
        fixtures.to_str().unwrap(),
    ]);
    assert_eq!(
        made.status.code(),
        Some(0),
        "{}",
        common::output_text(&made)
    );
    let scenario_path = scenarios.join("vendor-case.yaml");
    let scenario = unstuck::core::scenario::load_file(&scenario_path)
        .unwrap_or_else(|e| panic!("{e}\n{}", common::output_text(&made)));
    scenario
        .validate_fixtures(&fixtures)
        .unwrap_or_else(|e| panic!("{e}"));
    let secret_fixture = fixtures.join("vendor-case/secret-vendor-db.yaml");
    let written = std::fs::read_to_string(&secret_fixture).unwrap_or_else(|e| {
        panic!(
            "{}: {e}\n{}",
            secret_fixture.display(),
            common::output_text(&made)
        )
    });
    assert!(written.contains(SNAP_KEY), "{written}");
    for entry in walk(dir) {
        let body = std::fs::read_to_string(&entry).unwrap();
        assert!(
            !body.contains(SECRET_VALUE) && !body.contains(&b64(SECRET_VALUE)),
            "{}",
            entry.display()
        );
    }

    // Clean up what this part made.
    let pp = PatchParams::default();
    let unhold = Patch::Merge(serde_json::json!({"metadata": {"finalizers": null}}));
    secrets.patch("vendor-db", &pp, &unhold).await.unwrap();
    cms.patch("vendor-settings", &pp, &unhold).await.unwrap();
    Api::<Namespace>::all(client.clone())
        .delete(SNAP_NS, &DeleteParams::default())
        .await
        .unwrap();
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

async fn one_finding_per_object_whatever_its_versions(client: &Client, kc: &str, dir: &Path) {
    common::create_namespace(client, VERSIONS_NS).await;
    let pp = PostParams::default();
    let hpas: Api<HorizontalPodAutoscaler> = Api::namespaced(client.clone(), VERSIONS_NS);
    hpas.create(
        &pp,
        &common::from_json(serde_json::json!({
            "metadata": {"name": HPA, "finalizers": [VERSIONS_KEY]},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "absent"},
                     "minReplicas": 1, "maxReplicas": 2}
        })),
    )
    .await
    .expect("hpa");
    hpas.delete(HPA, &DeleteParams::default())
        .await
        .expect("delete hpa");

    // A CRD served in two versions, no conversion webhook.
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd_name = format!("gadgets.{CRD_GROUP}");
    let schema = serde_json::json!({"openAPIV3Schema": {"type": "object",
                                    "x-kubernetes-preserve-unknown-fields": true}});
    crds.create(
        &pp,
        &common::from_json(serde_json::json!({
            "metadata": {"name": crd_name},
            "spec": {"group": CRD_GROUP, "scope": "Namespaced",
                     "names": {"kind": "Gadget", "listKind": "GadgetList",
                               "plural": "gadgets", "singular": "gadget"},
                     "conversion": {"strategy": "None"},
                     "versions": [
                         {"name": "v1alpha1", "served": true, "storage": false, "schema": schema},
                         {"name": "v1", "served": true, "storage": true, "schema": schema}
                     ]}
        })),
    )
    .await
    .expect("crd");
    wait::until(
        format!("CRD {crd_name} Established"),
        Duration::from_secs(60),
        Duration::from_millis(500),
        || async {
            let established = crds.get(&crd_name).await.ok().is_some_and(|c| {
                c.status
                    .and_then(|s| s.conditions)
                    .unwrap_or_default()
                    .iter()
                    .any(|c| c.type_ == "Established" && c.status == "True")
            });
            if established {
                Poll::Ready(())
            } else {
                Poll::Pending("not yet".to_string())
            }
        },
    )
    .await
    .expect("the CRD is served");
    let ar = ApiResource {
        group: CRD_GROUP.into(),
        version: "v1".into(),
        api_version: format!("{CRD_GROUP}/v1"),
        kind: "Gadget".into(),
        plural: "gadgets".into(),
    };
    let gadgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), VERSIONS_NS, &ar);
    gadgets
        .create(
            &pp,
            &common::from_json(serde_json::json!({
                "apiVersion": format!("{CRD_GROUP}/v1"), "kind": "Gadget",
                "metadata": {"name": GADGET, "finalizers": [VERSIONS_KEY]}
            })),
        )
        .await
        .expect("gadget");
    gadgets
        .delete(GADGET, &DeleteParams::default())
        .await
        .expect("delete gadget");

    let base = ["doctor", "--kubeconfig", kc, "-n", VERSIONS_NS];
    let base: Vec<&str> = base.into_iter().chain(["--stuck-after", "1s"]).collect();
    // Until both are stuck past the threshold and discovery serves the CRD.
    let looked = wait::until(
        "the doctor to find the HPA and the Gadget",
        Duration::from_secs(120),
        Duration::from_secs(2),
        || {
            let o = common::unstuck(&[&base[..], &["-o", "json"]].concat());
            async move {
                let report = common::stdout_json(&o);
                if !findings_about(&report, HPA).is_empty()
                    && !findings_about(&report, GADGET).is_empty()
                {
                    Poll::Ready(o)
                } else {
                    Poll::Pending(format!("{}", report["findings"]))
                }
            }
        },
    )
    .await
    .expect("findings");
    let report = common::stdout_json(&looked);
    for (name, api_version) in [
        (HPA, "autoscaling/v2"),
        (GADGET, "versions.zq-retired.dev/v1"),
    ] {
        let found = findings_about(&report, name);
        assert_eq!(found.len(), 1, "{name}: {}", common::output_text(&looked));
        // Under the group's preferred version.
        assert!(
            found[0]["subject"]
                .as_str()
                .unwrap()
                .starts_with(&format!("{api_version}/")),
            "{}",
            found[0]
        );
    }

    // The owner verdict is not what this test is about: whatever the
    // owner rules conclude about a key nothing serves (`Dead`, or
    // `Unknown` when they ask for more proof), the person asserts it dead.
    let backups = dir.join("backups");
    let applied = common::unstuck(
        &[
            &base[..],
            &[
                "--apply",
                "--yes",
                "--assume-dead",
                VERSIONS_KEY,
                "-o",
                "json",
                "--backup-dir",
                backups.to_str().unwrap(),
            ],
        ]
        .concat(),
    );
    assert_eq!(
        applied.status.code(),
        Some(0),
        "{}",
        common::output_text(&applied)
    );
    let report = common::stdout_json(&applied);
    let lines: Vec<&str> = report["applied"]
        .as_array()
        .expect("applied")
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    assert!(
        !lines.iter().any(|l| l.starts_with("FAILED")),
        "{}",
        common::output_text(&applied)
    );
    for (name, path) in [
        (HPA, "/apis/autoscaling/v2/namespaces/"),
        (GADGET, "/apis/versions.zq-retired.dev/v1/namespaces/"),
    ] {
        assert_eq!(
            findings_about(&report, name).len(),
            1,
            "{name}: {}",
            common::output_text(&applied)
        );
        let patches: Vec<&&str> = lines
            .iter()
            .filter(|l| l.contains(&format!("/{name}: ")))
            .collect();
        assert_eq!(
            patches.len(),
            1,
            "{name}: {}",
            common::output_text(&applied)
        );
        assert!(
            patches[0].contains(path),
            "{}",
            common::output_text(&applied)
        );
    }
    wait::until(
        "the HPA and the Gadget to be gone",
        Duration::from_secs(60),
        Duration::from_secs(1),
        || async {
            match (hpas.get_opt(HPA).await, gadgets.get_opt(GADGET).await) {
                (Ok(None), Ok(None)) => Poll::Ready(()),
                other => Poll::Pending(format!("{other:?}")),
            }
        },
    )
    .await
    .expect("both gone");

    crds.delete(&crd_name, &DeleteParams::default())
        .await
        .unwrap();
    Api::<Namespace>::all(client.clone())
        .delete(VERSIONS_NS, &DeleteParams::default())
        .await
        .unwrap();
}
