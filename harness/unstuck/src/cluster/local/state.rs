//! The record a local cluster keeps in its own directory: enough to find
//! and remove everything it made, by a later `down`, by its reaper after a
//! crash, or by the stale-cluster sweep of the next run.

use std::{
    fs,
    path::{Path, PathBuf},
};

use serde::{Deserialize, Serialize};

use super::layout::{Layout, MAX_SLOTS};
use crate::cluster::ClusterError;
use crate::node::ProcRef;

/// A component of the cluster and its live process.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ComponentProcess {
    pub name: String,
    #[serde(flatten)]
    pub process: ProcRef,
}

/// What `state.json` holds.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ClusterState {
    pub layout: Layout,
    pub k8s_version: String,
    pub created_at: String,
    /// The harness process that owns an ephemeral cluster; `None` for a
    /// cluster made by `unstuck cluster up`, which lives until `down`.
    pub owner: Option<ProcRef>,
    /// The process that ran `up`, written in the record before anything
    /// else exists. While it runs, the cluster is its claim: a detached
    /// cluster has no live apiserver while it boots, and another run's
    /// sweep must not take that for a dead cluster. `None` in records
    /// written before it was kept.
    #[serde(default)]
    pub creator: Option<ProcRef>,
    pub components: Vec<ComponentProcess>,
}

impl ClusterState {
    pub fn load(dir: &Path) -> Result<Option<Self>, ClusterError> {
        let path = dir.join("state.json");
        let text = match fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(ClusterError::StateIo {
                    action: "read",
                    path,
                    source,
                });
            }
        };
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        serde_json::from_str(&text)
            .map(Some)
            .map_err(|source| ClusterError::StateCorrupt { path, name, source })
    }

    /// Written atomically (temp file + rename) so a crash never leaves half a record.
    pub fn save(&self) -> Result<(), ClusterError> {
        let path = self.layout.state_file();
        let tmp = path.with_extension("json.tmp");
        let text = serde_json::to_string_pretty(self).expect("state serializes");
        fs::write(&tmp, text).map_err(|source| ClusterError::StateIo {
            action: "write",
            path: tmp.clone(),
            source,
        })?;
        fs::rename(&tmp, &path).map_err(|source| ClusterError::StateIo {
            action: "rename",
            path,
            source,
        })
    }

    /// Stale (the sweep's rule): its owner died, or, for a detached
    /// cluster, the process that created it has ended and its apiserver
    /// is gone. A cluster is never stale while its creator runs: that
    /// process is still bringing it up, and tears it down itself if that
    /// fails. A PID alone proves nothing (PIDs are reused): every check
    /// is of the PID *and* the start time the record holds.
    pub fn is_stale(&self) -> bool {
        if self.creator.as_ref().is_some_and(ProcRef::is_alive) {
            return false;
        }
        match &self.owner {
            Some(owner) => !owner.is_alive(),
            None => !self
                .components
                .iter()
                .any(|c| c.name == "kube-apiserver" && c.process.is_alive()),
        }
    }
}

/// The file a teardown creates in a cluster's directory before it stops
/// anything: the cluster's supervisor restarts nothing from then on.
const TEARING_DOWN: &str = "tearing-down";

/// Marks `dir` as being torn down (see [`is_tearing_down`]).
pub fn mark_tearing_down(dir: &Path) -> std::io::Result<()> {
    fs::write(dir.join(TEARING_DOWN), b"")
}

pub fn is_tearing_down(dir: &Path) -> bool {
    dir.join(TEARING_DOWN).exists()
}

/// Records `process` as the live process of component `name` in the
/// state of the cluster in `dir`. Read, changed and written under a lock
/// of the cluster's own, as the supervisor and a node fault may both
/// restart a component of one cluster at once.
pub fn record_component(dir: &Path, name: &str, process: ProcRef) -> Result<(), ClusterError> {
    let _lock = exclusive_lock(&dir.join(".state.lock"))?;
    let Some(mut st) = ClusterState::load(dir)? else {
        return Err(ClusterError::StateIo {
            action: "read",
            path: dir.join("state.json"),
            source: std::io::ErrorKind::NotFound.into(),
        });
    };
    match st.components.iter_mut().find(|c| c.name == name) {
        Some(c) => c.process = process,
        None => st.components.push(ComponentProcess {
            name: name.into(),
            process,
        }),
    }
    st.save()
}

/// The root under which every local cluster has its directory.
pub fn state_root() -> PathBuf {
    crate::cluster::state_dir(None)
}

/// Every cluster directory under `root`, with its state when readable.
pub fn list(root: &Path) -> Vec<(PathBuf, Result<Option<ClusterState>, ClusterError>)> {
    let Ok(entries) = fs::read_dir(root) else {
        return Vec::new();
    };
    let mut dirs: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs.into_iter()
        .map(|d| {
            let s = ClusterState::load(&d);
            (d, s)
        })
        .collect()
}

/// An exclusive lock on the state root, held while slots are handed out.
pub struct RootLock {
    _file: fs::File,
}

pub fn lock_root(root: &Path) -> Result<RootLock, ClusterError> {
    fs::create_dir_all(root).map_err(|source| ClusterError::StateIo {
        action: "create",
        path: root.to_path_buf(),
        source,
    })?;
    Ok(RootLock {
        _file: exclusive_lock(&root.join(".lock"))?,
    })
}

/// Opens (creating) `path` and takes an exclusive lock on it, held until
/// the file is dropped.
fn exclusive_lock(path: &Path) -> Result<fs::File, ClusterError> {
    let file = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|source| ClusterError::StateIo {
            action: "open",
            path: path.to_path_buf(),
            source,
        })?;
    file.lock().map_err(|source| ClusterError::StateIo {
        action: "lock",
        path: path.to_path_buf(),
        source,
    })?;
    Ok(file)
}

/// The lowest slot no existing cluster directory claims.
pub fn free_slot(used: &[u8]) -> Result<u8, ClusterError> {
    (0..MAX_SLOTS)
        .find(|s| !used.contains(s))
        .ok_or(ClusterError::NoFreeSlot)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lowest_unused_slot_is_taken() {
        assert_eq!(free_slot(&[]).unwrap(), 0);
        assert_eq!(free_slot(&[0, 1, 3]).unwrap(), 2);
        let all: Vec<u8> = (0..MAX_SLOTS).collect();
        assert!(matches!(free_slot(&all), Err(ClusterError::NoFreeSlot)));
    }

    #[test]
    fn a_cluster_whose_owner_died_is_stale() {
        let layout = Layout::new("x", 0, Path::new("/tmp"));
        let me = ProcRef::of_pid(std::process::id() as i32).unwrap();
        let mut s = ClusterState {
            layout,
            k8s_version: "v1".into(),
            created_at: String::new(),
            owner: Some(me.clone()),
            creator: None,
            components: vec![],
        };
        assert!(!s.is_stale());
        s.owner = Some(ProcRef {
            start_time: me.start_time + 7,
            ..me
        });
        assert!(s.is_stale());
        s.owner = None;
        assert!(
            s.is_stale(),
            "a detached cluster without a live apiserver is stale"
        );
    }

    #[test]
    fn a_cluster_being_brought_up_is_its_creators_until_that_process_ends() {
        let me = ProcRef::of_pid(std::process::id() as i32).unwrap();
        let gone = ProcRef {
            start_time: me.start_time + 7,
            ..me.clone()
        };
        let mut s = ClusterState {
            layout: Layout::new("x", 0, Path::new("/tmp")),
            k8s_version: "v1".into(),
            created_at: String::new(),
            owner: None,
            creator: Some(me.clone()),
            components: vec![],
        };
        assert!(
            !s.is_stale(),
            "a detached cluster with no apiserver yet, whose `cluster up` still runs, is not stale"
        );
        s.owner = Some(gone.clone());
        assert!(
            !s.is_stale(),
            "the creator's claim holds while it runs, whoever will own the cluster"
        );
        s.creator = Some(gone.clone());
        assert!(s.is_stale(), "a creator that ended leaves the owner's rule");
        s.owner = None;
        assert!(
            s.is_stale(),
            "a detached cluster whose creator ended with no apiserver up is stale"
        );
    }

    #[test]
    fn a_record_from_before_the_creator_was_kept_still_loads() {
        let dir = std::env::temp_dir().join(format!("unstuck-old-record-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let layout = Layout::new("old", 3, &dir);
        let mut v = serde_json::to_value(ClusterState {
            layout,
            k8s_version: "v1.34.4".into(),
            created_at: "2026-11-01T00:00:00Z".into(),
            owner: None,
            creator: None,
            components: vec![],
        })
        .unwrap();
        v.as_object_mut().unwrap().remove("creator");
        std::fs::write(dir.join("state.json"), serde_json::to_string(&v).unwrap()).unwrap();
        let st = ClusterState::load(&dir).unwrap().unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(st.creator, None);
        assert_eq!(st.layout.slot, 3);
    }
}
