//! One interface over the cluster providers: [`Provider`] creates a
//! cluster, [`ProvidedCluster`] is what a run needs of one (a client, its
//! kubeconfig, its node, its logs, its deletion with a leftover check).
//! `local` and `kind` implement both; [`AnyProvider`] and [`AnyCluster`]
//! carry whichever was chosen, because the traits' methods return
//! `impl Future` and so are not object safe.

use std::{
    future::Future,
    path::{Path, PathBuf},
    time::Duration,
};

use kube::Client;
use serde::{Deserialize, Serialize};

use super::{
    exits::ExitLog,
    kind::{KindCluster, KindError, KindOptions},
    local::{self, LocalCluster, LocalError, UpOptions},
};
use crate::node::{AnyNode, LocalNode};

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

/// A cluster provider: makes clusters named by the caller.
pub trait Provider {
    type Cluster: ProvidedCluster;
    type Error: std::error::Error + Send + Sync + 'static;

    fn kind(&self) -> ProviderKind;

    /// Creates cluster `name` and waits until its node is Ready. A failed
    /// create leaves nothing behind.
    fn create(&self, name: &str)
    -> impl Future<Output = Result<Self::Cluster, Self::Error>> + Send;
}

/// What a run needs of a cluster, whichever provider made it.
pub trait ProvidedCluster: Send + Sync {
    fn name(&self) -> &str;
    fn client(&self) -> Client;
    fn kubeconfig(&self) -> PathBuf;
    fn k8s_version(&self) -> &str;
    /// The node, for node-level faults and the node doctor.
    fn node(&self) -> AnyNode;
    fn info(&self) -> ProviderInfo;
    /// From the start of the create to the node's Ready condition.
    fn node_ready(&self) -> Duration;
    /// The control-plane components that exited while the cluster ran.
    fn component_exits(&self) -> ExitLog;
    /// Copies the cluster's logs (components, kubelet, runtime) into `to`.
    fn export_logs(&self, to: &Path) -> impl Future<Output = Result<(), String>> + Send;
    /// Deletes the cluster and checks that nothing of it is left.
    fn delete(self) -> impl Future<Output = Teardown> + Send;
}

/// The `local` provider with the options every cluster starts from.
#[derive(Clone, Debug)]
pub struct LocalProvider(pub UpOptions);

impl Provider for LocalProvider {
    type Cluster = LocalCluster;
    type Error = LocalError;

    fn kind(&self) -> ProviderKind {
        ProviderKind::Local
    }

    async fn create(&self, name: &str) -> Result<LocalCluster, LocalError> {
        let mut up = self.0.clone();
        up.name = name.to_string();
        LocalCluster::up(up).await
    }
}

impl ProvidedCluster for LocalCluster {
    fn name(&self) -> &str {
        &self.layout().name
    }
    fn client(&self) -> Client {
        LocalCluster::client(self)
    }
    fn kubeconfig(&self) -> PathBuf {
        LocalCluster::kubeconfig(self)
    }
    fn k8s_version(&self) -> &str {
        LocalCluster::k8s_version(self)
    }
    fn node(&self) -> AnyNode {
        LocalNode::of(self).into()
    }
    fn info(&self) -> ProviderInfo {
        ProviderInfo::default()
    }
    fn node_ready(&self) -> Duration {
        self.timings.node_ready
    }
    fn component_exits(&self) -> ExitLog {
        LocalCluster::component_exits(self)
    }
    async fn export_logs(&self, to: &Path) -> Result<(), String> {
        std::fs::create_dir_all(to).map_err(|e| format!("creating {}: {e}", to.display()))?;
        for entry in std::fs::read_dir(self.layout().logs_dir())
            .map_err(|e| e.to_string())?
            .flatten()
        {
            std::fs::copy(entry.path(), to.join(entry.file_name()))
                .map_err(|e| format!("copying {}: {e}", entry.path().display()))?;
        }
        Ok(())
    }
    async fn delete(self) -> Teardown {
        let layout = self.layout().clone();
        let report = self.down().await;
        let mut problems = report.errors.clone();
        problems.extend(local::leftovers(&layout));
        Teardown {
            summary: report.to_string(),
            problems,
        }
    }
}

/// The `kind` provider with the options every cluster starts from.
#[derive(Clone, Debug)]
pub struct KindProvider(pub KindOptions);

impl Provider for KindProvider {
    type Cluster = KindCluster;
    type Error = KindError;

    fn kind(&self) -> ProviderKind {
        ProviderKind::Kind
    }

    async fn create(&self, name: &str) -> Result<KindCluster, KindError> {
        let mut opts = self.0.clone();
        opts.name = name.to_string();
        KindCluster::up(opts).await
    }
}

impl ProvidedCluster for KindCluster {
    fn name(&self) -> &str {
        KindCluster::name(self)
    }
    fn client(&self) -> Client {
        KindCluster::client(self)
    }
    fn kubeconfig(&self) -> PathBuf {
        KindCluster::kubeconfig(self)
    }
    fn k8s_version(&self) -> &str {
        KindCluster::k8s_version(self)
    }
    fn node(&self) -> AnyNode {
        KindCluster::node(self).clone().into()
    }
    fn info(&self) -> ProviderInfo {
        ProviderInfo {
            name: ProviderKind::Kind,
            node_image: Some(self.image().to_string()),
        }
    }
    fn node_ready(&self) -> Duration {
        self.timings.node_ready
    }
    fn component_exits(&self) -> ExitLog {
        KindCluster::component_exits(self)
    }
    async fn export_logs(&self, to: &Path) -> Result<(), String> {
        KindCluster::export_logs(self, to)
            .await
            .map_err(|e| e.to_string())
    }
    async fn delete(self) -> Teardown {
        let name = self.name().to_string();
        let problems = self.down().await;
        Teardown {
            summary: format!("kind cluster '{name}' deleted with its network and volumes"),
            problems,
        }
    }
}

/// Either provider.
#[derive(Clone, Debug)]
pub enum AnyProvider {
    Local(LocalProvider),
    Kind(KindProvider),
}

/// A cluster of either provider.
pub enum AnyCluster {
    Local(LocalCluster),
    Kind(KindCluster),
}

/// The error of either provider's create.
#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    #[error(transparent)]
    Local(#[from] LocalError),
    #[error(transparent)]
    Kind(#[from] KindError),
}

impl AnyProvider {
    /// The provider of `kind` for Kubernetes `k8s_version`, with a reaper
    /// (the `unstuck` binary) that removes a cluster whose harness died.
    pub fn new(kind: ProviderKind, k8s_version: &str, reaper: Option<PathBuf>) -> Self {
        match kind {
            ProviderKind::Local => {
                let mut up = UpOptions::new("unstuck");
                up.k8s_version = k8s_version.to_string();
                up.reaper = reaper;
                Self::Local(LocalProvider(up))
            }
            ProviderKind::Kind => {
                let mut opts = KindOptions::new("unstuck", k8s_version);
                opts.reaper = reaper;
                Self::Kind(KindProvider(opts))
            }
        }
    }
}

impl Provider for AnyProvider {
    type Cluster = AnyCluster;
    type Error = CreateError;

    fn kind(&self) -> ProviderKind {
        match self {
            Self::Local(p) => p.kind(),
            Self::Kind(p) => p.kind(),
        }
    }

    async fn create(&self, name: &str) -> Result<AnyCluster, CreateError> {
        Ok(match self {
            Self::Local(p) => AnyCluster::Local(p.create(name).await?),
            Self::Kind(p) => AnyCluster::Kind(p.create(name).await?),
        })
    }
}

macro_rules! forward {
    ($self:ident, $c:ident => $call:expr) => {
        match $self {
            AnyCluster::Local($c) => $call,
            AnyCluster::Kind($c) => $call,
        }
    };
}

impl ProvidedCluster for AnyCluster {
    fn name(&self) -> &str {
        forward!(self, c => ProvidedCluster::name(c))
    }
    fn client(&self) -> Client {
        forward!(self, c => ProvidedCluster::client(c))
    }
    fn kubeconfig(&self) -> PathBuf {
        forward!(self, c => ProvidedCluster::kubeconfig(c))
    }
    fn k8s_version(&self) -> &str {
        forward!(self, c => ProvidedCluster::k8s_version(c))
    }
    fn node(&self) -> AnyNode {
        forward!(self, c => ProvidedCluster::node(c))
    }
    fn info(&self) -> ProviderInfo {
        forward!(self, c => ProvidedCluster::info(c))
    }
    fn node_ready(&self) -> Duration {
        forward!(self, c => ProvidedCluster::node_ready(c))
    }
    fn component_exits(&self) -> ExitLog {
        forward!(self, c => ProvidedCluster::component_exits(c))
    }
    async fn export_logs(&self, to: &Path) -> Result<(), String> {
        forward!(self, c => ProvidedCluster::export_logs(c, to).await)
    }
    async fn delete(self) -> Teardown {
        forward!(self, c => ProvidedCluster::delete(c).await)
    }
}
