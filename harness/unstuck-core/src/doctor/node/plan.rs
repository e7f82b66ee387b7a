//! [`NodeFinding`] -> the remedy ladder, least force first.
//!
//! The ladder follows the catalog (cases 4 and 5) and the seeds:
//! - kubelet down (its node lost to the control plane, seed 004's
//!   NotReady node): [`NodeRemedy::RestartKubelet`], start it again as its
//!   service manager would; it then kills the containers and finishes the
//!   pod by itself. Listed before everything else: only a running kubelet
//!   acts on the other remedies;
//! - wedged runtime: [`NodeRemedy::KillShim`] (SIGKILL the stopped shim;
//!   containerd notices the shim is gone, cleans the task up, and the
//!   kubelet's next kill succeeds), then [`NodeRemedy::RestartRuntime`]
//!   (what seed 000 did with docker);
//! - busy volume: [`NodeRemedy::ReleaseHolder`] (stop the processes
//!   holding the pod's directory, unmount the stray nested mount; seed
//!   003 killed the stray glusterfs process), then
//!   [`NodeRemedy::LazyUnmount`] (MNT_DETACH, works while still held);
//!   when nothing is left to release, [`NodeRemedy::AwaitKubelet`]: its
//!   retry backoff reaches 2m2s, so give it that long before anything
//!   stronger;
//! - kernel stall (a process of the pod in `D`, e.g. writing to a
//!   frozen filesystem): no runtime rung at all, since no kill ends such
//!   a process; the finding says what it waits for;
//! - frozen cgroup: [`NodeRemedy::ThawCgroup`], only on the proof
//!   [`super::freezer`] gives (the freeze is the pod's own, not a shared
//!   cgroup's and not the runtime's pause); the kubelet's next kill then
//!   finishes the pod;
//! - always last, and only when allowed: [`NodeRemedy::ForceDelete`],
//!   which removes the object without the kubelet and leaves the node
//!   dirty.
//!
//! The planner lists the whole ladder for the current finding; whoever
//! applies it takes one step, re-collects and re-plans, so a step is only
//! taken when the evidence still calls for it.

use std::path::PathBuf;

use k8s_openapi::jiff::Timestamp;
use serde::{Deserialize, Serialize};

use super::diagnose::{NodeCause, NodeFinding, ProcessTarget, kubelet_mounts_of};
use super::thaw::{ThawTarget, ThawVerdict};

/// One remedy.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all_fields = "camelCase")]
pub enum NodeRemedy {
    /// Start the node's kubelet again (stopping a hung one first).
    RestartKubelet,
    /// SIGKILL these stopped or unresponsive shims.
    KillShim { shims: Vec<ProcessTarget> },
    /// Restart the node's container runtime daemon.
    RestartRuntime,
    /// Thaw these cgroups (v1 `THAWED` to `freezer.state`, v2 `0` to
    /// `cgroup.freeze`), outermost first.
    ThawCgroup { cgroups: Vec<ThawTarget> },
    /// Stop these processes (SIGTERM, then SIGKILL), then unmount these
    /// stray mounts (deepest first, not lazily).
    ReleaseHolder {
        stop: Vec<ProcessTarget>,
        unmount: Vec<PathBuf>,
    },
    /// Detach these mounts even while busy (`umount -l`).
    LazyUnmount { paths: Vec<PathBuf> },
    /// Write the cluster's own CNI configuration back into the node's
    /// empty configuration directory (the runtime reloads it); only
    /// planned where that configuration is known.
    RestoreCniConfig { path: PathBuf, content: String },
    /// Nothing on the node blocks any more: wait for the kubelet's next
    /// retry (when known) before anything stronger.
    AwaitKubelet { until: Option<Timestamp> },
    /// Delete the pod object with grace period 0, without the kubelet.
    ForceDelete {
        namespace: String,
        name: String,
        uid: Option<String>,
    },
}

impl NodeRemedy {
    /// The remedy's name, as reports and tests spell it.
    pub fn name(&self) -> &'static str {
        match self {
            NodeRemedy::RestartKubelet => "RestartKubelet",
            NodeRemedy::KillShim { .. } => "KillShim",
            NodeRemedy::RestartRuntime => "RestartRuntime",
            NodeRemedy::ThawCgroup { .. } => "ThawCgroup",
            NodeRemedy::ReleaseHolder { .. } => "ReleaseHolder",
            NodeRemedy::LazyUnmount { .. } => "LazyUnmount",
            NodeRemedy::AwaitKubelet { .. } => "AwaitKubelet",
            NodeRemedy::RestoreCniConfig { .. } => "RestoreCniConfig",
            NodeRemedy::ForceDelete { .. } => "ForceDelete",
        }
    }
}

/// One rung of the ladder.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeStep {
    pub remedy: NodeRemedy,
    /// Why this step, from the evidence.
    pub why: String,
    /// Bypasses the kubelet: only with explicit permission, and reported.
    pub force: bool,
}

/// The ladder for a finding, least force first. Empty when the pod is not
/// stuck.
pub fn plan_node(f: &NodeFinding) -> Vec<NodeStep> {
    if !f.stuck {
        return Vec::new();
    }
    let mut steps = Vec::new();
    let kubelet_down = f.causes.contains(&NodeCause::KubeletDown);
    if kubelet_down {
        steps.push(kubelet_rung(f));
    }
    steps.extend(thaw_rung(f));
    runtime_rungs(f, &mut steps);
    volume_rungs(f, &mut steps);
    steps.extend(cni_rung(f));
    if f.causes.contains(&NodeCause::Unknown) {
        steps.push(step(
            NodeRemedy::AwaitKubelet {
                until: f.next_kubelet_retry,
            },
            "no cause visible on the node; give the kubelet its retry before anything stronger"
                .to_owned(),
        ));
    }
    steps.push(force_delete(f, kubelet_down));
    steps
}

/// A rung that goes through the kubelet (not a force).
fn step(remedy: NodeRemedy, why: String) -> NodeStep {
    NodeStep {
        remedy,
        why,
        force: false,
    }
}

/// Kubelet down: start it again.
fn kubelet_rung(f: &NodeFinding) -> NodeStep {
    step(
        NodeRemedy::RestartKubelet,
        format!(
            "{} on node {}; started again (as its service manager would), it kills the pod's containers, tears down its volumes and finishes the deletion itself",
            if f.kubelet_running == Some(false) {
                "the kubelet does not run"
            } else {
                "the kubelet stopped posting node status"
            },
            f.node
        ),
    )
}

/// Frozen cgroup: thaw it, only on the thaw proof.
fn thaw_rung(f: &NodeFinding) -> Option<NodeStep> {
    if f.causes.contains(&NodeCause::CgroupFrozen)
        && let Some(ThawVerdict::Thaw { targets, .. }) = f.frozen.as_ref().map(|z| &z.verdict)
    {
        let paths: Vec<String> = targets
            .iter()
            .map(|t| t.path.display().to_string())
            .collect();
        return Some(step(
            NodeRemedy::ThawCgroup {
                cgroups: targets.clone(),
            },
            format!(
                "{} frozen by a write to the pod's own cgroup, no shared cgroup above it frozen and no task paused by the runtime (the thaw proof in the evidence); thawed, its processes take the kill and the kubelet's next kill finishes the pod",
                paths.join(", ")
            ),
        ));
    }
    None
}

/// Wedged runtime: kill the wedged shims, then restart the runtime.
fn runtime_rungs(f: &NodeFinding, steps: &mut Vec<NodeStep>) {
    // A process in `D` ignores SIGKILL until its kernel call returns:
    // restarting containerd (or killing a healthy shim) changes nothing
    // for it, so the runtime rungs are left out; the only rung left is
    // the loud, permission-only force delete.
    let kernel_stall = f.causes.contains(&NodeCause::KernelStall);
    if f.causes.contains(&NodeCause::WedgedRuntime) {
        if !f.wedged_shims.is_empty() {
            let shims: Vec<ProcessTarget> =
                f.wedged_shims.iter().map(ProcessTarget::from).collect();
            let pids: Vec<String> = shims.iter().map(|s| s.pid.to_string()).collect();
            steps.push(step(
                NodeRemedy::KillShim { shims },
                format!(
                    "shim(s) {} of the pod answer nothing; killing them lets containerd reap the tasks and the kubelet's next kill succeed",
                    pids.join(", ")
                ),
            ));
        }
        if !kernel_stall {
            steps.push(step(
                NodeRemedy::RestartRuntime,
                "restarting containerd makes it reconnect to (or clean up after) every shim; seed 000's remedy".to_owned(),
            ));
        }
    }
}

/// Busy volume: release the holders and stray mounts, then a lazy
/// unmount; with nothing left to release, the kubelet's retry.
fn volume_rungs(f: &NodeFinding, steps: &mut Vec<NodeStep>) {
    if !f.causes.contains(&NodeCause::BusyVolume) {
        return;
    }
    let stop: Vec<ProcessTarget> = f.stoppable_holders().map(ProcessTarget::from).collect();
    let unmount: Vec<PathBuf> = f
        .stray_mounts()
        .map(|m| m.mount.mount_point.clone())
        .collect();
    let mut lazy = unmount.clone();
    for v in &f.busy_volumes {
        lazy.extend(kubelet_mounts_of(&f.mounts, &v.volume).map(|m| m.mount.mount_point.clone()));
    }
    if f.busy_volumes.is_empty() && lazy.is_empty() {
        // Mounts remain but the log names no volume: all of them.
        lazy.extend(f.mounts.iter().map(|m| m.mount.mount_point.clone()));
    }
    lazy.dedup();
    if !stop.is_empty() || !unmount.is_empty() {
        let mut why = Vec::new();
        if !stop.is_empty() {
            why.push(format!(
                "process(es) {} hold the pod's directory",
                stop.iter()
                    .map(|p| format!("{} ({})", p.pid, p.command))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        if !unmount.is_empty() {
            why.push(format!(
                "stray mount(s) {} keep the volume directory busy",
                unmount
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        steps.push(step(
            NodeRemedy::ReleaseHolder { stop, unmount },
            format!(
                "{}; releasing them lets the kubelet's next TearDown succeed",
                why.join("; ")
            ),
        ));
    }
    if !lazy.is_empty() {
        steps.push(step(
            NodeRemedy::LazyUnmount { paths: lazy },
            "a lazy unmount detaches the mount even while it is still held".to_owned(),
        ));
    }
    if steps.iter().all(|s| {
        !matches!(
            s.remedy,
            NodeRemedy::ReleaseHolder { .. } | NodeRemedy::LazyUnmount { .. }
        )
    }) {
        steps.push(step(
            NodeRemedy::AwaitKubelet {
                until: f.next_kubelet_retry,
            },
            "nothing on the node blocks the volume any more; the kubelet retries with a backoff of up to 2m2s".to_owned(),
        ));
    }
}

/// A failing network DEL: only repairing the plugin helps. Where the
/// node's configuration is simply gone and the cluster's own is known,
/// that repair is writing it back; anywhere else the finding says what
/// to repair and no rung is planned (a force delete would leak the
/// sandbox, its network namespace and its IP).
fn cni_rung(f: &NodeFinding) -> Option<NodeStep> {
    if f.causes.contains(&NodeCause::CniTeardownFailed)
        && let Some(own) = &f.cni_restore
    {
        return Some(step(
            NodeRemedy::RestoreCniConfig {
                path: own.path.clone(),
                content: own.content.clone(),
            },
            format!(
                "the node's CNI configuration directory is empty, so containerd cannot tear down the pod's network; writing back this cluster's own configuration ({}) lets the kubelet's next KillPodSandbox succeed",
                own.path.display()
            ),
        ));
    }
    None
}

/// Always last: remove the object without the kubelet (force).
fn force_delete(f: &NodeFinding, kubelet_down: bool) -> NodeStep {
    NodeStep {
        remedy: NodeRemedy::ForceDelete {
            namespace: f.pod.namespace.clone().unwrap_or_default(),
            name: f.pod.name.clone(),
            uid: f.pod.uid.clone(),
        },
        why: if kubelet_down {
            "last resort: removes the pod object without the kubelet; with the kubelet down its containers still run on the node, and a replacement may run beside them (two pods with one identity for a StatefulSet)".to_owned()
        } else {
            "last resort: removes the pod object without the kubelet; its containers, mounts and directory may stay on the node".to_owned()
        },
        force: true,
    }
}
