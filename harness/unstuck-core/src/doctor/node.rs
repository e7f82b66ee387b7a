//! The node-level doctor, pure half: why does the kubelet on a pod's node
//! not finish deleting it, and what to do about it, least force first.
//!
//! The API doctor ([`super::diagnose()`]) can only say a pod is overdue and
//! guess from its status ([`super::PodStuckHint`]). The cause lives on the
//! node: the kubelet's log, the mount table under the pod's directory, the
//! processes holding it, and the container runtime's view of the pod's
//! containers. A collector (the I/O half, in the `unstuck` crate) gathers
//! those into [`NodeFacts`]; this module reads them.
//!
//! - [`klog`]: kubelet log lines (klog text format, structured or not) into
//!   [`KubeletEvent`]s: volume TearDown failures with pod UID, volume and
//!   error; KillContainer / KillPodSandbox failures; the kubelet's own
//!   SyncLoop DELETE/REMOVE.
//! - [`mounts`]: a mount table, and the part of it under one pod's
//!   directory, classified as the kubelet's own volume mounts or strays.
//! - [`runtime`]: `ctr` output and shim command lines.
//! - [`kernel`]: the pod's processes as the kernel shows them: a process
//!   in `D` that no kill can end (a frozen filesystem) is not a runtime
//!   fault, and restarting the runtime does not help.
//! - [`freezer`]: the pod's cgroups as the cgroup freezer shows them: a
//!   frozen pod cgroup holds every signal; [`thaw`]: when the doctor may
//!   thaw it.
//! - [`diagnose`](diagnose_pod): [`NodeFacts`] -> [`NodeFinding`].
//! - [`plan`](plan_node): [`NodeFinding`] -> the remedy ladder
//!   ([`NodeStep`]s): busy mount: release the holder, then a lazy unmount;
//!   wedged runtime: kill the stopped shim, then restart the runtime;
//!   kubelet down (the node lost to the control plane): start the kubelet
//!   again; a force delete of the pod object always last, and loud.
//! - [`consent`](shown_covers): whether the ladder a person was shown
//!   covers a rung a fresh look plans during `--apply`.

pub mod consent;
pub mod diagnose;
pub mod freezer;
pub mod kernel;
pub mod klog;
pub mod mounts;
pub mod plan;
pub mod runtime;
pub mod thaw;

use std::path::PathBuf;

use k8s_openapi::api::core::v1::{Event, NodeCondition, Pod};
use k8s_openapi::jiff::Timestamp;
use serde::{Deserialize, Serialize};

pub use consent::{Covered, covered, shown_covers};
pub use diagnose::{
    BusyVolume, DiagnoseNodeOptions, NodeCause, NodeFinding, ProcessTarget, diagnose_pod,
    is_cni_teardown_failure,
};
pub use freezer::{CgroupFact, CgroupVersion, FreezerState};
pub use kernel::{KernelTask, KernelWait, kernel_stalls};
pub use klog::{
    KlogLine, KubeletEvent, KubeletLogEntry, RuntimeCall, Severity, SyncFailure, SyncLoopOp,
    VolumeFailureKind, is_busy_error, klog_records, parse_kubelet_log, parse_sync_failures,
};
pub use mounts::{MountFact, MountRole, PodMount, classify_pod_mounts, parse_mountinfo, pod_dir};
pub use plan::{NodeRemedy, NodeStep, plan_node};
pub use runtime::{
    ContainerKind, RuntimeContainer, ShimFact, TaskFact, parse_ctr_container_info, parse_ctr_tasks,
    parse_shim_cmdline,
};
pub use thaw::{FrozenPod, ThawTarget, ThawVerdict, frozen_pod};

/// Everything the node doctor looks at for one pod, taken at one moment.
/// Serialisable so a collection can be saved beside a report and replayed
/// as a test fixture (`tests/recorded/node/`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeFacts {
    /// When collection started; every age is measured against it, never
    /// the wall clock, so a diagnosis of a recorded collection is
    /// reproducible.
    pub taken_at: Timestamp,
    /// The node's name in the API.
    pub node: String,
    /// The kubelet's root directory on that node (`--root-dir`).
    pub kubelet_dir: PathBuf,
    /// The pod as the API shows it.
    pub pod: Pod,
    /// core/v1 Events about the pod (FailedKillPod lives here; volume
    /// TearDown failures never do, see detection-notes 1.5).
    #[serde(default)]
    pub pod_events: Vec<Event>,
    /// Raw kubelet log records ([`klog_records`]: a line, plus its
    /// continuation lines) that mention the pod (its UID, `ns/name`, or one
    /// of its container or sandbox IDs), oldest first. Raw so that a
    /// fixture is the log itself.
    #[serde(default)]
    pub kubelet_log: Vec<String>,
    /// Whether a kubelet log was available at all: an empty
    /// [`NodeFacts::kubelet_log`] proves nothing when it was not.
    #[serde(default)]
    pub kubelet_log_available: bool,
    /// Mounts at or below the pod's directory
    /// (`<kubelet_dir>/pods/<uid>`).
    #[serde(default)]
    pub mounts: Vec<MountFact>,
    /// Processes with their cwd, root or an open file below the pod's
    /// directory (what `fuser -m` / `lsof +D` would say).
    #[serde(default)]
    pub holders: Vec<Holder>,
    /// The container runtime's view of the pod.
    #[serde(default)]
    pub runtime: RuntimeFacts,
    /// Whether the node's kubelet process runs, as the node itself shows
    /// it; `None` when not known (a node that cannot tell, or a recording
    /// made before this was collected).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubelet_running: Option<bool>,
    /// The node's `Ready` condition as the API shows it (the node
    /// lifecycle controller turns it `Unknown` once the kubelet stops
    /// posting status); `None` when not collected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_ready: Option<NodeCondition>,
    /// When the kubelet last renewed its node Lease
    /// (`kube-node-lease/<node>`); `None` when not collected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_lease_renewed: Option<Timestamp>,
    /// The pod's processes as the kernel shows them (state, wait channel,
    /// blocked call and its file); empty in recordings made before this
    /// was collected.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub processes: Vec<KernelTask>,
    /// The node's CNI configuration directory as the runtime reads it;
    /// `None` when the node cannot say (or a recording made before this
    /// was collected).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cni: Option<CniFacts>,
    /// The freezer of every cgroup of the pod (its own, its containers')
    /// and of those above it; empty when not collected.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cgroups: Vec<CgroupFact>,
}

/// What the node shows of its CNI configuration.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CniFacts {
    /// The directory the runtime loads network configurations from.
    pub conf_dir: PathBuf,
    /// The configuration files in it (`*.conf`, `*.conflist`, `*.json`).
    #[serde(default)]
    pub configs: Vec<String>,
    /// The configuration the cluster's maker wrote, when it is known (a
    /// local cluster unstuck made): what a restore writes back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub own: Option<CniConfigFile>,
}

/// One CNI configuration file and its content.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CniConfigFile {
    pub path: PathBuf,
    pub content: String,
}

/// The runtime's view of one pod: its containers (sandbox included), their
/// tasks, and the shim processes serving them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeFacts {
    /// Containers labelled with the pod's UID.
    #[serde(default)]
    pub containers: Vec<RuntimeContainer>,
    /// Tasks of those containers (`ctr task ls`, filtered).
    #[serde(default)]
    pub tasks: Vec<TaskFact>,
    /// Shim processes whose `-id` is one of those containers or sandboxes.
    #[serde(default)]
    pub shims: Vec<ShimFact>,
    /// Runtime queries that failed (a down or wedged containerd is itself
    /// evidence).
    #[serde(default)]
    pub errors: Vec<String>,
}

impl RuntimeFacts {
    /// Every container and sandbox ID known for the pod.
    pub fn ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self
            .containers
            .iter()
            .flat_map(|c| std::iter::once(c.id.clone()).chain(c.sandbox_id.clone()))
            .collect();
        ids.sort();
        ids.dedup();
        ids
    }
}

/// A process holding something under a path: its cwd, root, or open files.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Holder {
    pub pid: i32,
    /// Start time in clock ticks since boot: with the pid, names the
    /// process even after pid reuse, so a remedy never signals a stranger.
    pub start_time: u64,
    /// Single-letter state from /proc/PID/stat (`T` = stopped).
    pub state: char,
    /// The command line, space-joined.
    pub command: String,
    /// How it holds the path.
    pub uses: Vec<HolderUse>,
}

/// One way a process holds a path.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HolderUse {
    pub kind: HolderUseKind,
    pub path: PathBuf,
}

/// What kind of reference [`HolderUse`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum HolderUseKind {
    /// The process's working directory (`/proc/PID/cwd`).
    Cwd,
    /// The process's root directory (`/proc/PID/root`).
    Root,
    /// An open file descriptor (`/proc/PID/fd/N`).
    Fd(u32),
}

impl std::fmt::Display for HolderUse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.kind {
            HolderUseKind::Cwd => write!(f, "cwd {}", self.path.display()),
            HolderUseKind::Root => write!(f, "root {}", self.path.display()),
            HolderUseKind::Fd(n) => write!(f, "fd {n} {}", self.path.display()),
        }
    }
}

impl Holder {
    /// Whether this is a node daemon (kubelet, container runtime, shim,
    /// init) that a remedy must never stop: it holds the path only because
    /// it is working on it.
    pub fn is_node_daemon(&self) -> bool {
        if self.pid == 1 {
            return true;
        }
        let program = self.command.split_whitespace().next().unwrap_or_default();
        let base = program.rsplit('/').next().unwrap_or(program);
        matches!(base, "kubelet" | "containerd" | "dockerd" | "crio")
            || base.starts_with("containerd-shim")
            || base == "conmon"
    }
}
