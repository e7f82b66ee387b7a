//! kube-controller-manager's own view of its namespace workqueue, read from
//! its `/metrics` on a local cluster unstuck made: the one place that says
//! whether the namespace controller is stuck, idle or absent.
//!
//! Only ever loopback: the port is the cluster's layout's, the host is
//! 127.0.0.1. The admin client certificate is accepted there (delegated
//! authentication and authorization through the API server). The serving
//! certificate is one kube-controller-manager made for itself at start,
//! signed by nothing the kubeconfig knows, so it cannot be verified; on a
//! loopback port of a cluster this machine runs that costs nothing.

use std::{net::Ipv4Addr, path::Path, time::Duration};

use kube::Client;
use unstuck_core::doctor::namespace_stall::{ControllerManagerMetrics, parse_namespace_queue};

use crate::cluster::local::state::{ClusterState, state_root};

/// A stopped process accepts the connection (the kernel does) and never
/// answers; this bounds how long the doctor waits for it.
pub const TIMEOUT: Duration = Duration::from_secs(3);

/// Reads the namespace workqueue of local cluster `cluster`'s
/// kube-controller-manager. Never fails: what went wrong is recorded in
/// the result.
pub async fn read(cluster: &str) -> ControllerManagerMetrics {
    let dir = state_root().join(cluster);
    let layout = match ClusterState::load(&dir) {
        Ok(Some(st)) => st.layout,
        Ok(None) => {
            return unreadable(
                String::new(),
                format!("no local cluster named '{cluster}' ({})", dir.display()),
            );
        }
        Err(e) => return unreadable(String::new(), e.to_string()),
    };
    let port = layout.controller_manager_port();
    read_at(&layout.admin_kubeconfig(), port).await
}

/// Reads `https://127.0.0.1:<port>/metrics` with the client identity of
/// `kubeconfig`.
pub async fn read_at(kubeconfig: &Path, port: u16) -> ControllerManagerMetrics {
    let endpoint = endpoint(port);
    match fetch_text(kubeconfig, port).await {
        Ok(text) => ControllerManagerMetrics {
            namespace_queue: parse_namespace_queue(&text),
            endpoint,
            error: None,
        },
        Err(e) => unreadable(endpoint, e.to_string()),
    }
}

fn endpoint(port: u16) -> String {
    format!("https://{}:{port}/metrics", Ipv4Addr::LOCALHOST)
}

/// Why the metrics could not be read.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    #[error("no answer within {} s (timed out)", TIMEOUT.as_secs())]
    TimedOut,
    #[error("reading kubeconfig: {0}")]
    Kubeconfig(#[from] kube::config::KubeconfigError),
    #[error("endpoint {}: {source}", crate::text::quoted(.endpoint))]
    Endpoint {
        endpoint: String,
        #[source]
        source: http::uri::InvalidUri,
    },
    #[error("building the request: {0}")]
    Request(#[from] http::Error),
    #[error("{}", crate::kube_error::text(.0))]
    Kube(#[from] kube::Error),
}

/// The metrics text itself, within [`TIMEOUT`].
pub async fn fetch_text(kubeconfig: &Path, port: u16) -> Result<String, MetricsError> {
    match tokio::time::timeout(TIMEOUT, fetch(kubeconfig, &endpoint(port))).await {
        Ok(r) => r,
        Err(_) => Err(MetricsError::TimedOut),
    }
}

fn unreadable(endpoint: String, error: String) -> ControllerManagerMetrics {
    ControllerManagerMetrics {
        endpoint,
        error: Some(error),
        namespace_queue: None,
    }
}

async fn fetch(kubeconfig: &Path, endpoint: &str) -> Result<String, MetricsError> {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig)?;
    let mut cfg =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await?;
    cfg.cluster_url = endpoint
        .trim_end_matches("/metrics")
        .parse()
        .map_err(|source| MetricsError::Endpoint {
            endpoint: endpoint.to_owned(),
            source,
        })?;
    // Self-signed at its start: see the module comment.
    cfg.accept_invalid_certs = true;
    cfg.root_cert = None;
    cfg.tls_server_name = None;
    cfg.proxy_url = None;
    cfg.default_retry = false;
    cfg.connect_timeout = Some(TIMEOUT);
    cfg.read_timeout = Some(TIMEOUT);
    let client = Client::try_from(cfg)?;
    let req = http::Request::get("/metrics").body(Vec::new())?;
    Ok(client.request_text(req).await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_unknown_cluster_is_recorded_not_dialled() {
        let m = read("unstuck-no-such-cluster").await;
        assert!(m.endpoint.is_empty(), "{m:?}");
        assert!(
            m.error
                .as_deref()
                .is_some_and(|e| e.contains("no local cluster named 'unstuck-no-such-cluster'")),
            "{m:?}"
        );
        assert_eq!(m.namespace_queue, None);
    }

    #[tokio::test]
    async fn a_closed_loopback_port_is_recorded_as_unreadable() {
        // Bind and drop: the port is then (almost surely) closed.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let dir = std::env::temp_dir().join(format!("unstuck-kcm-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let kc = dir.join("kubeconfig");
        std::fs::write(
            &kc,
            "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\nusers: [{name: u, user: {}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n",
        )
        .unwrap();
        let m = read_at(&kc, port).await;
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(m.endpoint, format!("https://127.0.0.1:{port}/metrics"));
        assert!(m.error.is_some(), "{m:?}");
        assert_eq!(m.namespace_queue, None);
    }
}
