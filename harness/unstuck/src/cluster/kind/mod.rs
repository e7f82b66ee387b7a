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

mod create;
mod node;
mod provider;
pub mod restarts;
mod state;
mod teardown;

use self::{
    create::{create, export_logs},
    teardown::{delete, leftovers, spawn_reaper},
};
pub use self::{
    node::{CNI_CONFLIST_NAME, KindNode},
    provider::KindProvider,
    state::{KindState, KindStatus, list},
    teardown::{down, reap, sweep_stale},
};
use crate::text;

use std::{
    fs,
    path::{Path, PathBuf},
    process::{Child, ChildStdin},
    time::{Duration, Instant},
};

use kube::Client;
use serde::Serialize;

use crate::docker::Docker;
use crate::{
    cluster::{ClusterError, exits::ExitLog},
    components,
    exec::Cmd,
    node::ProcRef,
};

/// The kind release set-up builds (the last with cgroup v1 node images
/// for Kubernetes 1.34; kind-offline notes in docs/kind.md).
pub const KIND_VERSION: &str = "v0.30.0";

/// The tag set-up gives the offline node image of `k8s_version`.
pub fn node_image(k8s_version: &str) -> String {
    format!("unstuck.local/kind-node:{k8s_version}")
}

/// The label kind puts on every container of a cluster.
pub const CLUSTER_LABEL: &str = "io.x-k8s.kind.cluster";

/// Where kind cluster records live: `$UNSTUCK_KIND_STATE_DIR`, else a
/// sibling of the local clusters' state root.
pub fn kind_root() -> PathBuf {
    std::env::var_os("UNSTUCK_KIND_STATE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::cluster::state_dir(Some("kind-clusters")))
}

/// The network a cluster's node is attached to.
pub fn network_name(cluster: &str) -> String {
    format!("unstuck-{cluster}")
}

/// The node container (and API node) of a single-node kind cluster.
pub fn node_container(cluster: &str) -> String {
    format!("{cluster}-control-plane")
}

use crate::cluster::error::io;

/// The kind CLI: `UNSTUCK_KIND`, or the one ci/kind/setup.sh builds
/// into the cache.
pub fn kind_cli() -> PathBuf {
    std::env::var_os("UNSTUCK_KIND")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            components::cache_dir()
                .join("kind")
                .join(KIND_VERSION)
                .join("bin/kind")
        })
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
    pub async fn locate(k8s_version: &str) -> Result<Self, ClusterError> {
        let kind = kind_cli();
        if !kind.is_file() {
            return Err(ClusterError::KindMissing {
                path: kind,
                version: k8s_version.into(),
            });
        }
        let docker = Docker::default();
        docker
            .engine_answers()
            .await
            .map_err(|source| ClusterError::DockerDown {
                version: k8s_version.into(),
                source,
            })?;
        let image = node_image(k8s_version);
        if !docker.image_exists(&image).await {
            return Err(ClusterError::ImageMissing {
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

/// The kind configuration unstuck creates clusters with, the one set-up
/// ships beside the node image (`ci/kind/kind-config.yaml`, compiled in so
/// the binary needs no repository at run time): one node, no default CNI
/// (the image carries a static bridge configuration, so no CNI image is
/// pulled and a removed configuration stays removed until someone restores
/// it, as on a real node), the API on loopback only, etcd tagged with the
/// version really built, and the kubelet settings a cgroup v1 host in a
/// container needs (docs/kind.md says why each is there).
pub const CLUSTER_CONFIG: &str = include_str!("../../../../../ci/kind/kind-config.yaml");

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
    /// Watches the node's static control-plane pods for restarts.
    restarts: restarts::RestartWatch,
    reaper: Option<(Child, ChildStdin)>,
    pub timings: KindTimings,
}

impl KindCluster {
    /// Creates the cluster and waits for its node to be Ready. On any
    /// failure kind's logs are exported (the error names where) and
    /// everything made so far is deleted again.
    pub async fn up(opts: KindOptions) -> Result<Self, ClusterError> {
        crate::cluster::name::validate_name(&opts.name)?;
        let tools = KindTools::locate(&opts.k8s_version).await?;
        // Clusters of harnesses that died (their reaper killed too, say by
        // the end of a CI session) would hold Docker networks and memory.
        for (name, problems) in sweep_stale().await {
            tracing::info!(
                "deleted stale kind cluster '{name}' {}",
                text::list(&problems)
            );
        }
        let started = Instant::now();
        let root = kind_root();
        fs::create_dir_all(&root).map_err(io(format!("creating {}", root.display())))?;
        let dir = root.join(&opts.name);
        if !tools
            .docker
            .containers_labelled(CLUSTER_LABEL, &opts.name)
            .await?
            .is_empty()
        {
            return Err(ClusterError::KindExists(opts.name));
        }
        // The name is claimed by creating its directory, which only one
        // of two runs that pick the same name at once can do.
        match fs::create_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err(ClusterError::KindExists(opts.name));
            }
            Err(e) => return Err(io(format!("creating {}", dir.display()))(e)),
        }
        let mut state = KindState {
            name: opts.name.clone(),
            k8s_version: opts.k8s_version.clone(),
            image: tools.image.clone(),
            network: network_name(&opts.name),
            created_at: k8s_openapi::jiff::Timestamp::now().to_string(),
            owner: opts
                .reaper
                .as_ref()
                .and_then(|_| ProcRef::of_pid(std::process::id() as i32)),
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
                restarts: restarts::RestartWatch::start(client.clone()),
                client,
                node,
                reaper,
                timings,
            }),
            Err(source) => {
                let logs = dir.with_file_name(format!("{}-failed-logs", opts.name));
                let kept = export_logs(&tools, &state, &logs).await;
                let td = delete(&tools, &state, &dir).await;
                tracing::warn!(
                    "creating kind cluster '{}' failed; deleted: {}",
                    opts.name,
                    text::list(&td)
                );
                if let Some((child, stdin)) = reaper {
                    release_reaper(child, stdin);
                }
                let source = Box::new(source);
                Err(match kept {
                    Ok(()) => ClusterError::Create {
                        name: opts.name,
                        logs,
                        source,
                    },
                    Err(e) => ClusterError::CreateNoLogs {
                        name: opts.name,
                        source,
                        logs: Box::new(e),
                    },
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
    /// The control-plane containers the node's kubelet restarted while
    /// the cluster ran, as they happen.
    pub fn component_exits(&self) -> ExitLog {
        self.restarts.exits()
    }

    /// `kind export logs` into `to` (node journal, component and container
    /// logs, `docker inspect` of the node).
    pub async fn export_logs(&self, to: &Path) -> Result<(), ClusterError> {
        export_logs(&self.tools, &self.state, to).await
    }

    /// Deletes the cluster: its containers (with their volumes), its
    /// network and its record. Returns what went wrong, if anything.
    pub async fn down(mut self) -> Vec<String> {
        let errors = delete(&self.tools, &self.state, &self.dir).await;
        if let Some((child, stdin)) = self.reaper.take() {
            // The record is gone, so the reaper finds nothing left to do.
            release_reaper(child, stdin);
        }
        errors
    }

    /// What is left of the cluster on this machine; empty means clean.
    pub async fn leftovers(&self) -> Vec<String> {
        leftovers(&self.tools.docker, &self.state, Some(&self.dir)).await
    }
}

/// Lets the reaper go (it finds nothing left once the record is gone) and
/// waits for it, so it is never left a zombie; a wait that fails is said.
fn release_reaper(mut child: Child, stdin: ChildStdin) {
    drop(stdin);
    if let Err(e) = child.wait() {
        tracing::warn!("waiting for the kind reaper {}: {e}", child.id());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_is_one_node_on_loopback_without_a_default_cni() {
        let c = CLUSTER_CONFIG;
        assert!(c.contains("apiServerAddress: 127.0.0.1"), "{c}");
        assert!(c.contains("disableDefaultCNI: true"), "{c}");
        assert_eq!(c.matches("- role:").count(), 1, "{c}");
        // etcd carries the version unstuck builds, never a borrowed tag.
        assert!(
            c.contains(&format!(
                "imageTag: \"{}-0\"",
                components::DEFAULT_ETCD_VERSION.trim_start_matches('v')
            )),
            "{c}"
        );
    }

    #[test]
    fn names_follow_the_cluster() {
        assert_eq!(network_name("run-ab12"), "unstuck-run-ab12");
        assert_eq!(node_container("run-ab12"), "run-ab12-control-plane");
        assert_eq!(node_image("v1.34.4"), "unstuck.local/kind-node:v1.34.4");
    }
}
