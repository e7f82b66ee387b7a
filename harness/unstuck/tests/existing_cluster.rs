//! `unstuck run` on a cluster it did not create leaves that cluster's own
//! objects alone. A local cluster (its unstuck marker given another
//! cluster's kube-system UID, so it counts as someone else's) gets "production" objects that share names
//! with what the scenarios create:
//! - the APIService `v1beta1.metrics.k8s.io`, Available=True, served by a
//!   live HTTPS backend in this test process (Service + Endpoints on the
//!   node address; the local provider routes aggregated APIs to endpoint
//!   addresses);
//! - the CRD `kialis.kiali.io` and a Kiali `istio/kiali` carrying
//!   `kiali.io/finalizer`, with a live controller (in this process) that
//!   holds a Lease and would finish that finalizer;
//! - namespaces and objects named as the scenarios name theirs: the
//!   PersistentVolume `unstuck-pvc-protection`, the webhook configuration
//!   `policy-guard`, ConfigMaps `app/mymap` and `app/slow-cleanup`;
//! - a ClusterRole stuck Terminating on a finalizer with no live owner,
//!   which the scenarios' doctor steps must leave alone (cluster-scoped
//!   and not the run's).
//!
//! The guard must refuse the cluster without the opt-in and with a wrong
//! context; with `--allow-existing-cluster=<context>` the whole API-level
//! suite must pass, and every production object must come out
//! byte-identical (its full JSON, resourceVersion included).
//! Real local cluster; needs root and ci/setup.sh's components.

use std::{
    collections::BTreeMap,
    net::Ipv4Addr,
    path::{Path, PathBuf},
    sync::Arc,
    time::{Duration, Instant},
};

use k8s_openapi::{
    api::coordination::v1::Lease,
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    kube_aggregator::pkg::apis::apiregistration::v1::APIService,
};
use kube::{
    Api, Client,
    api::{
        ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams,
    },
    discovery,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::rustls;
use unstuck::cluster::{
    identity,
    local::{LocalCluster, UpOptions},
};

mod common;

/// The whole suite on a loaded 2-core machine: generous.
const SUITE_TIMEOUT: Duration = Duration::from_secs(45 * 60);
const SETUP_TIMEOUT: Duration = Duration::from_secs(5 * 60);

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

// ---------------------------------------------------------------- backend

/// A minimal metrics.k8s.io: discovery documents, and 404 for the rest.
/// Enough for the aggregator to call the APIService Available and for
/// discovery (the namespace controller's) to succeed.
fn reply(path: &str) -> (u16, String) {
    let gv = serde_json::json!({"groupVersion": "metrics.k8s.io/v1beta1", "version": "v1beta1"});
    let group = serde_json::json!({
        "name": "metrics.k8s.io", "versions": [gv], "preferredVersion": gv
    });
    let body = match path.split('?').next().unwrap_or_default() {
        "/apis" => {
            serde_json::json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [group]})
        }
        "/apis/metrics.k8s.io" => {
            let mut g = group.clone();
            g["kind"] = "APIGroup".into();
            g["apiVersion"] = "v1".into();
            g
        }
        "/apis/metrics.k8s.io/v1beta1" => serde_json::json!({
            "kind": "APIResourceList", "apiVersion": "v1",
            "groupVersion": "metrics.k8s.io/v1beta1", "resources": []
        }),
        _ => {
            return (
                404,
                serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                   "reason": "NotFound", "code": 404})
                .to_string(),
            );
        }
    };
    (200, body.to_string())
}

async fn serve_one(
    acceptor: tokio_rustls::TlsAcceptor,
    tcp: tokio::net::TcpStream,
) -> std::io::Result<()> {
    let mut tls = acceptor.accept(tcp).await?;
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = tls.read(&mut buf).await?;
        if n == 0 || head.len() > 64 * 1024 {
            return Ok(());
        }
        head.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&head);
    let path = text.split_whitespace().nth(1).unwrap_or("/").to_string();
    let (code, body) = reply(&path);
    let status = if code == 200 { "OK" } else { "Not Found" };
    let resp = format!(
        "HTTP/1.1 {code} {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    tls.write_all(resp.as_bytes()).await?;
    tls.shutdown().await
}

/// Serves HTTPS on `ip` (a self-signed certificate; the APIService skips
/// verification, as many real ones do). Returns the port.
async fn start_backend(ip: Ipv4Addr) -> u16 {
    let ck = rcgen::generate_simple_self_signed(vec!["metrics-server.prod-metrics.svc".into()])
        .expect("certificate");
    let cert = rustls::pki_types::CertificateDer::from(ck.cert.der().to_vec());
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(rustls::pki_types::PrivatePkcs8KeyDer::from(
        ck.signing_key.serialize_der(),
    ));
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("protocol versions")
    .with_no_client_auth()
    .with_single_cert(vec![cert], key)
    .expect("server config");
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind((ip, 0))
        .await
        .expect("backend listens on the node address");
    let port = listener.local_addr().expect("bound").port();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                continue;
            };
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let _ = serve_one(acceptor, tcp).await;
            });
        }
    });
    port
}

// ------------------------------------------------------------- controller

/// A live Kiali controller: renews its Lease and finishes
/// `kiali.io/finalizer` on any Kiali being deleted. Nothing of the
/// suite should give it work; it is there so the finalizer has a live
/// owner, as in production.
fn start_kiali_controller(client: Client) -> tokio::task::JoinHandle<()> {
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

// ------------------------------------------------------------- production

/// What production looks like, in apply order; `{ip}`/`{port}` are the
/// backend's address.
fn production(ip: Ipv4Addr, port: u16) -> Vec<serde_json::Value> {
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

async fn create_all(client: &Client, docs: &[serde_json::Value]) {
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
async fn snapshot(client: &Client, docs: &[serde_json::Value]) -> BTreeMap<String, String> {
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

async fn wait_until<F, Fut>(what: &str, mut check: F)
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

async fn apiservice_available(client: &Client) -> Result<(), String> {
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

// ------------------------------------------------------------------- test

fn unstuck_run(kubeconfig: &Path, out: &Path, extra: &[&str]) -> tokio::process::Command {
    let r = repo();
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_unstuck"));
    cmd.arg("run")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--scenarios")
        .arg(r.join("scenarios"))
        .arg("--fixtures")
        .arg(r.join("fixtures"))
        .arg("--out")
        .arg(out)
        .args(extra)
        .kill_on_drop(true);
    cmd
}

async fn refused(cmd: &mut tokio::process::Command) -> String {
    let o = tokio::time::timeout(Duration::from_secs(300), cmd.output())
        .await
        .expect("the guard answers")
        .expect("unstuck runs");
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(!o.status.success(), "the guard let it run:\n{err}");
    err
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_suite_leaves_an_existing_clusters_objects_byte_identical() {
    let mut opts = UpOptions::new(common::cluster_name("it-existing"));
    opts.reaper = Some(env!("CARGO_BIN_EXE_unstuck").into());
    let cluster = LocalCluster::up(opts).await.expect("cluster up");
    let started = Instant::now();
    let out = std::env::temp_dir().join(format!("unstuck-existing-{}", std::process::id()));
    let result = tokio::spawn(exercise(
        cluster.client(),
        cluster.kubeconfig(),
        cluster.layout().node_ip(),
        out.clone(),
    ))
    .await;
    let down = cluster.down().await;
    eprintln!(
        "cluster down: {down}; test body took {:.0} s",
        started.elapsed().as_secs_f64()
    );
    let _ = std::fs::remove_dir_all(&out);
    if let Err(e) = result {
        std::panic::resume_unwind(e.into_panic());
    }
}

async fn exercise(client: Client, kubeconfig: PathBuf, node_ip: Ipv4Addr, out: PathBuf) {
    // `cluster up` marked the cluster as unstuck's own.
    let (context, server) = identity::kubeconfig_context(&kubeconfig).expect("kubeconfig");
    let (target, marked) = identity::identify(&client, context.clone(), server.clone())
        .await
        .expect("identify");
    assert!(
        marked,
        "no valid marker on a cluster unstuck brought up: {target}"
    );
    // Someone else's cluster: its marker, copied from another cluster,
    // names a kube-system UID this one does not have.
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(client.clone(), identity::MARKER_NAMESPACE);
    cms.patch(
        identity::MARKER_NAME,
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"data": {identity::UID_KEY: "6f0c1a52-0000-4000-8000-000000000000"}})),
    )
    .await
    .expect("giving the marker another cluster's UID");
    let (_, marked) = identity::identify(&client, context.clone(), server)
        .await
        .expect("identify");
    assert!(!marked, "a marker with another cluster's UID counted");

    let port = start_backend(node_ip).await;
    let docs = production(node_ip, port);
    create_all(&client, &docs).await;
    let _controller = AbortOnDrop(start_kiali_controller(client.clone()));
    wait_until("v1beta1.metrics.k8s.io Available=True", || {
        apiservice_available(&client)
    })
    .await;
    let pvs: Api<k8s_openapi::api::core::v1::PersistentVolume> = Api::all(client.clone());
    wait_until("the production PV Available", || async {
        let pv = pvs
            .get("unstuck-pvc-protection")
            .await
            .map_err(|e| e.to_string())?;
        match pv.status.and_then(|s| s.phase).as_deref() {
            Some("Available") => Ok(()),
            other => Err(format!("phase {other:?}")),
        }
    })
    .await;
    let roles: Api<k8s_openapi::api::rbac::v1::ClusterRole> = Api::all(client.clone());
    roles
        .delete("prod-audit-reader", &Default::default())
        .await
        .expect("deleting the stuck production ClusterRole");
    wait_until("the production ClusterRole Terminating", || async {
        let r = roles
            .get("prod-audit-reader")
            .await
            .map_err(|e| e.to_string())?;
        r.metadata
            .deletion_timestamp
            .map(|_| ())
            .ok_or_else(|| "no deletionTimestamp yet".to_string())
    })
    .await;
    let before = snapshot(&client, &docs).await;

    // The control: a doctor on the whole cluster does call the production
    // ClusterRole's finalizer orphaned (dry run: it changes nothing).
    wait_until(
        "a whole-cluster doctor to see the stuck ClusterRole",
        || async {
            let o = tokio::process::Command::new(env!("CARGO_BIN_EXE_unstuck"))
                .arg("doctor")
                .arg("--kubeconfig")
                .arg(&kubeconfig)
                .args(["--stuck-after", "1s"])
                .output()
                .await
                .map_err(|e| e.to_string())?;
            let stdout = String::from_utf8_lossy(&o.stdout);
            if stdout.contains("prod-audit-reader") && stdout.contains("OrphanFinalizer") {
                Ok(())
            } else {
                Err(format!("doctor said:\n{stdout}"))
            }
        },
    )
    .await;

    // The guard: no opt-in, a wrong context, the flag without a context.
    let err = refused(&mut unstuck_run(
        &kubeconfig,
        &out,
        &["--without-node-scenarios"],
    ))
    .await;
    assert!(
        err.contains(&format!("--allow-existing-cluster={context}"))
            && err.contains("kube-system UID"),
        "{err}"
    );
    let wrong = format!("--allow-existing-cluster=not-{context}");
    let err = refused(&mut unstuck_run(
        &kubeconfig,
        &out,
        &[&wrong, "--without-node-scenarios"],
    ))
    .await;
    assert!(err.contains("does not name the current context"), "{err}");
    let err = refused(&mut unstuck_run(
        &kubeconfig,
        &out,
        &["--without-node-scenarios", "--allow-existing-cluster"],
    ))
    .await;
    assert!(
        err.contains(&format!("current context is '{context}'")),
        "{err}"
    );
    // Node scenarios are refused by name on a --kubeconfig cluster.
    let allow = format!("--allow-existing-cluster={context}");
    let err = refused(&mut unstuck_run(&kubeconfig, &out, &[&allow])).await;
    assert!(
        err.contains("busy-volume-mount") && err.contains("--without-node-scenarios"),
        "{err}"
    );

    // The whole API-level suite.
    let t = Instant::now();
    let mut run = unstuck_run(&kubeconfig, &out, &[&allow, "--without-node-scenarios"]);
    let o = tokio::time::timeout(SUITE_TIMEOUT, run.output())
        .await
        .expect("the suite finishes in time")
        .expect("unstuck runs");
    let suite_time = t.elapsed();
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    eprintln!(
        "suite took {:.0} s\n{stdout}\n{stderr}",
        suite_time.as_secs_f64()
    );
    assert!(
        stderr.contains(&format!("context '{context}'")) && stderr.contains("kube-system UID"),
        "the target was printed first:\n{stderr}"
    );
    assert!(
        o.status.success(),
        "the suite failed on the existing cluster"
    );

    create_never_overwrites(&client, &out).await;

    // Production is untouched, byte for byte.
    wait_until("v1beta1.metrics.k8s.io still Available", || {
        apiservice_available(&client)
    })
    .await;
    let after = snapshot(&client, &docs).await;
    let changed: Vec<String> = before
        .iter()
        .filter(|(k, v)| after.get(*k) != Some(v))
        .map(|(k, v)| {
            format!(
                "{k}\n--- before\n{v}\n--- after\n{}",
                after.get(k).map(String::as_str).unwrap_or("(missing)")
            )
        })
        .collect();
    assert!(
        changed.is_empty(),
        "production objects changed:\n{}",
        changed.join("\n")
    );
    assert_eq!(before.len(), docs.len());

    // And nothing of the run is left beside them.
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd_names: Vec<String> = crds
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect();
    assert_eq!(crd_names, vec!["kialis.kiali.io".to_string()], "CRDs left");
    let apis: Api<APIService> = Api::all(client.clone());
    let left: Vec<String> = apis
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|a| a.metadata.name)
        // The run's marked groups; `v1alpha1.kiali.io` is production's.
        .filter(|n| n.contains(".metrics-") || n.contains(".kiali-"))
        .collect();
    assert!(left.is_empty(), "APIServices of the run left: {left:?}");
    let pv_names: Vec<String> = pvs
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    assert_eq!(
        pv_names,
        vec!["unstuck-pvc-protection".to_string()],
        "PVs left"
    );
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The apply step's rules, against production's own `app/mymap`: a taken
/// name is an error naming the object, a "replace" of an object whose UID
/// is not the run's is refused; and a scenario may apply its own object
/// again (releasing a finalizer that way).
async fn create_never_overwrites(client: &Client, out: &Path) {
    use unstuck::runner::{Outcome, RunContext, create::create_or_replace_ours, run_scenario};
    let cms: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "app",
        &ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&()),
    );
    let doc = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "mymap", "namespace": "app"}, "data": {"owner": "a scenario"}});
    let err = create_or_replace_ours(&cms, &doc, "mymap", "ConfigMap app/mymap", None)
        .await
        .err()
        .expect("a taken name is refused");
    assert!(err.contains("ConfigMap app/mymap already exists"), "{err}");
    let err = create_or_replace_ours(
        &cms,
        &doc,
        "mymap",
        "ConfigMap app/mymap",
        Some("not-its-uid"),
    )
    .await
    .err()
    .expect("another object's UID is refused");
    assert!(
        err.contains("is no longer the object this run created"),
        "{err}"
    );

    let fixtures = out.join("fixtures");
    std::fs::create_dir_all(&fixtures).unwrap();
    std::fs::write(
        fixtures.join("held.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: mymap\n  finalizers: [example.com/hold]\ndata: {k: v}\n",
    )
    .unwrap();
    std::fs::write(
        fixtures.join("released.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: mymap\ndata: {k: v}\n",
    )
    .unwrap();
    let scenario = unstuck_core::scenario::load_str(
        "name: reapply-own
description: a scenario releases its own object's finalizer by applying it again
namespaces: [app]
timeout: 3m
steps:
  - apply: {file: held.yaml, namespace: app}
  - delete: {kind: ConfigMap, name: mymap, namespace: app}
  - expect: {phase: symptom, timeout: 60s, that: [{terminating: {kind: ConfigMap, name: mymap, namespace: app}}]}
  - apply: {file: released.yaml, namespace: app}
  - expect: {phase: symptom, timeout: 60s, that: [{gone: {kind: ConfigMap, name: mymap, namespace: app}}]}
",
        Path::new("reapply-own.yaml"),
    )
    .expect("scenario loads");
    let ctx = RunContext {
        client: client.clone(),
        fixtures_dir: fixtures,
        out_dir: out.join("reapply-own"),
        kubelet_log: None,
        node: None,
    };
    let report = run_scenario(&ctx, &scenario).await;
    assert_eq!(report.outcome, Outcome::Passed, "{:#?}", report.steps);
    assert!(
        report.steps[3]
            .evidence
            .iter()
            .any(|e| e.contains("replaced this run's ConfigMap")),
        "{:?}",
        report.steps[3].evidence
    );
    assert!(report.cleanup.is_clean(), "{:?}", report.cleanup);
}
