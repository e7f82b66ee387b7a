//! The `kind` provider behind [`Provider`], and its clusters behind
//! [`ProvidedCluster`].

use std::{
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use futures::future::BoxFuture;
use kube::Client;

use super::{KindCluster, KindNode, KindOptions, node_container, teardown};
use crate::docker::Docker;
use crate::{
    cluster::{
        ClusterError,
        exits::ExitLog,
        provider::{
            ClusterStatus, CreateOptions, Lifetime, ProvidedCluster, Provider, ProviderInfo,
            ProviderKind, Teardown,
        },
    },
    node::AnyNode,
};

/// The `kind` provider with the options every cluster starts from.
#[derive(Clone, Debug)]
pub struct KindProvider(pub CreateOptions);

impl KindProvider {
    fn kind_options(&self, name: &str) -> KindOptions {
        let mut opts = KindOptions::new(name, &self.0.k8s_version);
        if let Some(t) = self.0.timeout {
            // `kind create cluster` alone takes a minute on a loaded machine.
            opts.timeout = t.max(Duration::from_secs(120));
        }
        if self.0.lifetime == Lifetime::Owned {
            opts.reaper = self.0.reaper.clone();
        }
        opts
    }
}

fn teardown_of(name: &str, problems: Vec<String>) -> Teardown {
    Teardown {
        summary: format!(
            "kind cluster '{name}' deleted with its containers, volumes, network and record"
        ),
        problems,
    }
}

impl Provider for KindProvider {
    fn kind(&self) -> ProviderKind {
        ProviderKind::Kind
    }

    fn info(&self) -> ProviderInfo {
        ProviderInfo {
            name: ProviderKind::Kind,
            node_image: Some(super::node_image(&self.0.k8s_version)),
        }
    }

    fn create<'a>(
        &'a self,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Box<dyn ProvidedCluster>, ClusterError>> {
        Box::pin(async move {
            let cluster = KindCluster::up(self.kind_options(name)).await?;
            Ok(Box::new(cluster) as Box<dyn ProvidedCluster>)
        })
    }

    fn list(&self) -> Vec<ClusterStatus> {
        super::list()
            .into_iter()
            .map(|c| ClusterStatus {
                provider: ProviderKind::Kind,
                detail: c.image,
                node_access: format!("docker exec -it {} bash", node_container(&c.name)),
                name: c.name,
                k8s_version: Some(c.k8s_version),
                stale: c.stale,
                kubeconfig: c.kubeconfig,
                components: Vec::new(),
            })
            .collect()
    }

    fn delete<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Teardown, ClusterError>> {
        Box::pin(async move { Ok(teardown_of(name, teardown::down(name).await?)) })
    }

    fn sweep_stale(&self) -> BoxFuture<'_, Result<Vec<(String, Teardown)>, ClusterError>> {
        Box::pin(async move {
            Ok(teardown::sweep_stale()
                .await
                .into_iter()
                .map(|(name, problems)| {
                    let t = teardown_of(&name, problems);
                    (name, t)
                })
                .collect())
        })
    }

    fn reap<'a>(&'a self, record: &'a Path) -> BoxFuture<'a, Option<Teardown>> {
        Box::pin(async move {
            let (name, problems) = teardown::reap(record).await?;
            Some(teardown_of(&name, problems))
        })
    }

    fn node<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Arc<AnyNode>, ClusterError>> {
        Box::pin(async move {
            if super::list().iter().all(|c| c.name != name) {
                return Err(ClusterError::NotFound {
                    provider: ProviderKind::Kind,
                    name: name.to_string(),
                });
            }
            let node = KindNode::open(Docker::default(), &node_container(name))
                .await
                .map_err(|source| ClusterError::Node {
                    provider: ProviderKind::Kind,
                    name: name.to_string(),
                    source,
                })?;
            Ok(Arc::new(node) as Arc<AnyNode>)
        })
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
    fn node(&self) -> Arc<AnyNode> {
        Arc::new(KindCluster::node(self).clone())
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
    fn describe(&self) -> Vec<String> {
        vec![
            format!(
                "node image {}, `kind create` {:.1}s",
                self.image(),
                self.timings.create.as_secs_f64()
            ),
            format!("node: docker exec -it {} bash", self.node().container()),
        ]
    }
    fn export_logs<'a>(&'a self, to: &'a Path) -> BoxFuture<'a, Result<(), ClusterError>> {
        Box::pin(KindCluster::export_logs(self, to))
    }
    fn delete(self: Box<Self>) -> BoxFuture<'static, Teardown> {
        Box::pin(async move {
            let name = KindCluster::name(&self).to_string();
            let problems = self.down().await;
            teardown_of(&name, problems)
        })
    }
}
