//! The local clusters on this machine, whoever made them: listing,
//! deleting by name, sweeping those whose harness died, and the reaper.

use std::{
    io::Read,
    path::{Path, PathBuf},
};

use super::{
    ClusterError, preflight,
    state::{self, ClusterState},
    teardown::{self, TeardownReport},
};

/// The reaper's body (`unstuck __reap --provider local DIR`): wait until the harness lets go
/// of our stdin — by `down`, by exiting, or by being killed — then tear the
/// cluster down if it is still there.
pub async fn reap(dir: &Path) -> Option<TeardownReport> {
    let mut sink = [0u8; 64];
    let mut stdin = std::io::stdin();
    while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
    if !dir.join("state.json").exists() {
        return None;
    }
    let report = teardown::teardown(dir).await;
    tracing::info!("reaper: harness gone; {report}");
    Some(report)
}

/// Tears down clusters whose owner died. Returns their names and reports.
pub async fn sweep_stale() -> Result<Vec<(String, TeardownReport)>, ClusterError> {
    let root = state::state_root();
    let _lock = state::lock_root(&root)?;
    Ok(sweep_stale_locked(&root).await)
}

pub(super) async fn sweep_stale_locked(root: &Path) -> Vec<(String, TeardownReport)> {
    let mut swept = Vec::new();
    for (dir, st) in state::list(root) {
        let stale = match st {
            Ok(Some(s)) => s.is_stale(),
            // A directory without a readable record is a crash mid-`up`.
            Ok(None) | Err(_) => true,
        };
        if stale {
            let name = dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let report = teardown::teardown(&dir).await;
            tracing::info!("removed stale cluster '{name}': {report}");
            swept.push((name, report));
        }
    }
    swept
}

/// A cluster as `unstuck cluster list/status` show it.
#[derive(Debug, serde::Serialize)]
pub struct LocalStatus {
    pub name: String,
    pub dir: PathBuf,
    pub slot: Option<u8>,
    pub k8s_version: Option<String>,
    pub stale: bool,
    pub components: Vec<(String, bool)>,
    pub kubeconfig: PathBuf,
}

pub fn list() -> Vec<LocalStatus> {
    state::list(&state::state_root())
        .into_iter()
        .map(|(dir, st)| {
            let name = dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let st = st.ok().flatten();
            LocalStatus {
                kubeconfig: dir.join("admin.kubeconfig"),
                slot: st.as_ref().map(|s| s.layout.slot),
                k8s_version: st.as_ref().map(|s| s.k8s_version.clone()),
                stale: st.as_ref().is_none_or(ClusterState::is_stale),
                components: st
                    .map(|s| {
                        s.components
                            .iter()
                            .map(|c| (c.name.clone(), c.process.is_alive()))
                            .collect()
                    })
                    .unwrap_or_default(),
                name,
                dir,
            }
        })
        .collect()
}

/// Tears down the named cluster (also one made by another process).
pub async fn down(name: &str) -> Result<TeardownReport, ClusterError> {
    crate::cluster::name::validate_name(name)?;
    preflight::check_root()?;
    let dir = state::state_root().join(name);
    if !dir.exists() {
        return Err(ClusterError::NotFound {
            provider: crate::cluster::provider::ProviderKind::Local,
            name: name.to_string(),
        });
    }
    Ok(teardown::teardown(&dir).await)
}
