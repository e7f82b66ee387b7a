//! The `container:` step: a backend container beside the cluster, reached
//! the way a real one is. A Service without a selector and an
//! EndpointSlice name the container's address; the registration (a
//! webhook configuration or an APIService fixture) is pointed at that
//! Service with the caBundle of the CA the backend's certificate is, or
//! for a TLS fault is not, signed by. Everything goes through the apply
//! step, so cleanup knows each object by UID; the container (and its
//! network) go when the scenario run is dropped, after cleanup.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use unstuck_core::scenario::{BackendFault, ContainerRole, ContainerSpec};

use unstuck_core::scenario::{ApplySpec, Located};

use super::{Evidence, ScenarioRun, StepError};
use crate::{
    containers::{self, BackendRole, BackendSpec, backend::PORT},
    runner::objects::read_manifests,
};

/// The Service's port; the EndpointSlice maps it, by name, to [`PORT`].
const SERVICE_PORT: u16 = 443;
const PORT_NAME: &str = "https";

/// A base64 string as the API writes `[]byte` fields.
fn base64(text: &str) -> Value {
    serde_json::to_value(k8s_openapi::ByteString(text.as_bytes().to_vec()))
        .expect("bytes serialise")
}

pub(super) async fn run(
    run: &mut ScenarioRun<'_>,
    c: &ContainerSpec,
) -> Result<Evidence, StepError> {
    let namespace = run.names.namespace(&c.service.namespace);
    let service = c.service.name.to_string();
    let register = run.ctx.fixtures_dir.join(&*c.register);
    let mut docs = read_manifests(&register)?;
    let role = backend_role(run, c.role, &register, &docs)?;
    let backend = containers::start_backend(&BackendSpec {
        run: run.names.run().to_string(),
        name: c.name.to_string(),
        role,
        fault: c.fault,
        dns_names: vec![
            format!("{service}.{namespace}.svc"),
            format!("{service}.{namespace}.svc.cluster.local"),
        ],
        network: cluster_network(run).await?,
    })
    .await
    .map_err(|source| StepError::Container {
        name: c.name.to_string(),
        source,
    })?;
    let mut evidence = vec![format!(
        "container {} ({}, fault {}) listening on {}:{PORT} in Docker network {}",
        backend.managed.container,
        containers::backend::IMAGE,
        c.fault.name(),
        backend.ip,
        backend.managed.network
    )];
    tracing::debug!(target: crate::STEP_LOG, "backend container started: {}", backend.managed.container);
    let ip = backend.ip;
    let ca_bundle = backend.tls.ca_bundle.clone();
    // Held before anything points at it: cleanup removes it on every
    // way out.
    run.backends.push(backend);

    // Absolute: the apply step reads files relative to the fixtures
    // directory, and `--out` may be relative (ci/main.sh's is).
    let dir = std::path::absolute(run.ctx.out_dir.join("containers")).map_err(|source| {
        StepError::Write {
            path: run.ctx.out_dir.join("containers"),
            source,
        }
    })?;
    std::fs::create_dir_all(&dir).map_err(|source| StepError::Write {
        path: dir.clone(),
        source,
    })?;
    let svc_file = write(
        &dir,
        &format!("{}-service.yaml", *c.name),
        &service_documents(&service, ip),
    )?;
    evidence.extend(apply(run, svc_file, Some(c.service.namespace.as_str())).await?);

    let svc_ref = json!({"namespace": namespace, "name": service, "port": SERVICE_PORT});
    point_at_backend(
        &mut docs,
        &svc_ref,
        &base64(&ca_bundle),
        &run.names.namespaces().real_names(),
    );
    let reg_file = write(&dir, &format!("{}-register.yaml", *c.name), &docs)?;
    evidence.extend(apply(run, reg_file, None).await?);
    evidence.push(ca_evidence(c.fault).to_string());
    run.last_injection = Some(std::time::Instant::now());
    Ok(evidence)
}

/// What the backend serves: any request for a webhook; for an APIService,
/// its group/version under this run's name, which the registration
/// (`docs`, read from `register`) is renamed to as well.
fn backend_role(
    run: &ScenarioRun<'_>,
    role: ContainerRole,
    register: &Path,
    docs: &[Value],
) -> Result<BackendRole, StepError> {
    Ok(match role {
        ContainerRole::Webhook => BackendRole::Webhook,
        ContainerRole::ApiService => {
            let api = docs
                .iter()
                .find(|d| d["kind"] == "APIService")
                .ok_or_else(|| StepError::NoField {
                    path: register.to_path_buf(),
                    field: "APIService document",
                })?;
            let gv = run.names.api_version(&format!(
                "{}/{}",
                api["spec"]["group"].as_str().unwrap_or_default(),
                api["spec"]["version"].as_str().unwrap_or_default()
            ));
            let (group, version) = gv.split_once('/').unwrap_or_default();
            BackendRole::ApiService {
                group: group.into(),
                version: version.into(),
            }
        }
    })
}

/// A Service without a selector and the EndpointSlice that gives it the
/// container's address: how a real backend outside the cluster is reached,
/// and what the doctor reads to judge whether a backend is there.
fn service_documents(service: &str, ip: IpAddr) -> [Value; 2] {
    [
        json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": service},
            "spec": {"ports": [{"name": PORT_NAME, "port": SERVICE_PORT, "targetPort": PORT, "protocol": "TCP"}]}
        }),
        json!({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {
                "name": service,
                "labels": {
                    "kubernetes.io/service-name": service,
                    "endpointslice.kubernetes.io/managed-by": "unstuck.dev"
                }
            },
            "addressType": if ip.is_ipv4() { "IPv4" } else { "IPv6" },
            "endpoints": [{"addresses": [ip.to_string()], "conditions": {"ready": true}}],
            "ports": [{"name": PORT_NAME, "port": PORT, "protocol": "TCP"}]
        }),
    ]
}

/// Rewrites the registration so the apiserver calls the backend through
/// `svc_ref` and verifies it with `ca`, whatever the fixture pointed at.
/// Webhooks keep their path; one without a namespaceSelector is limited to
/// `run_namespaces`.
fn point_at_backend(docs: &mut [Value], svc_ref: &Value, ca: &Value, run_namespaces: &[String]) {
    for doc in docs {
        match doc["kind"].as_str() {
            Some("APIService") => {
                let spec = &mut doc["spec"];
                spec["service"] = svc_ref.clone();
                spec["caBundle"] = ca.clone();
                if let Some(m) = spec.as_object_mut() {
                    m.remove("insecureSkipTLSVerify");
                }
            }
            Some("ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration") => {
                for w in doc["webhooks"].as_array_mut().into_iter().flatten() {
                    let path = w["clientConfig"]["service"]["path"].clone();
                    let mut to = svc_ref.clone();
                    if !path.is_null() {
                        to["path"] = path;
                    }
                    w["clientConfig"] = json!({"service": to, "caBundle": ca.clone()});
                    // Scenarios run side by side: a webhook that took
                    // another run's objects would fail its deletes too.
                    if w.get("namespaceSelector").is_none() {
                        w["namespaceSelector"] = json!({"matchExpressions": [{
                            "key": "kubernetes.io/metadata.name",
                            "operator": "In",
                            "values": run_namespaces,
                        }]});
                    }
                }
            }
            _ => {}
        }
    }
}

/// The report's line on the caBundle, which for a TLS fault is the fault.
fn ca_evidence(fault: BackendFault) -> &'static str {
    match fault {
        BackendFault::UnknownAuthority => {
            "its caBundle holds CA \"unstuck backend CA\"; the container serves a certificate signed by \"unstuck backend CA (rotated)\""
        }
        BackendFault::ExpiredCertificate => {
            "its caBundle holds the CA that signed the container's certificate, which expired a day ago"
        }
        _ => "its caBundle holds the CA that signed the container's certificate",
    }
}

/// The apply step on a file the step wrote (an absolute path, which
/// joining to the fixtures directory leaves as it is).
async fn apply(
    run: &mut ScenarioRun<'_>,
    file: PathBuf,
    namespace: Option<&str>,
) -> Result<Evidence, StepError> {
    let spec = ApplySpec {
        file: Located::unlocated(file),
        namespace: namespace.map(|n| Located::unlocated(n.to_string())),
    };
    super::apply::run(run, &spec).await
}

/// The Docker network the node's cluster wants its containers on (a kind
/// cluster's), or `None` for one of the container's own (the local
/// provider's node is this machine, which reaches any).
pub(super) async fn cluster_network(run: &ScenarioRun<'_>) -> Result<Option<String>, StepError> {
    let Some(node) = run.ctx.node.as_deref() else {
        return Ok(None);
    };
    node.container_network()
        .await
        .map_err(|source| StepError::ContainerNetwork {
            node: node.name().to_string(),
            source,
        })
}

fn write(dir: &std::path::Path, name: &str, docs: &[Value]) -> Result<PathBuf, StepError> {
    let path = dir.join(name);
    let text = docs
        .iter()
        .map(|d| serde_json::to_string_pretty(d).expect("json"))
        .collect::<Vec<_>>()
        .join("\n---\n");
    std::fs::write(&path, text).map_err(|source| StepError::Write {
        path: path.clone(),
        source,
    })?;
    Ok(path)
}
