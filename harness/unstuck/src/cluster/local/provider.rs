//! The `local` provider behind [`Provider`], and its clusters behind
//! [`ProvidedCluster`].

use std::{path::Path, sync::Arc, time::Duration};

use futures::future::BoxFuture;
use kube::Client;

use super::{
    LocalCluster, LocalNode, UpOptions, admin,
    layout::Layout,
    process::Lifetime,
    state::{ClusterState, state_root},
    teardown::{TeardownReport, leftovers},
};
use crate::{
    cluster::{
        ClusterError,
        exits::ExitLog,
        provider::{
            ClusterStatus, CreateOptions, ProvidedCluster, Provider, ProviderInfo, ProviderKind,
            Teardown,
        },
    },
    node::AnyNode,
};

/// The `local` provider with the options every cluster starts from.
#[derive(Clone, Debug)]
pub struct LocalProvider(pub CreateOptions);

impl LocalProvider {
    fn up_options(&self, name: &str) -> UpOptions {
        let mut up = UpOptions::new(name);
        up.k8s_version = self.0.k8s_version.clone();
        up.lifetime = self.0.lifetime;
        if self.0.lifetime == Lifetime::Owned {
            up.reaper = self.0.reaper.clone();
        }
        if let Some(t) = self.0.timeout {
            up.timeout = t;
        }
        up
    }
}

/// A teardown as the interface reports it: the components' teardown and
/// whatever is still on the machine afterwards.
fn teardown(report: TeardownReport, layout: Option<&Layout>) -> Teardown {
    let mut problems = report.errors.clone();
    problems.extend(layout.map(leftovers).unwrap_or_default());
    Teardown {
        summary: report.to_string(),
        problems,
    }
}

impl Provider for LocalProvider {
    fn kind(&self) -> ProviderKind {
        ProviderKind::Local
    }

    fn create<'a>(
        &'a self,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Box<dyn ProvidedCluster>, ClusterError>> {
        Box::pin(async move {
            let cluster = LocalCluster::up(self.up_options(name)).await?;
            Ok(Box::new(cluster) as Box<dyn ProvidedCluster>)
        })
    }

    fn list(&self) -> Vec<ClusterStatus> {
        admin::list()
            .into_iter()
            .map(|c| ClusterStatus {
                provider: ProviderKind::Local,
                detail: c.slot.map_or("slot ?".into(), |s| format!("slot {s}")),
                node_access: format!(
                    "this machine (component logs in {})",
                    c.dir.join("logs").display()
                ),
                name: c.name,
                k8s_version: c.k8s_version,
                stale: c.stale,
                kubeconfig: c.kubeconfig,
                components: c.components,
            })
            .collect()
    }

    fn delete<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Teardown, ClusterError>> {
        Box::pin(async move {
            // The layout names what to look for afterwards; a record that
            // cannot be read still gets its directory torn down, and the
            // directory itself is what is checked then.
            crate::cluster::name::validate_name(name)?;
            let layout = match ClusterState::load(&state_root().join(name)) {
                Ok(state) => state.map(|s| s.layout),
                Err(e) => {
                    tracing::warn!("{e}; tearing '{name}' down by its directory alone");
                    None
                }
            };
            let report = admin::down(name).await?;
            Ok(teardown(report, layout.as_ref()))
        })
    }

    fn sweep_stale(&self) -> BoxFuture<'_, Result<Vec<(String, Teardown)>, ClusterError>> {
        Box::pin(async move {
            Ok(admin::sweep_stale()
                .await?
                .into_iter()
                .map(|(name, report)| (name, teardown(report, None)))
                .collect())
        })
    }

    fn reap<'a>(&'a self, record: &'a Path) -> BoxFuture<'a, Option<Teardown>> {
        Box::pin(async move { admin::reap(record).await.map(|r| teardown(r, None)) })
    }

    fn node<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Arc<AnyNode>, ClusterError>> {
        Box::pin(async move {
            let node = LocalNode::open(name).map_err(|source| ClusterError::Node {
                provider: ProviderKind::Local,
                name: name.to_string(),
                source,
            })?;
            Ok(Arc::new(node) as Arc<AnyNode>)
        })
    }
}

impl ProvidedCluster for LocalCluster {
    fn name(&self) -> &str {
        &self.layout().name
    }
    fn client(&self) -> Client {
        LocalCluster::client(self)
    }
    fn kubeconfig(&self) -> std::path::PathBuf {
        LocalCluster::kubeconfig(self)
    }
    fn k8s_version(&self) -> &str {
        LocalCluster::k8s_version(self)
    }
    fn node(&self) -> Arc<AnyNode> {
        Arc::new(LocalNode::of(self))
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
    fn describe(&self) -> Vec<String> {
        vec![
            format!("logs: {}", self.layout().logs_dir().display()),
            format!(
                "node: this machine (kubelet root {})",
                self.layout().kubelet_dir().display()
            ),
        ]
    }
    fn export_logs<'a>(&'a self, to: &'a Path) -> BoxFuture<'a, Result<(), ClusterError>> {
        Box::pin(async move {
            let from = self.layout().logs_dir();
            let err = |from: &Path| {
                let (from, to) = (from.to_path_buf(), to.to_path_buf());
                move |source| ClusterError::Logs { from, to, source }
            };
            std::fs::create_dir_all(to).map_err(err(&from))?;
            for entry in std::fs::read_dir(&from).map_err(err(&from))? {
                let path = entry.map_err(err(&from))?.path();
                let Some(file) = path.file_name() else {
                    continue;
                };
                std::fs::copy(&path, to.join(file)).map_err(err(&path))?;
            }
            Ok(())
        })
    }
    fn delete(self: Box<Self>) -> BoxFuture<'static, Teardown> {
        Box::pin(async move {
            let layout = self.layout().clone();
            let report = self.down().await;
            teardown(report, Some(&layout))
        })
    }
}
