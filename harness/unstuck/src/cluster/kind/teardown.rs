//! Deleting a kind cluster unstuck made, and making sure of it: the
//! delete itself, the leftover check, `unstuck cluster down/gc`, and the
//! reaper that deletes a cluster whose harness died without doing so.

use std::{
    fs,
    io::Read as _,
    os::unix::process::CommandExt as _,
    path::Path,
    process::{Child, ChildStdin, Stdio},
    time::Duration,
};

use super::{CLUSTER_LABEL, ClusterError, KindState, KindTools, io, kind_root, list};
use crate::docker::Docker;

/// Deletes what the record names; each part is attempted even when an
/// earlier one failed, and the record goes last (only when all went).
pub(super) async fn delete(tools: &KindTools, state: &KindState, dir: &Path) -> Vec<String> {
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
    // The record itself is removed below, once nothing else is left.
    let left = leftovers(&tools.docker, state, None).await;
    errors.extend(left.into_iter().map(|l| format!("still there: {l}")));
    if errors.is_empty()
        && let Err(e) = fs::remove_dir_all(dir)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        errors.push(format!("removing {}: {e}", dir.display()));
    }
    errors
}

/// What is still there of the cluster: containers, network, the node's
/// volumes, and (when `dir` is given) its record.
pub(super) async fn leftovers(
    docker: &Docker,
    state: &KindState,
    dir: Option<&Path>,
) -> Vec<String> {
    let mut left = Vec::new();
    match docker.containers_labelled(CLUSTER_LABEL, &state.name).await {
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
    if let Some(dir) = dir.filter(|d| d.exists()) {
        left.push(format!("record {}", dir.display()));
    }
    left
}

/// Deletes the named kind cluster unstuck made (also by another process).
pub async fn down(name: &str) -> Result<Vec<String>, ClusterError> {
    crate::cluster::name::validate_name(name)?;
    let dir = kind_root().join(name);
    let state = KindState::load(&dir)?.ok_or_else(|| ClusterError::NotFound {
        provider: crate::cluster::provider::ProviderKind::Kind,
        name: name.into(),
    })?;
    let tools = KindTools::locate(&state.k8s_version)
        .await
        .or_else(|e| match e {
            // Deleting needs kind and Docker, not the image.
            ClusterError::ImageMissing { .. } => Ok(KindTools {
                kind: super::kind_cli(),
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

pub(super) fn spawn_reaper(
    program: &Path,
    dir: &Path,
) -> Result<(Child, ChildStdin), ClusterError> {
    let log = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("reaper.log"))
        .map_err(io("opening the reaper log"))?;
    let mut child = std::process::Command::new(program)
        .args(["__reap", "--provider", "kind"])
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

/// The reaper's body (`unstuck __reap --provider kind DIR`): wait until
/// the harness lets go of our stdin, then delete the cluster if its record
/// is still there (the harness did not get to it). Its name and problems.
pub async fn reap(dir: &Path) -> Option<(String, Vec<String>)> {
    let mut sink = [0u8; 64];
    let mut stdin = std::io::stdin();
    while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
    let state = match KindState::load(dir) {
        Ok(state) => state?,
        Err(e) => {
            tracing::warn!("reaper: {e}; nothing deleted");
            return None;
        }
    };
    let errors = down(&state.name)
        .await
        .unwrap_or_else(|e| vec![e.to_string()]);
    tracing::info!(
        "reaper: harness gone; deleted kind cluster '{}'{}",
        state.name,
        if errors.is_empty() {
            String::new()
        } else {
            format!(" with problems: {}", errors.join("; "))
        }
    );
    Some((state.name, errors))
}
