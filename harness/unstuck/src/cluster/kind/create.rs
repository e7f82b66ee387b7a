//! Creating a kind cluster: `kind create cluster` with unstuck's
//! configuration, then the waits `kind` does not do; and `kind export logs`.

use std::{
    fs,
    path::Path,
    time::{Duration, Instant},
};

use kube::Client;

use super::{
    CLUSTER_CONFIG, ClusterError, KindNode, KindState, KindTimings, KindTools, io, node_container,
};
use crate::{cluster::readiness, wait};

/// The create itself: `kind create cluster`, the kubeconfig, node Ready,
/// the cluster's unstuck mark. [`KindCluster::up`] wraps its error in
/// [`ClusterError::Create`], naming kind's logs.
pub(super) async fn create(
    tools: &KindTools,
    state: &mut KindState,
    dir: &Path,
    timeout: Duration,
    started: Instant,
) -> Result<(Client, KindNode, KindTimings), ClusterError> {
    let config = dir.join("kind-config.yaml");
    fs::write(&config, CLUSTER_CONFIG).map_err(io(format!("writing {}", config.display())))?;
    let kubeconfig = dir.join("kubeconfig");
    let shown = crate::waiting::show(
        format!(
            "`kind create cluster` of '{}' (node container, kubeadm init)",
            state.name
        ),
        timeout,
    );
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
        .await?;
    let create = started.elapsed();
    state.volumes = tools
        .docker
        .container_volumes(&node_container(&state.name))
        .await?;
    state.save(dir)?;
    let client = crate::cluster::client::client_for(&kubeconfig).await?;
    let node_name = node_container(&state.name);
    let left = timeout.saturating_sub(started.elapsed());
    drop(shown);
    let _shown = crate::waiting::show(
        format!("node {node_name} to be Ready, then the default ServiceAccount"),
        left.max(Duration::from_secs(30)),
    );
    wait::until(
        format!("node {node_name} to be Ready"),
        left.max(Duration::from_secs(30)),
        Duration::from_millis(500),
        || readiness::node_ready(&client, &node_name),
    )
    .await?;
    let node_ready = started.elapsed();
    // kind is done at node Ready; pods are refused until the service
    // account controller has made `default` (as the local provider waits).
    wait::until(
        "the default ServiceAccount (pods are refused without it)",
        timeout
            .saturating_sub(started.elapsed())
            .max(Duration::from_secs(60)),
        Duration::from_millis(500),
        || readiness::default_service_account(&client),
    )
    .await?;
    wait::until(
        "marking the cluster as unstuck's",
        Duration::from_secs(30),
        Duration::from_millis(500),
        || readiness::marked(&client),
    )
    .await?;
    let node = KindNode::open(tools.docker.clone(), &node_name).await?;
    Ok((client, node, KindTimings { create, node_ready }))
}

pub(super) async fn export_logs(
    tools: &KindTools,
    state: &KindState,
    to: &Path,
) -> Result<(), ClusterError> {
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
