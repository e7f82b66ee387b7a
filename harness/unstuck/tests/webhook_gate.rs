//! A gate opened only for the doctor's own write (issue 27), on real
//! components: a namespace policy webhook (`failurePolicy: Fail`, namespace
//! UPDATE) whose only pod never starts (`ErrImageNeverPull`) stands in
//! front of a dead finalizer on a Terminating namespace.
//!
//! - Without `--allow-webhook-changes`: the finalizer patch is left with a
//!   reason that names the webhook, its pod's cause and the flag (exit 6);
//!   nothing is changed, the webhook still fails closed.
//! - With it: one run opens that webhook entry (saved first, annotated),
//!   removes the finalizer, sets the entry back to `Fail` and removes its
//!   annotation; the namespace is gone, exit 0, and the report says how
//!   long the gate was open.
//!
//! Needs root and the components built by ci/setup.sh (CI runs both).

use std::time::Duration;

use k8s_openapi::api::{
    admissionregistration::v1::ValidatingWebhookConfiguration,
    core::v1::{Namespace, Pod, Service},
};
use kube::{
    Api,
    api::{DeleteParams, PostParams},
};

mod common;

const POLICY_NS: &str = "it-gate-policy";
const APP_NS: &str = "it-gate-app";
const CONFIG: &str = "it-gate-namespace-policy";
const HOOK: &str = "validate.namespaces.gate-test.dev";
const KEY: &str = "cleanup.retired-gate-test.dev/namespace";

async fn policy(api: &Api<ValidatingWebhookConfiguration>) -> (String, bool) {
    let c = api.get(CONFIG).await.expect("the webhook configuration");
    let annotated = c
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(unstuck::doctor::apply::gate::WEBHOOK_GATE));
    (
        c.webhooks.unwrap()[0]
            .failure_policy
            .clone()
            .unwrap_or_default(),
        annotated,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_whose_backend_does_not_serve_is_opened_for_the_doctors_write_only() {
    let name = common::cluster_name("it-webhook-gate");
    let cluster = common::up(&name).await;
    let client = cluster.client();
    let kc = cluster.kubeconfig().to_str().unwrap().to_string();

    // The policy engine: a Service over a pod whose image is not there.
    common::create_namespace(&client, POLICY_NS).await;
    Api::<Pod>::namespaced(client.clone(), POLICY_NS)
        .create(
            &PostParams::default(),
            &common::from_json(serde_json::json!({
                "metadata": {"name": "policy-0", "labels": {"app": "gate-policy"}},
                "spec": {"terminationGracePeriodSeconds": 1, "containers": [{
                    "name": "webhook", "image": "unstuck.local/gate-policy:v9", "imagePullPolicy": "Never"}]}
            })),
        )
        .await
        .expect("the backend pod");
    Api::<Service>::namespaced(client.clone(), POLICY_NS)
        .create(
            &PostParams::default(),
            &common::from_json(serde_json::json!({
                "metadata": {"name": "gate-policy"},
                "spec": {"selector": {"app": "gate-policy"}, "ports": [{"port": 443, "targetPort": 9443}]}
            })),
        )
        .await
        .expect("the backend Service");
    // Only namespaces labelled for this test: nothing else is held.
    let hooks: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    hooks
        .create(
            &PostParams::default(),
            &common::from_json(serde_json::json!({
                "metadata": {"name": CONFIG},
                "webhooks": [{
                    "name": HOOK,
                    "admissionReviewVersions": ["v1"],
                    "sideEffects": "None",
                    "failurePolicy": "Fail",
                    "timeoutSeconds": 5,
                    "namespaceSelector": {"matchLabels": {"it-gate": "held"}},
                    "clientConfig": {"service": {"namespace": POLICY_NS, "name": "gate-policy", "path": "/validate"}},
                    "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["namespaces"], "scope": "Cluster"}]
                }]
            })),
        )
        .await
        .expect("the webhook configuration");
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &common::from_json(serde_json::json!({
                "metadata": {"name": APP_NS, "labels": {"it-gate": "held"}, "finalizers": [KEY]}
            })),
        )
        .await
        .expect("the held namespace");
    namespaces
        .delete(APP_NS, &DeleteParams::default())
        .await
        .expect("delete the namespace");
    tokio::time::sleep(Duration::from_secs(4)).await;

    let backups = common::Scratch::path("it-gate-backups");
    let backup_arg = backups.to_str().unwrap().to_string();
    let run = |extra: &[&str]| {
        let mut args = vec![
            "--kubeconfig",
            &kc,
            "-n",
            APP_NS,
            "--stuck-after",
            "2s",
            "--apply",
            "--yes",
            "-o",
            "json",
            "--backup-dir",
            &backup_arg,
        ];
        args.extend_from_slice(extra);
        common::doctor(&args)
    };

    // Without the flag: left, saying why and which flag; nothing changed.
    let left = run(&[]);
    let text = common::output_text(&left);
    assert_eq!(left.status.code(), Some(6), "{text}");
    for words in [
        "does not serve",
        "--allow-webhook-changes to open that webhook for this write only",
        "ErrImageNeverPull",
    ] {
        assert!(text.contains(words), "{words:?} not in\n{text}");
    }
    assert_eq!(policy(&hooks).await, ("Fail".to_string(), false));
    let ns = namespaces.get(APP_NS).await.expect("still there");
    assert_eq!(ns.metadata.finalizers, Some(vec![KEY.to_string()]));

    // With it: opened for the write, closed again, the namespace gone.
    let applied = run(&["--allow-webhook-changes"]);
    let text = common::output_text(&applied);
    assert_eq!(applied.status.code(), Some(0), "{text}");
    let report: serde_json::Value =
        serde_json::from_slice(&applied.stdout).unwrap_or_else(|e| panic!("{e}: {text}"));
    let lines = report["applied"].to_string();
    assert!(
        lines.contains("OpenWebhookGate") && lines.contains("for the doctor's write only"),
        "{text}"
    );
    assert!(
        lines.contains("CloseWebhookGate")
            && lines.contains("fails closed again (failurePolicy Fail): it was open for"),
        "{text}"
    );
    assert_eq!(
        policy(&hooks).await,
        ("Fail".to_string(), false),
        "set back to Fail, its annotation removed: {text}"
    );
    common::wait_gone(
        &namespaces,
        APP_NS,
        Duration::from_secs(60),
        Duration::from_secs(1),
    )
    .await
    .expect("the namespace is gone");
    let saved: Vec<_> = std::fs::read_dir(&backups)
        .expect("the backup dir")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        saved
            .iter()
            .any(|f| f.starts_with(&format!("validatingwebhookconfiguration.{CONFIG}."))),
        "the configuration was saved before it was opened: {saved:?}"
    );

    hooks
        .delete(CONFIG, &DeleteParams::default())
        .await
        .expect("remove the webhook");
    let layout = cluster.layout().clone();
    let report = cluster.down().await;
    assert!(report.errors.is_empty(), "{report}");
    assert!(unstuck::cluster::local::leftovers(&layout).is_empty());
}
