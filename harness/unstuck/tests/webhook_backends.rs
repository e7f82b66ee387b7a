//! Which webhook backends the doctor calls gone, on real components. Four
//! admission webhooks (failurePolicy Fail, matching DELETE of configmaps
//! in a labelled namespace), each blocking its own Terminating namespace,
//! each calling a different kind of Service:
//! - `ExternalName` (-> localhost): what it points at is not in the API:
//!   not proven gone (an apiserver routing to endpoints, as the local
//!   provider's does, answers `unsupported service type "ExternalName"`:
//!   a configuration to fix, not a backend gone);
//! - no selector, with a hand-made EndpointSlice holding a ready endpoint:
//!   serving, not gone;
//! - no selector and no endpoint anywhere (endpoints kept outside the
//!   cluster's controllers): not proven gone;
//! - a selector matching no pod and no ready endpoint at two reads
//!   [`backend::SUSTAINED`] apart: gone, with both reads quoted.
//!
//! Only the last gets a DeadWebhook finding and a fail-open step; for the
//! others the blocked namespace's finding says why the backend is not
//! proven gone, and `--apply --allow-webhook-changes` changes nothing.
//! Needs root and the components built by ci/setup.sh.

use std::time::Duration;

use k8s_openapi::api::{
    admissionregistration::v1::ValidatingWebhookConfiguration,
    core::v1::{ConfigMap, Namespace, Service},
    discovery::v1::EndpointSlice,
};
use kube::{
    Api, Client,
    api::{DeleteParams, PostParams},
};
use unstuck::{
    cluster::local::{LocalCluster, UpOptions},
    wait::{self, Poll},
};
use unstuck_core::doctor::backend;

mod common;

/// Where the Services live.
const SVC_NS: &str = "it-backends";

/// One case: the webhook configuration, its Service and the namespace it blocks.
struct Case {
    config: &'static str,
    service: &'static str,
    namespace: &'static str,
}

const EXTERNAL: Case = Case {
    config: "it-external",
    service: "external-webhook",
    namespace: "it-guard-external",
};
const MANUAL: Case = Case {
    config: "it-manual",
    service: "manual-webhook",
    namespace: "it-guard-manual",
};
const BARE: Case = Case {
    config: "it-bare",
    service: "bare-webhook",
    namespace: "it-guard-bare",
};
const GONE: Case = Case {
    config: "it-gone",
    service: "gone-webhook",
    namespace: "it-guard-gone",
};

fn webhook_name(c: &Case) -> String {
    format!("deny.{}.example.com", c.config)
}

async fn create<K>(api: &Api<K>, v: serde_json::Value)
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::Serialize + serde::de::DeserializeOwned,
{
    let label = v["metadata"]["name"].to_string();
    api.create(&PostParams::default(), &common::from_json(v))
        .await
        .unwrap_or_else(|e| panic!("creating {label}: {e}"));
}

/// The webhook configuration of a case, its namespace and a ConfigMap in it.
async fn guard(client: &Client, c: &Case) {
    create(
        &Api::<ValidatingWebhookConfiguration>::all(client.clone()),
        serde_json::json!({
            "metadata": {"name": c.config},
            "webhooks": [{
                "name": webhook_name(c), "admissionReviewVersions": ["v1"],
                "sideEffects": "None", "failurePolicy": "Fail", "timeoutSeconds": 3,
                "clientConfig": {"service": {"namespace": SVC_NS, "name": c.service, "port": 1}},
                "namespaceSelector": {"matchLabels": {"it.example.com/guard": c.config}},
                "rules": [{"apiGroups": [""], "apiVersions": ["v1"],
                           "operations": ["DELETE"], "resources": ["configmaps"]}]
            }]
        }),
    )
    .await;
    create(
        &Api::<Namespace>::all(client.clone()),
        serde_json::json!({"metadata": {"name": c.namespace,
                                        "labels": {"it.example.com/guard": c.config}}}),
    )
    .await;
    create(
        &Api::<ConfigMap>::namespaced(client.clone(), c.namespace),
        serde_json::json!({"metadata": {"name": "victim"}, "data": {"k": "v"}}),
    )
    .await;
}

/// `node_ip`: the hand-made endpoint's address, on this machine (a port
/// nothing listens on), so no call leaves it.
async fn services(client: &Client, node_ip: std::net::Ipv4Addr) {
    create(
        &Api::<Namespace>::all(client.clone()),
        serde_json::json!({"metadata": {"name": SVC_NS}}),
    )
    .await;
    let svcs: Api<Service> = Api::namespaced(client.clone(), SVC_NS);
    create(
        &svcs,
        serde_json::json!({"metadata": {"name": EXTERNAL.service},
            "spec": {"type": "ExternalName", "externalName": "localhost"}}),
    )
    .await;
    for c in [&MANUAL, &BARE] {
        create(
            &svcs,
            serde_json::json!({"metadata": {"name": c.service},
                "spec": {"ports": [{"port": 1, "protocol": "TCP"}]}}),
        )
        .await;
    }
    create(
        &svcs,
        serde_json::json!({"metadata": {"name": GONE.service},
            "spec": {"selector": {"app": "gone-webhook"},
                     "ports": [{"port": 1, "protocol": "TCP"}]}}),
    )
    .await;
    // The hand-made slice: a ready endpoint nothing in the cluster manages.
    create(
        &Api::<EndpointSlice>::namespaced(client.clone(), SVC_NS),
        serde_json::json!({
            "metadata": {"name": "manual-webhook-by-hand",
                         "labels": {"kubernetes.io/service-name": MANUAL.service,
                                    "endpointslice.kubernetes.io/managed-by": "it.example.com-by-hand"}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": [node_ip.to_string()], "conditions": {"ready": true}}],
            "ports": [{"port": 1, "protocol": "TCP"}]
        }),
    )
    .await;
}

fn findings<'a>(report: &'a serde_json::Value, kind: &str) -> Vec<&'a serde_json::Value> {
    report["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f["kind"] == kind)
        .collect()
}

fn evidence(f: &serde_json::Value) -> Vec<String> {
    f["evidence"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e.as_str().map(str::to_owned))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_backend_proven_gone_is_called_dead() {
    let mut opts = UpOptions::new(common::cluster_name("it-backends"));
    opts.reaper = Some(env!("CARGO_BIN_EXE_unstuck").into());
    let cluster = LocalCluster::up(opts).await.expect("cluster up");
    let result = tokio::spawn(exercise(
        cluster.client(),
        cluster.kubeconfig(),
        cluster.layout().node_ip(),
    ))
    .await;
    let down = cluster.down().await;
    eprintln!("cluster down: {down}");
    if let Err(e) = result {
        std::panic::resume_unwind(e.into_panic());
    }
}

async fn exercise(client: Client, kubeconfig: std::path::PathBuf, node_ip: std::net::Ipv4Addr) {
    let kc = kubeconfig.to_str().unwrap().to_string();
    services(&client, node_ip).await;
    let cases = [&EXTERNAL, &MANUAL, &BARE, &GONE];
    for c in cases {
        guard(&client, c).await;
    }
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for c in cases {
        namespaces
            .delete(c.namespace, &DeleteParams::default())
            .await
            .expect("deleting the guarded namespace");
    }
    // Each namespace's deletes are rejected by its own webhook.
    for c in cases {
        let quoted = format!("failed calling webhook \"{}\"", webhook_name(c));
        wait::until(
            format!("{} blocked by {}", c.namespace, webhook_name(c)),
            Duration::from_secs(180),
            Duration::from_secs(1),
            || async {
                let ns = match namespaces.get(c.namespace).await {
                    Ok(ns) => ns,
                    Err(e) => return Poll::Pending(e.to_string()),
                };
                let cond = ns
                    .status
                    .and_then(|s| s.conditions)
                    .unwrap_or_default()
                    .into_iter()
                    .find(|c| c.type_ == "NamespaceDeletionContentFailure" && c.status == "True");
                match cond.and_then(|c| c.message) {
                    Some(m) if m.contains(&quoted) => Poll::Ready(()),
                    other => Poll::Pending(format!("condition message {other:?}")),
                }
            },
        )
        .await
        .expect("the webhook blocks its namespace");
    }

    let dry = common::doctor(&["--kubeconfig", &kc, "--stuck-after", "1s", "-o", "json"]);
    let report: serde_json::Value = serde_json::from_slice(&dry.stdout)
        .unwrap_or_else(|e| panic!("JSON report: {e}\n{}", common::output_text(&dry)));

    // Dead: only the webhook whose Service selects nothing, sustained.
    let dead = findings(&report, "DeadWebhook");
    let dead_subjects: Vec<&str> = dead.iter().filter_map(|f| f["subject"].as_str()).collect();
    assert_eq!(
        dead.len(),
        1,
        "{dead_subjects:?}\n{}",
        common::output_text(&dry)
    );
    assert!(dead_subjects[0].contains(GONE.config), "{dead_subjects:?}");
    let ev = evidence(dead[0]);
    eprintln!("DeadWebhook {}:\n  {}", dead_subjects[0], ev.join("\n  "));
    let svc = format!("Service {SVC_NS}/{}", GONE.service);
    assert!(
        ev.iter()
            .any(|e| e.starts_with(&format!("read 1 of {svc}'s endpoints: 0 ready")))
            && ev
                .iter()
                .any(|e| e.starts_with(&format!("read 2 of {svc}'s endpoints: 0 ready")))
            && ev.iter().any(|e| e == "no pod matches its selector")
            && ev
                .iter()
                .any(|e| e.contains("its selector: app=gone-webhook")),
        "both reads, the selector and the missing pods are quoted: {ev:#?}"
    );
    let sustained = ev
        .iter()
        .find_map(|e| {
            e.strip_prefix("no ready endpoint for ")?
                .split(' ')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .expect("how long it was seen");
    assert!(sustained >= backend::SUSTAINED.as_secs(), "{ev:#?}");

    // Not proven: the blocked namespace says why, quoting the lookup.
    let blocked = findings(&report, "NamespaceContentDeletionFailed");
    for (c, why) in [
        (&EXTERNAL, "is of type ExternalName (-> localhost)"),
        (
            &MANUAL,
            "has ready endpoints in its EndpointSlices (no selector",
        ),
        (&BARE, "has no selector"),
    ] {
        let f = blocked
            .iter()
            .find(|f| {
                f["subject"]
                    .as_str()
                    .is_some_and(|s| s.contains(c.namespace))
            })
            .unwrap_or_else(|| {
                panic!(
                    "no finding for {}:\n{}",
                    c.namespace,
                    common::output_text(&dry)
                )
            });
        let ev = evidence(f);
        assert!(
            ev.iter()
                .any(|e| e.contains("its backend was not proven gone"))
                && ev
                    .iter()
                    .any(|e| e.contains(&format!("Service {SVC_NS}/{}", c.service))
                        && e.contains(why)),
            "{}: {ev:#?}",
            c.namespace
        );
    }
    // The plan makes only the proven-dead webhook fail open.
    let plan: Vec<&str> = report["plan"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|l| l.as_str())
        .collect();
    let patches = |c: &Case| {
        plan.iter().any(|l| {
            l.contains(&format!("validatingwebhookconfigurations/{}", c.config))
                && l.contains("PATCH")
        })
    };
    assert!(patches(&GONE), "{plan:#?}");
    for c in [&EXTERNAL, &MANUAL, &BARE] {
        assert!(!patches(c), "{}: {plan:#?}", c.config);
    }

    // Applying, with webhook changes allowed, on the three namespaces
    // changes none of their webhooks.
    let configs: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let mut before = Vec::new();
    for c in [&EXTERNAL, &MANUAL, &BARE] {
        before.push(serde_json::to_string(&configs.get(c.config).await.unwrap()).unwrap());
    }
    let applied = common::doctor(&[
        "--kubeconfig",
        &kc,
        "--stuck-after",
        "1s",
        "--apply",
        "--yes",
        "--allow-webhook-changes",
        "-n",
        EXTERNAL.namespace,
        "-n",
        MANUAL.namespace,
        "-n",
        BARE.namespace,
    ]);
    eprintln!("{}", common::output_text(&applied));
    for (c, was) in [&EXTERNAL, &MANUAL, &BARE].into_iter().zip(before) {
        let now = serde_json::to_string(&configs.get(c.config).await.unwrap()).unwrap();
        assert_eq!(
            now,
            was,
            "{} changed:\n{}",
            c.config,
            common::output_text(&applied)
        );
    }
}
