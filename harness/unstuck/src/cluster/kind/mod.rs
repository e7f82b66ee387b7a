//! The `kind` provider: a single-node kind cluster, created by the `kind`
//! CLI (v0.30, built from its Go module by `ci/kind/setup.sh`) from an
//! offline node image that set-up builds from the same components the
//! local provider runs. unstuck never pulls: the image, and every image
//! in it, must already be in Docker.
//!
//! Each cluster has a Docker network of its own (`unstuck-<name>`, made
//! by kind through `KIND_EXPERIMENTAL_DOCKER_NETWORK`), so that its
//! delete can remove the network too without touching anyone else's
//! `kind` network, and a state record under [`kind_root`] naming what it
//! made (containers by kind's label, the node's volumes, the network), so
//! a crashed harness's reaper, `unstuck cluster gc` and the leftover check
//! know exactly what is theirs.

pub mod docker;

use std::{
    fs,
    io::{Read as _, Write as _},
    os::unix::process::CommandExt as _,
    path::{Path, PathBuf},
    process::{Child, ChildStdin, Stdio},
    time::{Duration, Instant},
};

use k8s_openapi::api::core::v1::Node as ApiNode;
use kube::{Api, Client};
use serde::{Deserialize, Serialize};

use self::docker::Docker;
use crate::{
    cluster::local::{self, state::ProcessRef},
    components,
    exec::{Cmd, RunError},
    node::KindNode,
    wait::{self, Poll},
};

/// The kind release set-up builds (the last with cgroup v1 node images
/// for Kubernetes 1.34; kind-offline notes in docs/kind.md).
pub const KIND_VERSION: &str = "v0.30.0";

/// The tag set-up gives the offline node image of `k8s_version`.
pub fn node_image(k8s_version: &str) -> String {
    format!("unstuck.local/kind-node:{k8s_version}")
}

/// Where kind cluster records live: `$UNSTUCK_KIND_STATE_DIR`, else a
/// sibling of the local clusters' state root.
pub fn kind_root() -> PathBuf {
    std::env::var_os("UNSTUCK_KIND_STATE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| local::state::state_root().with_file_name("kind-clusters"))
}

/// The network a cluster's node is attached to.
pub fn network_name(cluster: &str) -> String {
    format!("unstuck-{cluster}")
}

/// The node container (and API node) of a single-node kind cluster.
pub fn node_container(cluster: &str) -> String {
    format!("{cluster}-control-plane")
}

#[derive(Debug, thiserror::Error)]
pub enum KindError {
    #[error("{0}")]
    Name(String),
    #[error(
        "the kind CLI is not built ({path}).\n  Install Docker, build kind and the offline node image with:\n    sudo ci/kind/setup.sh --k8s-version {version}"
    )]
    KindMissing { path: PathBuf, version: String },
    #[error(
        "the Docker engine does not answer: {source}\n  Install and start it (and build the node image) with:\n    sudo ci/kind/setup.sh --k8s-version {version}"
    )]
    DockerDown {
        version: String,
        #[source]
        source: RunError,
    },
    #[error(
        "node image {image} is not in Docker (unstuck never pulls one).\n  Build it offline with:\n    sudo ci/kind/setup.sh --k8s-version {version}"
    )]
    ImageMissing { image: String, version: String },
    #[error(
        "kind cluster '{0}' already exists; remove it with `unstuck cluster down --provider kind {0}` (or `kind delete cluster --name {0}` if unstuck did not make it)"
    )]
    Exists(String),
    #[error(
        "no kind cluster named '{0}' made by unstuck ({1}); `unstuck cluster list` shows the clusters it made"
    )]
    NotFound(String, PathBuf),
    #[error(transparent)]
    Command(#[from] RunError),
    #[error("{what} failed: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("kind cluster '{name}': {message}\n  kind's logs of it: {logs}")]
    Create {
        name: String,
        message: String,
        logs: PathBuf,
    },
    #[error("kind cluster record {path} is unreadable: {message}")]
    State { path: PathBuf, message: String },
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> KindError {
    let what = what.into();
    move |source| KindError::Io { what, source }
}

/// The tools a kind cluster needs, found where set-up puts them.
#[derive(Clone, Debug)]
pub struct KindTools {
    pub kind: PathBuf,
    pub docker: Docker,
    pub image: String,
}

impl KindTools {
    /// Finds the kind CLI, checks that Docker answers and that the node
    /// image of `k8s_version` is there; each miss names the fix.
    pub async fn locate(k8s_version: &str) -> Result<Self, KindError> {
        let kind = std::env::var_os("UNSTUCK_KIND")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                components::cache_dir()
                    .join("kind")
                    .join(KIND_VERSION)
                    .join("bin/kind")
            });
        if !kind.is_file() {
            return Err(KindError::KindMissing {
                path: kind,
                version: k8s_version.into(),
            });
        }
        let docker = Docker::default();
        docker
            .engine_answers()
            .await
            .map_err(|source| KindError::DockerDown {
                version: k8s_version.into(),
                source,
            })?;
        let image = node_image(k8s_version);
        if !docker.image_exists(&image).await {
            return Err(KindError::ImageMissing {
                image,
                version: k8s_version.into(),
            });
        }
        Ok(Self {
            kind,
            docker,
            image,
        })
    }

    fn kind(&self, network: &str) -> Cmd {
        Cmd::new(&self.kind).env("KIND_EXPERIMENTAL_DOCKER_NETWORK", network)
    }
}

/// How to create a kind cluster.
#[derive(Clone, Debug)]
pub struct KindOptions {
    pub name: String,
    pub k8s_version: String,
    /// `kind create cluster` plus node Ready, at most.
    pub timeout: Duration,
    /// The `unstuck` binary, run as a reaper that deletes the cluster when
    /// this process dies without doing so; `None` for a cluster meant to
    /// outlive the command (`unstuck cluster up` without `--hold`).
    pub reaper: Option<PathBuf>,
}

impl KindOptions {
    pub fn new(name: impl Into<String>, k8s_version: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            k8s_version: k8s_version.into(),
            timeout: Duration::from_secs(300),
            reaper: None,
        }
    }
}

/// What `state.json` of a kind cluster holds.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct KindState {
    pub name: String,
    pub k8s_version: String,
    pub image: String,
    pub network: String,
    pub created_at: String,
    /// The harness that owns a throwaway cluster; `None` for a kept one.
    pub owner: Option<ProcessRef>,
    /// The node container's volumes (kind's anonymous `/var`), once known.
    #[serde(default)]
    pub volumes: Vec<String>,
}

impl KindState {
    fn path(dir: &Path) -> PathBuf {
        dir.join("state.json")
    }

    pub fn load(dir: &Path) -> Result<Option<Self>, KindError> {
        let path = Self::path(dir);
        match fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str(&text)
                .map(Some)
                .map_err(|e| KindError::State {
                    path,
                    message: e.to_string(),
                }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io(format!("reading {}", path.display()))(e)),
        }
    }

    fn save(&self, dir: &Path) -> Result<(), KindError> {
        let path = Self::path(dir);
        let tmp = path.with_extension("json.tmp");
        let text = serde_json::to_string_pretty(self).expect("state serialises");
        fs::write(&tmp, text).map_err(io(format!("writing {}", tmp.display())))?;
        fs::rename(&tmp, &path).map_err(io(format!("writing {}", path.display())))
    }

    /// A throwaway cluster whose harness is gone.
    pub fn is_stale(&self) -> bool {
        self.owner.as_ref().is_some_and(|o| !o.is_alive())
    }
}

/// The kind configuration unstuck creates clusters with: one node, no
/// default CNI (the image carries a static bridge configuration, so no
/// CNI image has to be pulled and a removed configuration stays removed
/// until someone restores it, as on a real node), the API on loopback
/// only, and the kubeadm/containerd settings a cgroup v1 host in a
/// container needs (docs/kind.md says why each is there).
pub fn cluster_config(k8s_version: &str) -> String {
    let _ = k8s_version;
    format!(
        r#"# Written by unstuck for `kind create cluster --config`.
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
networking:
  apiServerAddress: "127.0.0.1"
  disableDefaultCNI: true
nodes:
- role: control-plane
kubeadmConfigPatches:
- |
  kind: ClusterConfiguration
  etcd:
    local:
      imageTag: "{etcd_tag}"
"#,
        etcd_tag = etcd_image_tag(),
    )
}

/// The etcd image tag the node image carries: the etcd unstuck builds.
pub fn etcd_image_tag() -> String {
    format!(
        "{}-0",
        components::DEFAULT_ETCD_VERSION.trim_start_matches('v')
    )
}

/// How long each phase of a create took.
#[derive(Clone, Debug, Default, Serialize)]
pub struct KindTimings {
    /// `kind create cluster` itself (node container, kubeadm init).
    pub create: Duration,
    /// From the start to the node's Ready condition.
    pub node_ready: Duration,
}

/// A kind cluster this process created.
pub struct KindCluster {
    state: KindState,
    dir: PathBuf,
    tools: KindTools,
    client: Client,
    node: KindNode,
    reaper: Option<(Child, ChildStdin)>,
    pub timings: KindTimings,
}

impl KindCluster {
    /// Creates the cluster and waits for its node to be Ready. On any
    /// failure kind's logs are exported (the error names where) and
    /// everything made so far is deleted again.
    pub async fn up(opts: KindOptions) -> Result<Self, KindError> {
        local::layout::validate_name(&opts.name).map_err(KindError::Name)?;
        let tools = KindTools::locate(&opts.k8s_version).await?;
        let started = Instant::now();
        let root = kind_root();
        fs::create_dir_all(&root).map_err(io(format!("creating {}", root.display())))?;
        let dir = root.join(&opts.name);
        if dir.exists()
            || !tools
                .docker
                .cluster_containers(&opts.name)
                .await?
                .is_empty()
        {
            return Err(KindError::Exists(opts.name));
        }
        fs::create_dir_all(&dir).map_err(io(format!("creating {}", dir.display())))?;
        let mut state = KindState {
            name: opts.name.clone(),
            k8s_version: opts.k8s_version.clone(),
            image: tools.image.clone(),
            network: network_name(&opts.name),
            created_at: k8s_openapi::jiff::Timestamp::now().to_string(),
            owner: opts
                .reaper
                .as_ref()
                .and_then(|_| ProcessRef::of(std::process::id() as i32)),
            volumes: Vec::new(),
        };
        state.save(&dir)?;
        let reaper = match &opts.reaper {
            Some(program) => Some(spawn_reaper(program, &dir)?),
            None => None,
        };
        match create(&tools, &mut state, &dir, opts.timeout, started).await {
            Ok((client, node, timings)) => Ok(Self {
                state,
                dir,
                tools,
                client,
                node,
                reaper,
                timings,
            }),
            Err(message) => {
                let logs = dir.with_file_name(format!("{}-failed-logs", opts.name));
                let _ = export_logs(&tools, &state, &logs).await;
                let td = delete(&tools, &state, &dir).await;
                tracing::warn!(
                    "creating kind cluster '{}' failed; deleted: {td:?}",
                    opts.name
                );
                if let Some((mut child, stdin)) = reaper {
                    drop(stdin);
                    let _ = child.wait();
                }
                Err(KindError::Create {
                    name: opts.name,
                    message,
                    logs,
                })
            }
        }
    }

    pub fn name(&self) -> &str {
        &self.state.name
    }
    pub fn client(&self) -> Client {
        self.client.clone()
    }
    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.join("kubeconfig")
    }
    pub fn k8s_version(&self) -> &str {
        &self.state.k8s_version
    }
    pub fn image(&self) -> &str {
        &self.state.image
    }
    pub fn node(&self) -> &KindNode {
        &self.node
    }

    /// `kind export logs` into `to` (node journal, component and container
    /// logs, `docker inspect` of the node).
    pub async fn export_logs(&self, to: &Path) -> Result<(), KindError> {
        export_logs(&self.tools, &self.state, to).await
    }

    /// Deletes the cluster: its containers (with their volumes), its
    /// network and its record. Returns what went wrong, if anything.
    pub async fn down(mut self) -> Vec<String> {
        let errors = delete(&self.tools, &self.state, &self.dir).await;
        if let Some((mut child, stdin)) = self.reaper.take() {
            // The record is gone, so the reaper finds nothing left to do.
            drop(stdin);
            let _ = child.wait();
        }
        errors
    }

    /// What is left of the cluster on this machine; empty means clean.
    pub async fn leftovers(&self) -> Vec<String> {
        leftovers(&self.tools.docker, &self.state, &self.dir).await
    }
}

/// The create itself: `kind create cluster`, the kubeconfig, node Ready,
/// the cluster's unstuck mark. Errors are words for [`KindError::Create`].
async fn create(
    tools: &KindTools,
    state: &mut KindState,
    dir: &Path,
    timeout: Duration,
    started: Instant,
) -> Result<(Client, KindNode, KindTimings), String> {
    let config = dir.join("kind-config.yaml");
    fs::write(&config, cluster_config(&state.k8s_version))
        .map_err(|e| format!("writing {}: {e}", config.display()))?;
    let kubeconfig = dir.join("kubeconfig");
    tools
        .kind(&state.network)
        .args(["create", "cluster", "--name", &state.name, "--image"])
        .arg(&state.image)
        .arg("--config")
        .arg(&config)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        // Kept on failure so that its logs can be exported first.
        .arg("--retain")
        .timeout(timeout)
        .output()
        .await
        .map_err(|e| e.to_string())?;
    let create = started.elapsed();
    state.volumes = tools
        .docker
        .container_volumes(&node_container(&state.name))
        .await
        .map_err(|e| e.to_string())?;
    state.save(dir).map_err(|e| e.to_string())?;
    let client = local::client_for(&kubeconfig)
        .await
        .map_err(|e| e.to_string())?;
    let node_name = node_container(&state.name);
    let nodes: Api<ApiNode> = Api::all(client.clone());
    let left = timeout.saturating_sub(started.elapsed());
    wait::until(
        format!("node {node_name} to be Ready"),
        left.max(Duration::from_secs(30)),
        Duration::from_millis(500),
        || {
            let nodes = nodes.clone();
            let node_name = node_name.clone();
            async move {
                match nodes.get_opt(&node_name).await {
                    Ok(Some(n)) => match local::node_ready(&n) {
                        Ok(()) => Poll::Ready(()),
                        Err(e) => Poll::Pending(e),
                    },
                    Ok(None) => Poll::Pending(format!("no node {node_name} yet")),
                    Err(e) => Poll::Pending(e.to_string()),
                }
            }
        },
    )
    .await
    .map_err(|e| e.to_string())?;
    let node_ready = started.elapsed();
    wait::until(
        "marking the cluster as unstuck's",
        Duration::from_secs(30),
        Duration::from_millis(500),
        || {
            let c = client.clone();
            async move {
                match crate::cluster::identity::mark(&c).await {
                    Ok(()) => Poll::Ready(()),
                    Err(e) => Poll::Pending(e.to_string()),
                }
            }
        },
    )
    .await
    .map_err(|e| e.to_string())?;
    let node = KindNode::open(tools.docker.clone(), &node_name)
        .await
        .map_err(|e| e.to_string())?;
    Ok((client, node, KindTimings { create, node_ready }))
}

async fn export_logs(tools: &KindTools, state: &KindState, to: &Path) -> Result<(), KindError> {
    fs::create_dir_all(to).map_err(io(format!("creating {}", to.display())))?;
    tools
        .kind(&state.network)
        .args(["export", "logs"])
        .arg(to)
        .args(["--name", &state.name])
        .timeout(Duration::from_secs(120))
        .output()
        .await?;
    Ok(())
}

/// Deletes what the record names; each part is attempted even when an
/// earlier one failed, and the record goes last (only when all went).
async fn delete(tools: &KindTools, state: &KindState, dir: &Path) -> Vec<String> {
    let mut errors = Vec::new();
    if let Err(e) = tools
        .kind(&state.network)
        .args(["delete", "cluster", "--name", &state.name, "--kubeconfig"])
        .arg(dir.join("kubeconfig"))
        .timeout(Duration::from_secs(120))
        .output()
        .await
    {
        errors.push(e.to_string());
    }
    if let Err(e) = tools.docker.remove_network(&state.network).await {
        errors.push(e.to_string());
    }
    let left = leftovers(&tools.docker, state, Path::new("/nonexistent")).await;
    errors.extend(left.into_iter().map(|l| format!("still there: {l}")));
    if errors.is_empty()
        && let Err(e) = fs::remove_dir_all(dir)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        errors.push(format!("removing {}: {e}", dir.display()));
    }
    errors
}

async fn leftovers(docker: &Docker, state: &KindState, dir: &Path) -> Vec<String> {
    let mut left = Vec::new();
    match docker.cluster_containers(&state.name).await {
        Ok(names) => left.extend(names.into_iter().map(|n| format!("container {n}"))),
        Err(e) => left.push(format!("containers unknown: {e}")),
    }
    match docker.network_exists(&state.network).await {
        Ok(true) => left.push(format!("network {}", state.network)),
        Ok(false) => {}
        Err(e) => left.push(format!("network unknown: {e}")),
    }
    for v in &state.volumes {
        if docker.volume_exists(v).await {
            left.push(format!("volume {v}"));
        }
    }
    if dir.exists() {
        left.push(format!("record {}", dir.display()));
    }
    left
}

/// A kind cluster unstuck made, as `unstuck cluster list` shows it.
#[derive(Debug, Serialize)]
pub struct KindStatus {
    pub name: String,
    pub dir: PathBuf,
    pub k8s_version: String,
    pub image: String,
    pub stale: bool,
    pub kubeconfig: PathBuf,
}

/// Every kind cluster record under [`kind_root`].
pub fn list() -> Vec<KindStatus> {
    let Ok(entries) = fs::read_dir(kind_root()) else {
        return Vec::new();
    };
    let mut out: Vec<KindStatus> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("state.json").is_file())
        .filter_map(|dir| {
            let st = KindState::load(&dir).ok().flatten()?;
            Some(KindStatus {
                name: st.name.clone(),
                kubeconfig: dir.join("kubeconfig"),
                k8s_version: st.k8s_version.clone(),
                image: st.image.clone(),
                stale: st.is_stale(),
                dir,
            })
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// Deletes the named kind cluster unstuck made (also by another process).
pub async fn down(name: &str) -> Result<Vec<String>, KindError> {
    local::layout::validate_name(name).map_err(KindError::Name)?;
    let dir = kind_root().join(name);
    let state =
        KindState::load(&dir)?.ok_or_else(|| KindError::NotFound(name.into(), dir.clone()))?;
    let tools = KindTools::locate(&state.k8s_version)
        .await
        .or_else(|e| match e {
            // Deleting needs kind and Docker, not the image.
            KindError::ImageMissing { .. } => Ok(KindTools {
                kind: components::cache_dir()
                    .join("kind")
                    .join(KIND_VERSION)
                    .join("bin/kind"),
                docker: Docker::default(),
                image: state.image.clone(),
            }),
            e => Err(e),
        })?;
    Ok(delete(&tools, &state, &dir).await)
}

/// Deletes the kind clusters whose harness died; their names and problems.
pub async fn sweep_stale() -> Vec<(String, Vec<String>)> {
    let mut swept = Vec::new();
    for c in list().into_iter().filter(|c| c.stale) {
        let errors = down(&c.name).await.unwrap_or_else(|e| vec![e.to_string()]);
        swept.push((c.name, errors));
    }
    swept
}

fn spawn_reaper(program: &Path, dir: &Path) -> Result<(Child, ChildStdin), KindError> {
    let log = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("reaper.log"))
        .map_err(io("opening the reaper log"))?;
    let mut child = std::process::Command::new(program)
        .arg("__reap")
        .arg("--kind")
        .arg(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(log)
        // Its own group: a Ctrl-C to the harness's group must not reach it.
        .process_group(0)
        .spawn()
        .map_err(io(format!("starting the reaper {}", program.display())))?;
    let stdin = child.stdin.take().expect("piped stdin");
    Ok((child, stdin))
}

/// The reaper's body (`unstuck __reap --kind DIR`): wait until the harness
/// lets go of our stdin, then delete the cluster if its record is still
/// there (the harness did not get to it).
pub async fn reap(dir: &Path) -> Option<Vec<String>> {
    let mut sink = [0u8; 64];
    let mut stdin = std::io::stdin();
    while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
    let state = KindState::load(dir).ok().flatten()?;
    let errors = down(&state.name)
        .await
        .unwrap_or_else(|e| vec![e.to_string()]);
    let _ = writeln!(
        std::io::stderr(),
        "reaper: harness gone; deleted kind cluster '{}'{}",
        state.name,
        if errors.is_empty() {
            String::new()
        } else {
            format!(" with problems: {}", errors.join("; "))
        }
    );
    Some(errors)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_is_one_node_on_loopback_without_a_default_cni() {
        let c = cluster_config("v1.34.4");
        assert!(c.contains("apiServerAddress: \"127.0.0.1\""), "{c}");
        assert!(c.contains("disableDefaultCNI: true"), "{c}");
        assert_eq!(c.matches("- role:").count(), 1, "{c}");
        assert!(c.contains("imageTag: \"3.5.21-0\""), "{c}");
    }

    #[test]
    fn names_follow_the_cluster() {
        assert_eq!(network_name("run-ab12"), "unstuck-run-ab12");
        assert_eq!(node_container("run-ab12"), "run-ab12-control-plane");
        assert_eq!(node_image("v1.34.4"), "unstuck.local/kind-node:v1.34.4");
    }
}
