//! A CRD conversion webhook whose Service is gone, through `unstuck doctor`
//! on real components: OSM's MultiClusterService CRD (the fixtures of
//! scenario `crd-conversion-webhook-service-gone`, with the real group
//! `config.openservicemesh.io`), objects stored in v1alpha1 in two
//! namespaces before the upgrade, a third namespace with none, all three
//! deleted. Checks what the scenario cannot: the CLI's gate and scope.
//! - `-n` a namespace it does not block: the CRD is not in scope;
//! - `--apply` without `--allow-crd-conversion-changes`: the step is shown
//!   and skipped, the CRD is untouched;
//! - with it, scoped to one blocked namespace: the CRD is saved, then
//!   switched to strategy None, and all three namespaces go.
//!
//! Needs root and the components built by ci/setup.sh.

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use k8s_openapi::{
    api::core::v1::Namespace,
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kube::{
    Api, Client,
    api::{ApiResource, DeleteParams, DynamicObject, PostParams},
};
use unstuck::wait::{self, Poll};

mod common;

const CRD: &str = "multiclusterservices.config.openservicemesh.io";
const BLOCKED: [&str; 2] = ["it-conv-east", "it-conv-west"];
const QUIET: &str = "it-conv-quiet";

fn fixture(name: &str) -> serde_json::Value {
    let path = common::repo_root()
        .join("fixtures/crd-conversion-webhook-service-gone")
        .join(name);
    let text = std::fs::read_to_string(&path).expect("fixture");
    let mut docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&text).expect("YAML");
    docs.retain(|d| !d.is_null());
    assert_eq!(docs.len(), 1, "{}", path.display());
    docs.remove(0)
}

fn kinds(report: &serde_json::Value) -> Vec<String> {
    report["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter_map(|f| f["kind"].as_str().map(str::to_owned))
        .collect()
}

fn strategy(crd: &CustomResourceDefinition) -> Option<String> {
    crd.spec.conversion.as_ref().map(|c| c.strategy.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_conversion_webhook_is_switched_only_when_allowed_and_in_scope() {
    let cluster = common::up(&common::cluster_name("it-conversion")).await;
    let result = tokio::spawn(exercise(cluster.client(), cluster.kubeconfig())).await;
    let down = cluster.down().await;
    eprintln!("cluster down: {down}");
    if let Err(e) = result {
        std::panic::resume_unwind(e.into_panic());
    }
}

async fn exercise(client: Client, kubeconfig: PathBuf) {
    let kc = kubeconfig.to_str().unwrap().to_string();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let namespaces: Api<Namespace> = Api::all(client.clone());
    break_it(&client, &crds, &namespaces).await;
    let backups = common::Scratch::path("unstuck-it-conversion");
    let (skip_dir, apply_dir) = (backups.join("skipped"), backups.join("applied"));
    let base = |backup: &Path| {
        vec![
            "--kubeconfig".to_owned(),
            kc.clone(),
            "--stuck-after".to_owned(),
            "1s".to_owned(),
            "-o".to_owned(),
            "json".to_owned(),
            "--backup-dir".to_owned(),
            backup.display().to_string(),
        ]
    };
    let args = |v: &[String], more: &[&str]| -> Vec<String> {
        v.iter()
            .cloned()
            .chain(more.iter().map(|s| s.to_string()))
            .collect()
    };
    let run = |v: Vec<String>| common::doctor(&v.iter().map(String::as_str).collect::<Vec<_>>());

    // The whole cluster, dry run: one root cause, the namespaces cite it.
    let whole = run(base(&skip_dir));
    let report = common::stdout_json(&whole);
    let found = kinds(&report);
    assert_eq!(
        found
            .iter()
            .filter(|k| *k == "DeadConversionWebhook")
            .count(),
        1,
        "{}",
        common::output_text(&whole)
    );
    let plan = report["plan"].to_string();
    assert!(
        plan.contains("SetCrdConversionNone"),
        "{}",
        common::output_text(&whole)
    );
    assert!(
        !plan.contains("no dead webhook explains it"),
        "{}",
        common::output_text(&whole)
    );

    // Scoped to a namespace it blocks nothing in: not in scope.
    let other = run(args(&base(&skip_dir), &["-n", "default"]));
    assert!(
        !kinds(&common::stdout_json(&other)).contains(&"DeadConversionWebhook".to_owned()),
        "{}",
        common::output_text(&other)
    );

    // --apply without the opt-in: shown, skipped, the CRD untouched.
    let before = crds.get(CRD).await.expect("the CRD");
    let skipped = run(args(&base(&skip_dir), &["--apply", "--yes"]));
    let applied = common::stdout_json(&skipped)["applied"].to_string();
    assert!(
        applied.contains("needs --allow-crd-conversion-changes"),
        "{}",
        common::output_text(&skipped)
    );
    let after = crds.get(CRD).await.expect("the CRD");
    assert_eq!(
        after.metadata.resource_version,
        before.metadata.resource_version,
        "{}",
        common::output_text(&skipped)
    );
    assert_eq!(strategy(&after).as_deref(), Some("Webhook"));
    assert!(!skip_dir.exists(), "nothing was saved, nothing was changed");

    // With it, scoped to one namespace it blocks: saved, switched, and
    // every namespace goes.
    // A bare flag names no CRD: a usage error, nothing looked at.
    let bare = run(args(
        &base(&apply_dir),
        &["--apply", "--yes", "--allow-crd-conversion-changes"],
    ));
    assert_eq!(
        bare.status.code(),
        Some(2),
        "{}",
        common::output_text(&bare)
    );
    let named = format!("--allow-crd-conversion-changes={CRD}");
    let switched = run(args(
        &base(&apply_dir),
        &["--apply", "--yes", named.as_str(), "-n", BLOCKED[0]],
    ));
    eprintln!("{}", common::output_text(&switched));
    assert_eq!(
        switched.status.code(),
        Some(0),
        "{}",
        common::output_text(&switched)
    );
    let now = crds.get(CRD).await.expect("the CRD");
    assert_eq!(
        strategy(&now).as_deref(),
        Some("None"),
        "{}",
        common::output_text(&switched)
    );
    assert!(
        now.spec
            .conversion
            .as_ref()
            .is_some_and(|c| c.webhook.is_none()),
        "the webhook configuration is unset with it"
    );
    let saved: Vec<PathBuf> = std::fs::read_dir(&apply_dir)
        .expect("the backup dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    assert_eq!(saved.len(), 1, "{saved:?}");
    let saved: CustomResourceDefinition =
        serde_json::from_str(&std::fs::read_to_string(&saved[0]).expect("backup")).expect("a CRD");
    assert_eq!(saved.metadata.uid, before.metadata.uid);
    assert_eq!(
        strategy(&saved).as_deref(),
        Some("Webhook"),
        "saved before the change"
    );
    for ns in BLOCKED.into_iter().chain([QUIET]) {
        wait::until(
            format!("namespace {ns} gone"),
            Duration::from_secs(180),
            Duration::from_secs(1),
            || async {
                match namespaces.get_opt(ns).await {
                    Ok(None) => Poll::Ready(()),
                    Ok(Some(n)) => Poll::Pending(format!("{:?}", n.status)),
                    Err(e) => Poll::Pending(e.to_string()),
                }
            },
        )
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", common::output_text(&switched)));
    }
}

/// The scenario's steps: v1.0.0 CRD, objects stored in v1alpha1, the
/// v1.1.0 CRD with its dead conversion webhook, the namespaces deleted;
/// then waits for the namespace controller's condition.
async fn break_it(
    client: &Client,
    crds: &Api<CustomResourceDefinition>,
    namespaces: &Api<Namespace>,
) {
    let old: CustomResourceDefinition = common::from_json(fixture("crd-v1.0.0.yaml"));
    crds.create(&PostParams::default(), &old)
        .await
        .expect("CRD v1.0.0");
    for ns in BLOCKED.into_iter().chain([QUIET]) {
        let n: Namespace = common::from_json(serde_json::json!({"metadata": {"name": ns}}));
        namespaces
            .create(&PostParams::default(), &n)
            .await
            .expect("namespace");
    }
    let ar = ApiResource {
        group: "config.openservicemesh.io".into(),
        version: "v1alpha1".into(),
        api_version: "config.openservicemesh.io/v1alpha1".into(),
        kind: "MultiClusterService".into(),
        plural: "multiclusterservices".into(),
    };
    let object: DynamicObject = common::from_json(fixture("multiclusterservice.yaml"));
    for ns in BLOCKED {
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &ar);
        // Served once the CRD is Established.
        wait::until(
            format!("a MultiClusterService in {ns}"),
            Duration::from_secs(60),
            Duration::from_millis(500),
            || async {
                match api.create(&PostParams::default(), &object).await {
                    Ok(_) => Poll::Ready(()),
                    Err(e) => Poll::Pending(e.to_string()),
                }
            },
        )
        .await
        .expect("created");
    }
    let mut upgraded: CustomResourceDefinition = common::from_json(fixture("crd.yaml"));
    upgraded.metadata.resource_version =
        crds.get(CRD).await.expect("CRD").metadata.resource_version;
    crds.replace(CRD, &PostParams::default(), &upgraded)
        .await
        .expect("the upgrade");
    for ns in BLOCKED.into_iter().chain([QUIET]) {
        namespaces
            .delete(ns, &DeleteParams::default())
            .await
            .expect("deleting the namespace");
    }
    let quoted = "conversion webhook for config.openservicemesh.io/v1alpha1, Kind=MultiClusterService failed";
    for ns in BLOCKED {
        wait::until(
            format!("{ns} blocked by the conversion webhook"),
            Duration::from_secs(180),
            Duration::from_secs(1),
            || async {
                let n = match namespaces.get(ns).await {
                    Ok(n) => n,
                    Err(e) => return Poll::Pending(e.to_string()),
                };
                let message = n
                    .status
                    .and_then(|s| s.conditions)
                    .unwrap_or_default()
                    .into_iter()
                    .find(|c| c.type_ == "NamespaceDeletionContentFailure" && c.status == "True")
                    .and_then(|c| c.message);
                match message {
                    Some(m) if m.contains(quoted) => Poll::Ready(()),
                    other => Poll::Pending(format!("condition message {other:?}")),
                }
            },
        )
        .await
        .expect("the symptom");
    }
}
