//! One interface over the cluster providers, covering everything the CLI
//! and the runner do with clusters (as kind's `pkg/cluster` `Provider`
//! does): [`Provider`] creates, lists, deletes by name, sweeps stale
//! clusters, reaps for a dead harness and opens a cluster's node;
//! [`ProvidedCluster`] is what a run needs of a cluster it holds.
//!
//! Both traits are object safe (futures are boxed, `delete` takes
//! `Box<Self>`), so callers hold an [`AnyProvider`] (`Arc<dyn Provider>`)
//! and a `Box<dyn ProvidedCluster>` and nothing forwards method by method
//! to the provider inside: adding a provider is its module with one
//! `impl Provider` and one `impl ProvidedCluster`, a [`ProviderKind`]
//! variant and its arm in `provider`. A boxed future per call costs
//! nothing next to a cluster's create or delete.

use std::{
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use futures::future::BoxFuture;
use kube::Client;
use serde::{Deserialize, Serialize};

use super::{ClusterError, exits::ExitLog};
use crate::node::AnyNode;

/// Which provider makes a run's clusters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    /// Real components as processes on this machine (no Docker).
    #[default]
    Local,
    /// A kind cluster from the offline node image (`ci/kind/setup.sh`).
    Kind,
}

impl ProviderKind {
    /// Every provider, in the order `cluster list` shows them.
    pub const ALL: [ProviderKind; 2] = [ProviderKind::Local, ProviderKind::Kind];
}

impl std::fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Local => "local",
            Self::Kind => "kind",
        })
    }
}

/// Which provider ran, for the reports.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderInfo {
    pub name: ProviderKind,
    /// The kind node image, for `kind`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_image: Option<String>,
}

impl std::fmt::Display for ProviderInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.name)?;
        if let Some(image) = &self.node_image {
            write!(f, " (node image {image})")?;
        }
        Ok(())
    }
}

/// What deleting a cluster did: a summary, and anything that went wrong
/// or is still on the machine afterwards (empty means clean).
#[derive(Clone, Debug, Default)]
pub struct Teardown {
    pub summary: String,
    pub problems: Vec<String>,
}

impl std::fmt::Display for Teardown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.summary)?;
        if !self.problems.is_empty() {
            write!(f, "; LEFT OR FAILED: {}", self.problems.join("; "))?;
        }
        Ok(())
    }
}

/// How a cluster's life (its components' for the local provider) is
/// tied to the harness.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lifetime {
    /// Dies with the thread that started it (PR_SET_PDEATHSIG): the
    /// cluster of a test or `unstuck run`. Start such clusters from a
    /// thread that lives as long as the cluster (the main thread).
    Owned,
    /// Survives the harness: the cluster of `unstuck cluster up`.
    Detached,
}

/// How a provider makes its clusters.
#[derive(Clone, Debug)]
pub struct CreateOptions {
    pub k8s_version: String,
    /// Create plus node Ready, at most; `None` is the provider's default.
    pub timeout: Option<Duration>,
    /// [`Lifetime::Owned`]: the cluster goes when this process does (with
    /// `reaper`, also when it is killed); [`Lifetime::Detached`]: it stays
    /// until `cluster down`.
    pub lifetime: Lifetime,
    /// The `unstuck` binary, run as the reaper of an owned cluster.
    pub reaper: Option<PathBuf>,
}

impl CreateOptions {
    /// Owned clusters of Kubernetes `k8s_version`, with `reaper`.
    pub fn owned(k8s_version: &str, reaper: Option<PathBuf>) -> Self {
        Self {
            k8s_version: k8s_version.to_string(),
            timeout: None,
            lifetime: Lifetime::Owned,
            reaper,
        }
    }
}

/// A cluster unstuck made, as `unstuck cluster list/status` show it.
#[derive(Clone, Debug, Serialize)]
pub struct ClusterStatus {
    pub name: String,
    pub provider: ProviderKind,
    /// `None` when its record is unreadable.
    pub k8s_version: Option<String>,
    /// Its harness died (or, for a kept local cluster, its API server).
    pub stale: bool,
    pub kubeconfig: PathBuf,
    /// What sets it apart, in one column of `cluster list` (a local
    /// cluster's slot, a kind cluster's node image).
    pub detail: String,
    /// How a person reaches its node.
    pub node_access: String,
    /// Its components and whether each runs, where the provider sees them.
    pub components: Vec<(String, bool)>,
}

/// A cluster provider: makes, finds and removes the clusters it made.
pub trait Provider: Send + Sync {
    fn kind(&self) -> ProviderKind;

    /// What a cluster of these options would run on, for the reports of
    /// a run whose cluster did not come up (a created cluster says it
    /// with [`ProvidedCluster::info`]).
    fn info(&self) -> ProviderInfo {
        ProviderInfo {
            name: self.kind(),
            node_image: None,
        }
    }

    /// Creates cluster `name` and waits until its node is Ready. A failed
    /// create leaves nothing behind.
    fn create<'a>(
        &'a self,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Box<dyn ProvidedCluster>, ClusterError>>;

    /// The clusters of this provider on this machine, sorted by name.
    fn list(&self) -> Vec<ClusterStatus>;

    /// Cluster `name` of this provider, if there is one.
    fn status(&self, name: &str) -> Option<ClusterStatus> {
        self.list().into_iter().find(|c| c.name == name)
    }

    /// Deletes cluster `name` (also one another process made) and checks
    /// that nothing of it is left.
    fn delete<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Teardown, ClusterError>>;

    /// Deletes the clusters whose harness died: their names and teardowns.
    fn sweep_stale(&self) -> BoxFuture<'_, Result<Vec<(String, Teardown)>, ClusterError>>;

    /// The reaper's body (`unstuck __reap --provider P RECORD`): waits
    /// until the harness lets go of stdin, then deletes the cluster whose
    /// record is `record` if it is still there.
    fn reap<'a>(&'a self, record: &'a Path) -> BoxFuture<'a, Option<Teardown>>;

    /// The node of cluster `name` (also one another process made).
    fn node<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Arc<AnyNode>, ClusterError>>;
}

/// The provider a run or a command holds, whichever it is.
pub type AnyProvider = Arc<dyn Provider>;

/// What a run needs of a cluster, whichever provider made it.
pub trait ProvidedCluster: Send + Sync {
    fn name(&self) -> &str;
    fn client(&self) -> Client;
    fn kubeconfig(&self) -> PathBuf;
    fn k8s_version(&self) -> &str;
    /// The node, for node-level faults and the node doctor.
    fn node(&self) -> Arc<AnyNode>;
    fn info(&self) -> ProviderInfo;
    /// From the start of the create to the node's Ready condition.
    fn node_ready(&self) -> Duration;
    /// The control-plane components that exited while the cluster ran.
    fn component_exits(&self) -> ExitLog;
    /// Lines for a person: where its logs are, how to reach its node.
    fn describe(&self) -> Vec<String>;
    /// Copies the cluster's logs (components, kubelet, runtime) into `to`.
    fn export_logs<'a>(&'a self, to: &'a Path) -> BoxFuture<'a, Result<(), ClusterError>>;
    /// Deletes the cluster and checks that nothing of it is left.
    fn delete(self: Box<Self>) -> BoxFuture<'static, Teardown>;
}

/// How [`create_unless`] ended when it did not fail.
pub enum Created {
    Up(Box<dyn ProvidedCluster>),
    /// Told to stop before the node was Ready: what the create had made so
    /// far was deleted, as this teardown says.
    Stopped(Teardown),
}

/// Creates cluster `name`, unless `stop` resolves first (Ctrl-C, a run
/// being cancelled): then the create is dropped where it stands — a CLI it
/// ran is killed on drop, and a local cluster's record exists from its
/// first byte on disk — and the cluster is deleted by name, the way `cluster
/// gc` would delete it. A person who interrupts a boot waits for a teardown
/// of seconds, not for a node to become Ready first.
pub async fn create_unless(
    provider: &dyn Provider,
    name: &str,
    stop: impl std::future::Future<Output = ()>,
) -> Result<Created, ClusterError> {
    let created = {
        // In a block of its own, so that the create's future (and what it
        // holds: child processes, locks) is dropped before the delete runs.
        let create = provider.create(name);
        tokio::select! {
            created = create => Some(created),
            () = stop => None,
        }
    };
    match created {
        Some(created) => created.map(Created::Up),
        None => match provider.delete(name).await {
            // The create's reaper (told by its closed pipe that the
            // create is gone) may have deleted it first.
            Err(ClusterError::NotFound { .. }) => Ok(Created::Stopped(Teardown {
                summary: "nothing left to delete (its reaper had removed it)".into(),
                problems: Vec::new(),
            })),
            other => other.map(Created::Stopped),
        },
    }
}

/// A future that resolves when `cancel` turns true, and never if its
/// sender goes away without (for [`create_unless`]'s `stop`).
pub async fn cancelled(mut cancel: tokio::sync::watch::Receiver<bool>) {
    if cancel.wait_for(|c| *c).await.is_err() {
        std::future::pending::<()>().await;
    }
}
