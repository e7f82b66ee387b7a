//! What production looks like on the "existing" cluster, its live Kiali
//! controller, and reading it back.

use std::{
    collections::BTreeMap,
    net::Ipv4Addr,
    time::{Duration, Instant},
};

use k8s_openapi::{
    api::coordination::v1::Lease, kube_aggregator::pkg::apis::apiregistration::v1::APIService,
};
use kube::{
    Api, Client,
    api::{
        ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams,
    },
    discovery,
};

/// Setting production up on a loaded machine: generous.
const SETUP_TIMEOUT: Duration = Duration::from_secs(5 * 60);

/// A live Kiali controller: renews its Lease and finishes
/// `kiali.io/finalizer` on any Kiali being deleted. Nothing of the
/// suite should give it work; it is there so the finalizer has a live
/// owner, as in production.
pub fn start_kiali_controller(client: Client) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let leases: Api<Lease> = Api::namespaced(client.clone(), "kiali-operator");
        let kialis: Api<DynamicObject> = Api::all_with(client.clone(), &kiali_resource());
        loop {
            let now = k8s_openapi::jiff::Timestamp::now();
            let lease = serde_json::json!({
                "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": "kiali.io", "namespace": "kiali-operator"},
                "spec": {"holderIdentity": "kiali-operator-0", "leaseDurationSeconds": 30,
                         "renewTime": now.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()}
            });
            let _ = leases
                .patch(
                    "kiali.io",
                    &PatchParams::apply("kiali-operator").force(),
                    &Patch::Apply(&lease),
                )
                .await;
            if let Ok(list) = kialis.list(&ListParams::default()).await {
                for k in list.items {
                    let fins = k.metadata.finalizers.clone().unwrap_or_default();
                    if k.metadata.deletion_timestamp.is_some()
                        && fins.iter().any(|f| f == "kiali.io/finalizer")
                    {
                        let kept: Vec<&String> =
                            fins.iter().filter(|f| *f != "kiali.io/finalizer").collect();
                        let ns = k.metadata.namespace.clone().unwrap_or_default();
                        let api: Api<DynamicObject> =
                            Api::namespaced_with(client.clone(), &ns, &kiali_resource());
                        let _ = api
                            .patch(
                                &k.metadata.name.clone().unwrap_or_default(),
                                &PatchParams::default(),
                                &Patch::Merge(
                                    serde_json::json!({"metadata": {"finalizers": kept}}),
                                ),
                            )
                            .await;
                    }
                }
            }
            tokio::time::sleep(Duration::from_secs(5)).await;
        }
    })
}

fn kiali_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("kiali.io", "v1alpha1", "Kiali"),
        "kialis",
    )
}

/// What production looks like, in apply order; `{ip}`/`{port}` are the
/// backend's address.
pub fn production(ip: Ipv4Addr, port: u16) -> Vec<serde_json::Value> {
    use serde_json::json;
    let ns = |n: &str| json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}});
    vec![
        ns("prod-metrics"),
        ns("kiali-operator"),
        ns("istio"),
        ns("app"),
        ns("shop"),
        json!({"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": "metrics-server", "namespace": "prod-metrics"},
               "spec": {"ports": [{"port": 443, "targetPort": port, "protocol": "TCP"}]}}),
        json!({"apiVersion": "v1", "kind": "Endpoints",
               "metadata": {"name": "metrics-server", "namespace": "prod-metrics"},
               "subsets": [{"addresses": [{"ip": ip.to_string()}],
                            "ports": [{"port": port, "protocol": "TCP"}]}]}),
        json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
               "metadata": {"name": "v1beta1.metrics.k8s.io"},
               "spec": {"group": "metrics.k8s.io", "version": "v1beta1",
                        "groupPriorityMinimum": 100, "versionPriority": 100,
                        "insecureSkipTLSVerify": true,
                        "service": {"name": "metrics-server", "namespace": "prod-metrics", "port": 443}}}),
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
               "metadata": {"name": "kialis.kiali.io"},
               "spec": {"group": "kiali.io",
                        "names": {"kind": "Kiali", "listKind": "KialiList", "plural": "kialis", "singular": "kiali"},
                        "scope": "Namespaced",
                        "versions": [{"name": "v1alpha1", "served": true, "storage": true,
                                      "schema": {"openAPIV3Schema": {"type": "object",
                                                 "x-kubernetes-preserve-unknown-fields": true}}}]}}),
        json!({"apiVersion": "kiali.io/v1alpha1", "kind": "Kiali",
               "metadata": {"name": "kiali", "namespace": "istio", "finalizers": ["kiali.io/finalizer"]},
               "spec": {"deployment": {"namespace": "istio-system"}}}),
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "mymap", "namespace": "app"}, "data": {"owner": "production"}}),
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "slow-cleanup", "namespace": "app"}, "data": {"owner": "production"}}),
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "guarded-settings", "namespace": "shop"}, "data": {"owner": "production"}}),
        // Not bindable by the scenario's claim: another storage class.
        json!({"apiVersion": "v1", "kind": "PersistentVolume",
               "metadata": {"name": "unstuck-pvc-protection"},
               "spec": {"capacity": {"storage": "1Mi"}, "accessModes": ["ReadWriteOnce"],
                        "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "production",
                        "hostPath": {"path": "/tmp", "type": "Directory"}}}),
        // Stuck in production (deleted below): its finalizer has no live
        // owner, so a doctor on the whole cluster would strip it. The
        // runner's doctor must not: the run did not create it.
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": "prod-audit-reader", "finalizers": ["audit.example.com/retain"]},
               "rules": []}),
        // Matches nothing the suite does, and fails open.
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
               "metadata": {"name": "policy-guard"},
               "webhooks": [{"name": "validate.prod.example.com", "admissionReviewVersions": ["v1"],
                             "sideEffects": "None", "failurePolicy": "Ignore", "timeoutSeconds": 5,
                             "clientConfig": {"service": {"namespace": "prod-metrics", "name": "metrics-server",
                                                          "path": "/validate"}},
                             "objectSelector": {"matchLabels": {"prod.example.com/never": "true"}},
                             "rules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                        "operations": ["DELETE"], "resources": ["configmaps"]}]}]}),
    ]
}

/// `Kind namespace/name` of a manifest.
fn label(doc: &serde_json::Value) -> String {
    let m = &doc["metadata"];
    match m["namespace"].as_str() {
        Some(ns) => format!(
            "{} {ns}/{}",
            doc["kind"].as_str().unwrap(),
            m["name"].as_str().unwrap()
        ),
        None => format!(
            "{} {}",
            doc["kind"].as_str().unwrap(),
            m["name"].as_str().unwrap()
        ),
    }
}

async fn api_of(client: &Client, doc: &serde_json::Value) -> Api<DynamicObject> {
    let av = doc["apiVersion"].as_str().unwrap();
    let (g, v) = av.split_once('/').unwrap_or(("", av));
    let gvk = GroupVersionKind::gvk(g, v, doc["kind"].as_str().unwrap());
    let deadline = Instant::now() + SETUP_TIMEOUT;
    let (ar, caps) = loop {
        match discovery::pinned_kind(client, &gvk).await {
            Ok(found) => break found,
            Err(e) if Instant::now() < deadline => {
                eprintln!("waiting for {av} {}: {e}", gvk.kind);
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            Err(e) => panic!("{av} {} never served: {e}", gvk.kind),
        }
    };
    match (caps.scope, doc["metadata"]["namespace"].as_str()) {
        (discovery::Scope::Namespaced, Some(ns)) => Api::namespaced_with(client.clone(), ns, &ar),
        _ => Api::all_with(client.clone(), &ar),
    }
}

pub async fn create_all(client: &Client, docs: &[serde_json::Value]) {
    for doc in docs {
        let obj: DynamicObject = serde_json::from_value(doc.clone()).unwrap();
        let api = api_of(client, doc).await;
        let deadline = Instant::now() + SETUP_TIMEOUT;
        loop {
            match api.create(&PostParams::default(), &obj).await {
                Ok(_) => break,
                Err(e) if Instant::now() < deadline => {
                    eprintln!("creating {}: {e}; again", label(doc));
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                Err(e) => panic!("creating {}: {e}", label(doc)),
            }
        }
    }
}

/// Every production object's full JSON, by label.
pub async fn snapshot(client: &Client, docs: &[serde_json::Value]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for doc in docs {
        let api = api_of(client, doc).await;
        let name = doc["metadata"]["name"].as_str().unwrap();
        let now = api
            .get_opt(name)
            .await
            .unwrap_or_else(|e| panic!("reading {}: {e}", label(doc)));
        let text = match now {
            Some(o) => serde_json::to_string_pretty(&o).unwrap(),
            None => "(gone)".into(),
        };
        out.insert(label(doc), text);
    }
    out
}

pub async fn wait_until<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), String>>,
{
    let deadline = Instant::now() + SETUP_TIMEOUT;
    loop {
        match check().await {
            Ok(()) => return,
            Err(seen) if Instant::now() < deadline => {
                eprintln!("waiting for {what}: {seen}");
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
            Err(seen) => panic!("{what} never happened: {seen}"),
        }
    }
}

pub async fn apiservice_available(client: &Client) -> Result<(), String> {
    let api: Api<APIService> = Api::all(client.clone());
    let a = api
        .get("v1beta1.metrics.k8s.io")
        .await
        .map_err(|e| e.to_string())?;
    let c = a
        .status
        .and_then(|s| s.conditions)
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.type_ == "Available")
        .ok_or("no Available condition yet")?;
    if c.status == "True" {
        Ok(())
    } else {
        Err(format!(
            "Available={} ({:?}): {:?}",
            c.status, c.reason, c.message
        ))
    }
}
