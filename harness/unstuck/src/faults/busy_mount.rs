//! Busy volume mount (catalog case 4, seeds 003 and 004).
//!
//! A tmpfs is mounted on a new directory inside one of the pod's volume
//! directories (an emptyDir by default): a nested mount nobody on the node
//! will remove. When the pod is deleted, the v1.34 kubelet's emptyDir
//! TearDown (`os.RemoveAll` of the volume directory) fails on it with
//!
//! ```text
//! UnmountVolume.TearDown failed for volume "data" (UniqueName: "kubernetes.io/empty-dir/<uid>-data") pod "<uid>" (UID: "<uid>") : unlinkat <kubelet>/pods/<uid>/volumes/kubernetes.io~empty-dir/data/.unstuck-busy: device or resource busy
//! ```
//!
//! retried with a backoff doubling up to 2m2s, and the pod stays in the
//! API past its grace period (phase Succeeded, containers gone), exactly
//! as seed 004's `device or resource busy`. Optionally a process keeps its
//! working directory inside the mount, as the stray glusterfs process did
//! in seed 003: then a plain unmount of the nested mount fails too
//! ("target is busy") until the process is stopped, which is what makes
//! the doctor's ladder (release the holder, then lazy unmount) real.

use std::path::PathBuf;

use kube::Client;
use serde::{Deserialize, Serialize};

use super::{FaultError, Injected, PodTarget, target_pod};
use crate::node::{Node, ProcRef};

/// The directory created inside the volume, and mounted over.
pub const BUSY_DIR: &str = ".unstuck-busy";
/// The tmpfs's source name, so the mount table says who made it.
pub const MOUNT_LABEL: &str = "unstuck-busy";
/// `argv[0]` of the holder process's shell (`$0`), for `ps`.
pub const HOLDER_NAME: &str = "unstuck-busy-holder";

/// How to make the volume busy.
#[derive(Clone, Debug, Default)]
pub struct BusyMountOptions {
    /// The pod volume to use (its name in the pod spec); default: the
    /// first emptyDir, else the first volume of any plugin.
    pub volume: Option<String>,
    /// Also start a process whose working directory is inside the nested
    /// mount (seed 003's stray process).
    pub holder: bool,
}

/// A busy mount in place.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BusyMount {
    pub pod: PodTarget,
    /// The volume's plugin directory name, e.g. `kubernetes.io~empty-dir`.
    pub plugin_dir: String,
    pub volume: String,
    /// `<kubelet>/pods/<uid>/volumes/<plugin>/<volume>`.
    pub volume_dir: PathBuf,
    /// The nested mount point inside it.
    pub mount_point: PathBuf,
    /// The holder process, when one was started.
    pub holder: Option<ProcRef>,
}

/// Makes one of the pod's volumes busy. The pod must run on `node`.
pub async fn inject(
    client: &Client,
    node: &impl Node,
    namespace: &str,
    name: &str,
    opts: &BusyMountOptions,
) -> Result<Injected, FaultError> {
    let (pod, _) = target_pod(client, node, namespace, name).await?;
    let volumes_dir = node
        .kubelet_dir()
        .join("pods")
        .join(&pod.uid)
        .join("volumes");
    let mut candidates = Vec::new();
    for plugin in node.list_dir(&volumes_dir).await? {
        for vol in node.list_dir(&volumes_dir.join(&plugin)).await? {
            candidates.push((plugin.clone(), vol));
        }
    }
    let chosen = match &opts.volume {
        Some(v) => candidates.iter().find(|(_, vol)| vol == v),
        None => candidates
            .iter()
            .find(|(p, _)| p == "kubernetes.io~empty-dir")
            .or_else(|| candidates.first()),
    };
    let Some((plugin_dir, volume)) = chosen.cloned() else {
        return Err(FaultError::NoVolume {
            pod: pod.to_string(),
            dir: volumes_dir.display().to_string(),
            hint: match &opts.volume {
                Some(v) => format!(" named {v:?} (found: {candidates:?})"),
                None => String::new(),
            },
        });
    };
    let volume_dir = volumes_dir.join(&plugin_dir).join(&volume);
    let mount_point = volume_dir.join(BUSY_DIR);
    node.make_dir(&mount_point).await?;
    let mut busy = BusyMount {
        pod,
        plugin_dir,
        volume,
        volume_dir,
        mount_point,
        holder: None,
    };
    if let Err(e) = node.mount_tmpfs(&busy.mount_point, MOUNT_LABEL).await {
        let _ = node.remove_dir(&busy.mount_point).await;
        return Err(e.into());
    }
    if opts.holder {
        let argv: Vec<String> = vec![
            "sh".into(),
            "-c".into(),
            // The sleeps share the cwd; revert kills the whole group.
            r#"cd "$1" || exit 1; while :; do sleep 1; done"#.into(),
            HOLDER_NAME.into(),
            busy.mount_point.display().to_string(),
        ];
        match node.start_background(&argv).await {
            Ok(p) => busy.holder = Some(p),
            Err(e) => {
                let _ = busy.revert(node).await;
                return Err(e.into());
            }
        }
    }
    // The fault is only real if the mount is there.
    let mounted = node
        .mounts()
        .await?
        .iter()
        .any(|m| m.mount_point == busy.mount_point);
    if !mounted {
        let _ = busy.revert(node).await;
        return Err(FaultError::NotInjected(format!(
            "{} is not in the mount table after mounting",
            busy.mount_point.display()
        )));
    }
    Ok(Injected::BusyMount(busy))
}

impl BusyMount {
    pub fn describe(&self) -> String {
        format!(
            "busy mount: tmpfs {MOUNT_LABEL} on {} inside volume {:?} of pod {}{}",
            self.mount_point.display(),
            self.volume,
            self.pod,
            self.holder
                .as_ref()
                .map(|h| format!(", held by process {} (cwd inside)", h.pid))
                .unwrap_or_default()
        )
    }

    /// Stops the holder (its whole process group), unmounts the nested
    /// mount (lazily if a plain unmount stays busy) and removes the
    /// directory. Each part is skipped when already undone.
    pub async fn revert(&self, node: &impl Node) -> Result<Vec<String>, FaultError> {
        let mut done = Vec::new();
        if let Some(h) = &self.holder {
            let procs = node.processes().await?;
            if h.find(&procs).is_some() {
                // Negative pid: the holder leads its own group (setsid).
                node.signal(-h.pid, libc::SIGKILL).await?;
                for _ in 0..50 {
                    if h.find(&node.processes().await?).is_none() {
                        break;
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
                done.push(format!("killed holder process group {}", h.pid));
            }
        }
        // A mount point can be stacked; unmount until it is gone.
        for _ in 0..5 {
            let mounted = node
                .mounts()
                .await?
                .iter()
                .any(|m| m.mount_point == self.mount_point);
            if !mounted {
                break;
            }
            let mut result = node.unmount(&self.mount_point, false).await;
            for _ in 0..10 {
                if result.is_ok() {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                result = node.unmount(&self.mount_point, false).await;
            }
            match result {
                Ok(()) => done.push(format!("unmounted {}", self.mount_point.display())),
                Err(_) => {
                    node.unmount(&self.mount_point, true).await?;
                    done.push(format!("lazily unmounted {}", self.mount_point.display()));
                }
            }
        }
        if node
            .list_dir(&self.volume_dir)
            .await?
            .iter()
            .any(|n| n == BUSY_DIR)
        {
            node.remove_dir(&self.mount_point).await?;
            done.push(format!("removed {}", self.mount_point.display()));
        }
        Ok(done)
    }
}
