//! Busy volume mount (catalog case 4, seeds 003 and 004).
//!
//! Two ways to make a pod's volume impossible to tear down, both real on
//! the v1.34 kubelet:
//!
//! - [`BusyKind::NestedMount`] (default): a tmpfs mounted on a new
//!   directory inside one of the pod's volume directories (an emptyDir by
//!   default), a nested mount nobody on the node will remove. The
//!   kubelet's emptyDir TearDown (`os.RemoveAll` of the volume directory)
//!   fails on it with
//!   ```text
//!   UnmountVolume.TearDown failed for volume "data" (UniqueName: "kubernetes.io/empty-dir/<uid>-data") pod "<uid>" (UID: "<uid>") : unlinkat <kubelet>/pods/<uid>/volumes/kubernetes.io~empty-dir/data/.unstuck-busy: device or resource busy
//!   ```
//!   seed 004's `device or resource busy`. Optionally a process keeps its
//!   working directory inside the mount, as the stray glusterfs process
//!   did in seed 003: then a plain unmount of the nested mount fails too
//!   ("target is busy") until the process is stopped.
//! - [`BusyKind::HeldSubPath`]: a process holds one of the kubelet's own
//!   subPath bind mounts (`volume-subpaths/<vol>/<container>/<n>`) open,
//!   so its unmount fails and the kubelet logs seed 004's other line:
//!   ```text
//!   error cleaning subPath mounts for volume "cfg" (UniqueName: "kubernetes.io/configmap/<uid>-cfg") pod "<uid>" (UID: "<uid>") : error processing <kubelet>/pods/<uid>/volume-subpaths/cfg/c: error cleaning subpath mount <kubelet>/pods/<uid>/volume-subpaths/cfg/c/1: unmount failed: exit status 32
//!   Unmounting arguments: <kubelet>/pods/<uid>/volume-subpaths/cfg/c/1
//!   Output: umount: <kubelet>/pods/<uid>/volume-subpaths/cfg/c/1: target is busy.
//!   ```
//!
//! Either way the kubelet retries with a backoff doubling up to 2m2s and
//! the pod stays in the API past its grace period (phase Succeeded,
//! containers gone), which is what makes the doctor's ladder (release the
//! holder, then lazy unmount) real.

use std::path::PathBuf;

use kube::Client;
use serde::{Deserialize, Serialize};

use super::{FaultError, undone, FaultKind, NoParams, Placed, PodTarget, Reverted, target_pod};
use crate::node::{Node, ProcRef};

/// The directory created inside the volume, and mounted over.
pub const BUSY_DIR: &str = ".unstuck-busy";
/// The tmpfs's source name, so the mount table says who made it.
pub const MOUNT_LABEL: &str = "unstuck-busy";
/// `argv[0]` of the holder process's shell (`$0`), for `ps`.
pub const HOLDER_NAME: &str = "unstuck-busy-holder";

/// Which way to make the volume busy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum BusyKind {
    /// A tmpfs nested inside a volume directory.
    #[default]
    NestedMount,
    /// A process holding a subPath bind mount open (needs a pod with a
    /// `subPath` volume mount; implies a holder).
    HeldSubPath,
    /// A process whose working directory is the kubelet's own mount of a
    /// volume (a Secret's, ConfigMap's or projected tmpfs; implies a
    /// holder): its unmount fails with "target is busy".
    HeldVolume,
}

/// How to make the volume busy.
#[derive(Clone, Debug, Default)]
pub struct BusyMountOptions {
    pub kind: BusyKind,
    /// The pod volume to use (its name in the pod spec); default: the
    /// first emptyDir, else the first volume of any plugin (for
    /// [`BusyKind::HeldSubPath`]: the first subPath mount).
    pub volume: Option<String>,
    /// Also start a process holding the nested mount (its working
    /// directory inside; seed 003's stray process). Always on for
    /// [`BusyKind::HeldSubPath`].
    pub holder: bool,
}

/// A busy mount in place.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BusyMount {
    pub pod: PodTarget,
    pub kind: BusyKind,
    pub volume: String,
    /// What is busy: the volume directory (`volumes/<plugin>/<volume>`),
    /// or the held subPath mount (`volume-subpaths/<volume>/<container>/<n>`).
    pub busy_path: PathBuf,
    /// The nested tmpfs this fault mounted ([`BusyKind::NestedMount`]).
    pub mount_point: Option<PathBuf>,
    /// The holder process, when one was started.
    pub holder: Option<ProcRef>,
}

/// `busyMount`: a tmpfs nested in the pod's first emptyDir (else its
/// first volume), no holder.
pub struct BusyMountFault;

impl FaultKind for BusyMountFault {
    const NAME: &'static str = "busyMount";
    type Params = NoParams;
    type Placed = BusyMount;

    async fn inject(
        client: &Client,
        node: &dyn Node,
        namespace: &str,
        name: &str,
        _: NoParams,
    ) -> Result<BusyMount, FaultError> {
        inject(client, node, namespace, name, &BusyMountOptions::default()).await
    }
}

/// Makes one of the pod's volumes busy. The pod must run on `node`.
pub async fn inject(
    client: &Client,
    node: &dyn Node,
    namespace: &str,
    name: &str,
    opts: &BusyMountOptions,
) -> Result<BusyMount, FaultError> {
    let (pod, _) = target_pod(client, node, namespace, name).await?;
    let pod_dir = node.kubelet_dir().join("pods").join(&pod.uid);
    let mut busy = match opts.kind {
        BusyKind::NestedMount => nested_mount(node, pod, &pod_dir, opts).await?,
        BusyKind::HeldSubPath => held_subpath(node, pod, &pod_dir, opts).await?,
        BusyKind::HeldVolume => {
            let (plugin_dir, volume) = pick_volume(node, &pod, &pod_dir, opts).await?;
            BusyMount {
                pod,
                kind: BusyKind::HeldVolume,
                busy_path: pod_dir.join("volumes").join(plugin_dir).join(&volume),
                volume,
                mount_point: None,
                holder: None,
            }
        }
    };
    let hold = opts.holder || opts.kind != BusyKind::NestedMount;
    if hold {
        let target = busy
            .mount_point
            .clone()
            .unwrap_or_else(|| busy.busy_path.clone());
        let argv: Vec<String> = vec![
            "sh".into(),
            "-c".into(),
            // A directory is held as the cwd, a file as fd 3; the sleeps
            // inherit both, and revert kills the whole group.
            r#"if [ -d "$1" ]; then cd "$1" || exit 1; else exec 3< "$1" || exit 1; fi; while :; do sleep 1; done"#.into(),
            HOLDER_NAME.into(),
            target.display().to_string(),
        ];
        match node.start_background(&argv).await {
            Ok(p) => busy.holder = Some(p),
            Err(e) => return Err(undone(e, &busy, node).await),
        }
    }
    // The fault is only real if what should be busy is a mount point.
    let mounted = busy.mount_point.as_ref().unwrap_or(&busy.busy_path).clone();
    if !node
        .mounts()
        .await?
        .iter()
        .any(|m| m.mount_point == mounted)
    {
        let failed = FaultError::NotInjected(format!(
            "{} is not in the mount table",
            mounted.display()
        ));
        return Err(undone(failed, &busy, node).await);
    }
    Ok(busy)
}

async fn nested_mount(
    node: &dyn Node,
    pod: PodTarget,
    pod_dir: &std::path::Path,
    opts: &BusyMountOptions,
) -> Result<BusyMount, FaultError> {
    let (plugin_dir, volume) = pick_volume(node, &pod, pod_dir, opts).await?;
    let busy_path = pod_dir.join("volumes").join(&plugin_dir).join(&volume);
    let mount_point = busy_path.join(BUSY_DIR);
    node.make_dir(&mount_point).await?;
    if let Err(e) = node.mount_tmpfs(&mount_point, MOUNT_LABEL).await {
        return Err(match node.remove_dir(&mount_point).await {
            Ok(()) => e.into(),
            Err(undo) => FaultError::UndoFailed {
                failed: Box::new(e.into()),
                undo: Box::new(undo.into()),
            },
        });
    }
    Ok(BusyMount {
        pod,
        kind: BusyKind::NestedMount,
        volume,
        busy_path,
        mount_point: Some(mount_point),
        holder: None,
    })
}

/// The volume to use: `(plugin directory, volume name)` under the pod's
/// `volumes/`, by name, else the first emptyDir, else the first one.
async fn pick_volume(
    node: &dyn Node,
    pod: &PodTarget,
    pod_dir: &std::path::Path,
    opts: &BusyMountOptions,
) -> Result<(String, String), FaultError> {
    let volumes_dir = pod_dir.join("volumes");
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
    chosen
        .cloned()
        .ok_or_else(|| no_volume(pod, &volumes_dir, opts, &candidates))
}

async fn held_subpath(
    node: &dyn Node,
    pod: PodTarget,
    pod_dir: &std::path::Path,
    opts: &BusyMountOptions,
) -> Result<BusyMount, FaultError> {
    let subpaths = pod_dir.join("volume-subpaths");
    let mut candidates = Vec::new();
    for vol in node.list_dir(&subpaths).await? {
        for container in node.list_dir(&subpaths.join(&vol)).await? {
            for index in node.list_dir(&subpaths.join(&vol).join(&container)).await? {
                candidates.push((
                    vol.clone(),
                    subpaths.join(&vol).join(&container).join(index),
                ));
            }
        }
    }
    let chosen = match &opts.volume {
        Some(v) => candidates.iter().find(|(vol, _)| vol == v),
        None => candidates.first(),
    };
    let Some((volume, busy_path)) = chosen.cloned() else {
        let names: Vec<(String, String)> = candidates
            .iter()
            .map(|(v, p)| (v.clone(), p.display().to_string()))
            .collect();
        return Err(no_volume(&pod, &subpaths, opts, &names));
    };
    Ok(BusyMount {
        pod,
        kind: BusyKind::HeldSubPath,
        volume,
        busy_path,
        mount_point: None,
        holder: None,
    })
}

fn no_volume(
    pod: &PodTarget,
    dir: &std::path::Path,
    opts: &BusyMountOptions,
    found: &[(String, String)],
) -> FaultError {
    FaultError::NoVolume {
        pod: pod.to_string(),
        dir: dir.display().to_string(),
        hint: match &opts.volume {
            Some(v) => format!(
                " named '{v}' (found: {})",
                crate::text::list(
                    &found
                        .iter()
                        .map(|(a, b)| format!("{a}: {b}"))
                        .collect::<Vec<_>>()
                )
            ),
            None => String::new(),
        },
    }
}

impl Placed for BusyMount {
    fn pod(&self) -> &PodTarget {
        &self.pod
    }

    fn describe(&self) -> String {
        let what = match (&self.kind, &self.mount_point) {
            (BusyKind::NestedMount, Some(m)) => format!(
                "tmpfs {MOUNT_LABEL} nested on {} inside volume '{}'",
                m.display(),
                self.volume
            ),
            (BusyKind::HeldVolume, _) => format!(
                "volume mount {} of volume '{}' held as a process's working directory",
                self.busy_path.display(),
                self.volume
            ),
            _ => format!(
                "subPath mount {} of volume '{}' held open",
                self.busy_path.display(),
                self.volume
            ),
        };
        format!(
            "busy mount: {what} of pod {}{}",
            self.pod,
            self.holder
                .as_ref()
                .map(|h| format!(", holder process {}", h.pid))
                .unwrap_or_default()
        )
    }

    /// Stops the holder (its whole process group), unmounts the nested
    /// mount (lazily if a plain unmount stays busy) and removes its
    /// directory. Each part is skipped when already undone; the kubelet's
    /// own mounts are never touched.
    async fn revert(&self, node: &dyn Node) -> Result<Reverted, FaultError> {
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
        let Some(mount_point) = &self.mount_point else {
            return Ok(done);
        };
        // A mount point can be stacked; unmount until it is gone.
        for _ in 0..5 {
            let mounted = node
                .mounts()
                .await?
                .iter()
                .any(|m| m.mount_point == *mount_point);
            if !mounted {
                break;
            }
            let mut result = node.unmount(mount_point, false).await;
            for _ in 0..10 {
                if result.is_ok() {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                result = node.unmount(mount_point, false).await;
            }
            match result {
                Ok(()) => done.push(format!("unmounted {}", mount_point.display())),
                Err(_) => {
                    node.unmount(mount_point, true).await?;
                    done.push(format!("lazily unmounted {}", mount_point.display()));
                }
            }
        }
        if node
            .list_dir(&self.busy_path)
            .await?
            .iter()
            .any(|n| n == BUSY_DIR)
        {
            node.remove_dir(mount_point).await?;
            done.push(format!("removed {}", mount_point.display()));
        }
        Ok(done)
    }
}
