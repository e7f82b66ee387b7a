//! [`NodeFacts`] -> [`NodeFinding`]: why the kubelet has not finished a pod.

mod cause;
mod read;

use std::{path::PathBuf, time::Duration};

use k8s_openapi::jiff::Timestamp;
use serde::{Deserialize, Serialize};

use super::kernel::{KernelTask, KernelWait};
use super::klog::VolumeFailureKind;
use super::mounts::{MountRole, PodMount, classify_pod_mounts, pod_dir};
use super::runtime::{ShimFact, TaskFact};
use super::thaw::FrozenPod;
use super::{CniConfigFile, Holder, NodeFacts};
use crate::doctor::model::{ObjectRef, PodStuckHint};

/// Knobs for [`diagnose_pod`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiagnoseNodeOptions {
    /// A pod is stuck once `taken_at - deletionTimestamp` exceeds this (the
    /// deletionTimestamp already includes the grace period).
    pub stuck_after: Duration,
}

impl Default for DiagnoseNodeOptions {
    fn default() -> Self {
        DiagnoseNodeOptions {
            stuck_after: Duration::from_secs(10),
        }
    }
}

pub use crate::doctor::model::NodeCause;

/// A volume whose teardown keeps failing, from the kubelet's log.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BusyVolume {
    pub volume: String,
    pub unique_name: String,
    pub kind: VolumeFailureKind,
    /// The last error, e.g. `unlinkat <dir>/held: device or resource busy`.
    pub error: String,
    /// Whether the error says "busy" (EBUSY / target is busy).
    pub busy: bool,
    /// How many failures the log shows since the last success.
    pub failures: usize,
    /// klog time of the first and the last of those failures.
    pub first_failure: String,
    pub last_failure: String,
    /// When the kubelet tries again (`No retries permitted until`).
    pub retry_at: Option<Timestamp>,
    /// The backoff it printed (`16s`, `2m2s`).
    pub retry_after: Option<String>,
    /// The last failure line as logged.
    pub line: String,
}

/// A process a remedy may signal, named so it can never be mistaken for
/// another one with a recycled pid.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProcessTarget {
    pub pid: i32,
    pub start_time: u64,
    pub command: String,
}

impl From<&Holder> for ProcessTarget {
    fn from(h: &Holder) -> Self {
        ProcessTarget {
            pid: h.pid,
            start_time: h.start_time,
            command: h.command.clone(),
        }
    }
}

impl From<&ShimFact> for ProcessTarget {
    fn from(s: &ShimFact) -> Self {
        ProcessTarget {
            pid: s.pid,
            start_time: s.start_time,
            command: s.command.clone(),
        }
    }
}

/// The node doctor's verdict on one pod.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeFinding {
    pub pod: ObjectRef,
    pub node: String,
    /// `<kubelet_dir>/pods/<uid>`.
    pub pod_dir: PathBuf,
    /// Past its deletionTimestamp by more than the threshold and not yet
    /// finally deleted by the kubelet. Keyed on deletionTimestamp, never on
    /// the phase (a stuck pod may show Succeeded, Failed or Running).
    pub stuck: bool,
    /// Seconds since the deletionTimestamp; `None` when not being deleted.
    pub overdue_seconds: Option<i64>,
    /// Causes, most fundamental first; empty when not stuck.
    pub causes: Vec<NodeCause>,
    pub summary: String,
    /// Quoted facts, one per line.
    pub evidence: Vec<String>,
    /// Volumes whose teardown keeps failing (unresolved in the log).
    pub busy_volumes: Vec<BusyVolume>,
    /// Every mount under the pod directory, classified, deepest first.
    pub mounts: Vec<PodMount>,
    /// Processes holding something under the pod directory.
    pub holders: Vec<Holder>,
    /// Shims of the pod that are stopped or serve tasks the runtime cannot
    /// read (`UNKNOWN`).
    pub wedged_shims: Vec<ShimFact>,
    /// Every shim of the pod.
    pub shims: Vec<ShimFact>,
    /// The pod's tasks the runtime still lists.
    pub tasks: Vec<TaskFact>,
    /// Kill failures quoted from the kubelet log and events.
    pub kill_failures: Vec<String>,
    /// When the kubelet next retries a failed volume operation.
    pub next_kubelet_retry: Option<Timestamp>,
    /// Whether the node's kubelet process runs, when the node could say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubelet_running: Option<bool>,
    /// Processes of the pod stuck in a kernel call, with what they wait
    /// for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kernel_stalls: Vec<(KernelTask, KernelWait)>,
    /// The CNI configuration to write back: the node's configuration
    /// directory is empty and the cluster's own configuration is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cni_restore: Option<CniConfigFile>,
    /// The freezer's hold on the pod, when a cgroup of it is frozen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frozen: Option<FrozenPod>,
}

/// Whether a kill failure is the network plugin's DEL failing (the
/// containerd and dockershim wordings).
pub fn is_cni_teardown_failure(text: &str) -> bool {
    text.contains("failed to destroy network for sandbox")
        || text.contains("failed to teardown pod")
        || text.contains("cni plugin not initialized")
}

impl NodeFinding {
    /// The API doctor's hint this verdict corresponds to.
    pub fn hint(&self) -> PodStuckHint {
        match self.causes.first() {
            Some(NodeCause::KubeletDown) => PodStuckHint::NodeLost,
            Some(NodeCause::WedgedRuntime | NodeCause::KernelStall | NodeCause::CgroupFrozen) => {
                PodStuckHint::RuntimeKill
            }
            Some(NodeCause::BusyVolume) => PodStuckHint::VolumeTeardown,
            _ => PodStuckHint::Unknown,
        }
    }

    /// Mounts no node component will remove.
    pub fn stray_mounts(&self) -> impl Iterator<Item = &PodMount> {
        self.mounts.iter().filter(|m| m.is_stray())
    }

    /// Holders a remedy may stop (not node daemons).
    pub fn stoppable_holders(&self) -> impl Iterator<Item = &Holder> {
        self.holders.iter().filter(|h| !h.is_node_daemon())
    }
}

/// Diagnoses one pod from what its node shows. Pure and deterministic.
pub fn diagnose_pod(facts: &NodeFacts, opts: &DiagnoseNodeOptions) -> NodeFinding {
    let meta = &facts.pod.metadata;
    let uid = meta.uid.clone().unwrap_or_default();
    let namespace = meta.namespace.clone().unwrap_or_default();
    let name = meta.name.clone().unwrap_or_default();
    let pod_key = format!("{namespace}/{name}");
    let dir = pod_dir(&facts.kubelet_dir, &uid);
    let mut evidence = Vec::new();

    let deletion = read::deletion(facts, opts, &mut evidence);
    let node_unknown = read::kubelet_standing(facts, &mut evidence);
    let entries = read::pod_log(facts, &uid, &pod_key, &mut evidence);
    let busy_volumes = read::busy_volumes(&entries, &mut evidence);
    let next_kubelet_retry = busy_volumes.iter().filter_map(|v| v.retry_at).max();

    // Mounts and holders under the pod directory.
    let mounts = classify_pod_mounts(&facts.mounts, &facts.kubelet_dir, &uid);
    for m in &mounts {
        evidence.push(format!("mount {m}"));
    }
    let holders = read::holders(facts, &dir, &mut evidence);
    let runtime = read::runtime(facts, &entries, &mut evidence);
    let (frozen, stalls) = read::kernel(facts, &uid, &mut evidence);

    let mut finding = NodeFinding {
        pod: ObjectRef {
            api_version: "v1".into(),
            kind: "Pod".into(),
            namespace: Some(namespace),
            name,
            uid: meta.uid.clone(),
        },
        node: facts.node.clone(),
        pod_dir: dir,
        stuck: deletion.stuck,
        overdue_seconds: deletion.overdue.map(|o| o.as_secs()),
        causes: Vec::new(),
        summary: String::new(),
        evidence,
        busy_volumes,
        mounts,
        holders,
        wedged_shims: runtime.wedged_shims,
        shims: runtime.shims,
        tasks: runtime.tasks,
        kill_failures: runtime.kill_failures,
        next_kubelet_retry,
        kubelet_running: facts.kubelet_running,
        kernel_stalls: stalls,
        cni_restore: None,
        frozen,
    };
    if finding.stuck {
        finding.causes = cause::causes(facts, &finding, node_unknown);
    }

    if let Some(c) = &facts.cni {
        finding.evidence.push(if c.configs.is_empty() {
            format!("CNI: no network configuration in {}", c.conf_dir.display())
        } else {
            format!("CNI: {} in {}", c.configs.join(", "), c.conf_dir.display())
        });
    }
    finding.cni_restore = facts
        .cni
        .as_ref()
        .filter(|c| finding.causes.contains(&NodeCause::CniTeardownFailed) && c.configs.is_empty())
        .and_then(|c| c.own.clone());

    finding.summary = cause::summary(facts, &finding, &deletion, &pod_key);
    finding
}

/// The kubelet-owned mount of `volume`, if any (for a lazy unmount).
pub(crate) fn kubelet_mounts_of<'a>(
    mounts: &'a [PodMount],
    volume: &'a str,
) -> impl Iterator<Item = &'a PodMount> + 'a {
    mounts.iter().filter(move |m| match &m.role {
        MountRole::Volume { volume: v, .. } | MountRole::SubPath { volume: v, .. } => v == volume,
        _ => false,
    })
}

#[cfg(test)]
mod tests {
    use super::NodeCause;

    #[test]
    fn a_node_cause_has_one_name_in_json_in_reports_and_in_scenarios() {
        for cause in NodeCause::ALL {
            assert_eq!(
                serde_json::to_value(cause).unwrap(),
                serde_json::Value::String(cause.name().into())
            );
            assert_eq!(cause.name().parse::<NodeCause>(), Ok(cause));
            assert_eq!(cause.to_string(), cause.name());
        }
        assert!("OrphanFinalizer".parse::<NodeCause>().is_err());
    }
}
