//! The record of a kind cluster unstuck made (`<kind_root>/<name>/state.json`):
//! what it is, who owns it and what it made, so the harness, its reaper,
//! `unstuck cluster list/gc` and the leftover check agree on it.

use std::{
    fs,
    path::{Path, PathBuf},
};

use serde::{Deserialize, Serialize};

use super::{ClusterError, io, kind_root};
use crate::node::ProcRef;

/// What `state.json` of a kind cluster holds.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct KindState {
    pub name: String,
    pub k8s_version: String,
    pub image: String,
    pub network: String,
    pub created_at: String,
    /// The harness that owns a throwaway cluster; `None` for a kept one.
    pub owner: Option<ProcRef>,
    /// The node container's volumes (kind's anonymous `/var`), once known.
    #[serde(default)]
    pub volumes: Vec<String>,
}

impl KindState {
    fn path(dir: &Path) -> PathBuf {
        dir.join("state.json")
    }

    pub fn load(dir: &Path) -> Result<Option<Self>, ClusterError> {
        let path = Self::path(dir);
        match fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str(&text)
                .map(Some)
                .map_err(|source| ClusterError::KindState { path, source }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io(format!("reading {}", path.display()))(e)),
        }
    }

    pub(super) fn save(&self, dir: &Path) -> Result<(), ClusterError> {
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
        .filter_map(|dir| match KindState::load(&dir) {
            Ok(st) => {
                let st = st?;
                Some(KindStatus {
                    name: st.name.clone(),
                    kubeconfig: dir.join("kubeconfig"),
                    k8s_version: st.k8s_version.clone(),
                    image: st.image.clone(),
                    stale: st.is_stale(),
                    dir,
                })
            }
            Err(e) => {
                // Listed for a person to look at; `gc` leaves it, as it
                // cannot tell what the record would have named.
                tracing::warn!("{e}");
                Some(KindStatus {
                    name: dir
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default(),
                    kubeconfig: dir.join("kubeconfig"),
                    k8s_version: "?".into(),
                    image: "(record unreadable)".into(),
                    stale: false,
                    dir,
                })
            }
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}
