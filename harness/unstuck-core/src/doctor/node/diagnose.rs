//! [`NodeFacts`] -> [`NodeFinding`]: why the kubelet has not finished a pod.

use std::{collections::BTreeMap, path::PathBuf, time::Duration};

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};

use super::kernel::{KernelTask, KernelWait, kernel_stalls};
use super::klog::{KubeletEvent, RuntimeCall, VolumeFailureKind, is_busy_error, parse_kubelet_log};
use super::mounts::{MountRole, PodMount, classify_pod_mounts, pod_dir};
use super::runtime::{ShimFact, TaskFact};
use super::thaw::{FrozenPod, frozen_pod};
use super::{CniConfigFile, Holder, NodeFacts};
use crate::doctor::snapshot::status_container_ids;
use crate::doctor::{ObjectRef, PodStuckHint};

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

/// What keeps the kubelet from finishing the pod.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum NodeCause {
    /// The node's kubelet does not run (or, where the node cannot say, its
    /// node is `Ready=Unknown`: the kubelet stopped posting status). Nothing
    /// on the node kills the containers or sends the final delete. Seed
    /// 004's pods on a NotReady node. Listed first: every other cause is
    /// only worked on by a running kubelet.
    KubeletDown,
    /// The runtime cannot stop the pod's containers: a stopped or
    /// unresponsive shim, tasks in `UNKNOWN`, kill requests running into
    /// their deadline (catalog case 5, seed 000). Listed first: volumes are
    /// only torn down once the containers are gone.
    WedgedRuntime,
    /// A process of the pod is in uninterruptible sleep (`D`) inside a
    /// kernel call that does not return (a write to a frozen filesystem,
    /// an unanswered FUSE or NFS request): SIGKILL waits for it, so the
    /// runtime cannot stop the container however healthy it is. No runtime
    /// remedy helps; what the process waits for must be released.
    KernelStall,
    /// The pod's cgroup is frozen (the cgroup freezer): its processes sit
    /// in the freezer, no signal reaches them (cgroup v1), and the
    /// runtime's kill runs into its deadline (`FailedKillPod ...
    /// KillContainerError ... DeadlineExceeded`, `KillPodSandboxError`)
    /// while the runtime lists its tasks `RUNNING`. Thawing it, when the
    /// freeze is the pod's own and not the runtime's pause, lets the
    /// kubelet's next kill finish ([`super::freezer`]).
    CgroupFrozen,
    /// A volume cannot be torn down: the kubelet's TearDown fails (EBUSY,
    /// target is busy), or something not the kubelet's is mounted or held
    /// under the pod's directory (catalog case 4, seeds 003 and 004).
    BusyVolume,
    /// The network plugin's DEL fails, so the runtime cannot stop the
    /// pod's sandbox: `KillPodSandboxError: ... failed to destroy network
    /// for sandbox ...` (projectcalico/calico#7958: the plugin cannot reach
    /// the API server; containerd/containerd#8774: "cni plugin not
    /// initialized"). No kill or runtime restart helps: the plugin, its
    /// configuration or what it depends on must be repaired, after which
    /// the kubelet's next KillPodSandbox succeeds.
    CniTeardownFailed,
    /// Stuck, but the node shows no cause (the kubelet may simply not have
    /// retried yet, or its log is not available).
    Unknown,
}

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

    // Stuck: keyed on deletionTimestamp (it includes the grace period).
    let threshold = SignedDuration::try_from(opts.stuck_after).unwrap_or(SignedDuration::MAX);
    let overdue = meta
        .deletion_timestamp
        .as_ref()
        .map(|t| facts.taken_at.duration_since(t.0));
    let finally_deleted = meta.deletion_grace_period_seconds == Some(0);
    let stuck = overdue.is_some_and(|o| o > threshold) && !finally_deleted;
    if let Some(ts) = &meta.deletion_timestamp {
        evidence.push(format!(
            "deletionTimestamp {} ({}s before collection), deletionGracePeriodSeconds {}",
            ts.0,
            overdue.map_or(0, |o| o.as_secs()),
            meta.deletion_grace_period_seconds
                .map_or("<unset>".to_owned(), |g| g.to_string())
        ));
    } else {
        evidence.push("no deletionTimestamp: the pod is not being deleted".to_owned());
    }
    if let Some(status) = &facts.pod.status {
        evidence.push(format!(
            "phase {} on node {}",
            status.phase.as_deref().unwrap_or("<unknown>"),
            facts.node
        ));
    }

    // The kubelet itself and the node's standing with the control plane.
    let node_ready = facts.node_ready.as_ref();
    let node_unknown = node_ready.is_some_and(|c| c.status == "Unknown");
    let node_not_ready = node_ready.is_some_and(|c| c.status != "True");
    match facts.kubelet_running {
        Some(false) => evidence.push(format!(
            "no kubelet process runs on node {}: nothing kills the pod's containers or confirms its deletion",
            facts.node
        )),
        Some(true) if node_not_ready => evidence.push(format!(
            "the kubelet process runs on node {}, but the node is not Ready",
            facts.node
        )),
        _ => {}
    }
    if let Some(c) = node_ready.filter(|c| c.status != "True") {
        evidence.push(format!(
            "node {}: Ready={} ({}): {:?}{}",
            facts.node,
            c.status,
            c.reason.as_deref().unwrap_or("<none>"),
            c.message.as_deref().unwrap_or_default(),
            c.last_transition_time
                .as_ref()
                .map(|t| format!(
                    " since {} ({}s before collection)",
                    t.0,
                    facts.taken_at.duration_since(t.0).as_secs()
                ))
                .unwrap_or_default()
        ));
    }
    if let Some(renewed) = facts.node_lease_renewed
        && (node_not_ready || facts.kubelet_running == Some(false))
    {
        evidence.push(format!(
            "the kubelet last renewed its Lease kube-node-lease/{} at {renewed} ({}s before collection)",
            facts.node,
            facts.taken_at.duration_since(renewed).as_secs()
        ));
    }
    for ev in facts
        .pod_events
        .iter()
        .filter(|e| e.reason.as_deref() == Some("NodeNotReady"))
    {
        evidence.push(format!(
            "event {} NodeNotReady (x{}) from {}: {}",
            ev.type_.as_deref().unwrap_or("Normal"),
            ev.count.unwrap_or(1),
            ev.source
                .as_ref()
                .and_then(|s| s.component.as_deref())
                .or(ev.reporting_component.as_deref())
                .unwrap_or("<unknown>"),
            ev.message.as_deref().unwrap_or_default()
        ));
    }

    // The kubelet's log, the lines about this pod only.
    let ids = facts.runtime.ids();
    let mut pod_ids = ids.clone();
    // IDs from the pod's status too, so kubelet lines about them count
    // even when the runtime no longer lists them.
    pod_ids.extend(status_container_ids(&facts.pod));
    pod_ids.sort();
    pod_ids.dedup();
    let entries: Vec<_> = parse_kubelet_log(facts.kubelet_log.iter().map(String::as_str))
        .into_iter()
        .filter(|e| e.event.concerns(&uid, &pod_key, &pod_ids))
        .collect();
    if !facts.kubelet_log_available {
        evidence.push(
            "kubelet log not available on this node: volume errors cannot be read".to_owned(),
        );
    }

    // Volume teardown failures not followed by a success for the same volume.
    let mut volumes: BTreeMap<String, BusyVolume> = BTreeMap::new();
    for e in &entries {
        match &e.event {
            KubeletEvent::VolumeTearDownFailed {
                kind,
                volume,
                unique_name,
                error,
                retry_at,
                retry_after,
                ..
            } => {
                let v = volumes
                    .entry(unique_name.clone())
                    .or_insert_with(|| BusyVolume {
                        volume: volume.clone(),
                        unique_name: unique_name.clone(),
                        kind: *kind,
                        error: String::new(),
                        busy: false,
                        failures: 0,
                        first_failure: e.time.clone(),
                        last_failure: String::new(),
                        retry_at: None,
                        retry_after: None,
                        line: String::new(),
                    });
                v.failures += 1;
                v.kind = *kind;
                v.error.clone_from(error);
                v.busy = is_busy_error(error);
                v.last_failure.clone_from(&e.time);
                v.retry_at = *retry_at;
                v.retry_after.clone_from(retry_after);
                v.line.clone_from(&e.raw);
            }
            KubeletEvent::VolumeTearDownSucceeded { unique_name, .. } => {
                volumes.remove(unique_name);
            }
            _ => {}
        }
    }
    let busy_volumes: Vec<BusyVolume> = volumes.into_values().collect();
    for v in &busy_volumes {
        evidence.push(format!(
            "kubelet: {} failed for volume {:?} {} time(s) ({} .. {}): {}{}",
            match v.kind {
                VolumeFailureKind::TearDown => "UnmountVolume.TearDown",
                VolumeFailureKind::SubPathCleanup => "subPath cleanup",
            },
            v.volume,
            v.failures,
            v.first_failure,
            v.last_failure,
            v.error,
            match (&v.retry_at, &v.retry_after) {
                (Some(t), Some(d)) => format!("; next retry at {t} (backoff {d})"),
                _ => String::new(),
            }
        ));
        evidence.push(format!("kubelet log: {}", v.line));
    }
    let next_kubelet_retry = busy_volumes.iter().filter_map(|v| v.retry_at).max();

    // Mounts and holders under the pod directory.
    let mounts = classify_pod_mounts(&facts.mounts, &facts.kubelet_dir, &uid);
    for m in &mounts {
        evidence.push(format!("mount {m}"));
    }
    let holders: Vec<Holder> = facts
        .holders
        .iter()
        .filter(|h| h.uses.iter().any(|u| u.path.starts_with(&dir)))
        .cloned()
        .collect();
    for h in &holders {
        evidence.push(format!(
            "process {} ({}) state {} holds {}{}",
            h.pid,
            h.command,
            h.state,
            h.uses
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", "),
            if h.is_node_daemon() {
                " (a node daemon: never stopped by a remedy)"
            } else {
                ""
            }
        ));
    }

    // The runtime: shims, tasks, kill failures.
    let tasks = facts.runtime.tasks.clone();
    let unknown: Vec<&TaskFact> = tasks.iter().filter(|t| t.is_unknown()).collect();
    let shims = facts.runtime.shims.clone();
    let wedged_shims: Vec<ShimFact> = shims
        .iter()
        .filter(|s| {
            s.is_stopped()
                || unknown.iter().any(|t| {
                    t.id == s.id
                        || facts
                            .runtime
                            .containers
                            .iter()
                            .any(|c| c.id == t.id && c.sandbox_id.as_deref() == Some(&s.id))
                })
        })
        .cloned()
        .collect();
    for s in &shims {
        evidence.push(format!(
            "shim pid {} (-id {}) state {}{}",
            s.pid,
            s.id,
            s.state,
            if s.is_stopped() {
                ": stopped, it answers no request"
            } else {
                ""
            }
        ));
    }
    for t in &tasks {
        evidence.push(format!(
            "runtime task {} pid {} status {}",
            t.id, t.pid, t.status
        ));
    }
    for e in &facts.runtime.errors {
        evidence.push(format!("runtime query failed: {e}"));
    }
    let mut kill_failures: Vec<String> = Vec::new();
    for e in &entries {
        let quoted = match &e.event {
            KubeletEvent::KillContainerFailed { .. } => true,
            KubeletEvent::SyncFailed { failures, .. } => failures.iter().any(|f| f.is_kill()),
            KubeletEvent::RuntimeCallFailed { call, .. } => {
                matches!(
                    call,
                    RuntimeCall::StopContainer | RuntimeCall::StopPodSandbox
                )
            }
            _ => false,
        };
        if quoted {
            kill_failures.push(format!("kubelet log: {}", e.raw));
        }
    }
    for ev in &facts.pod_events {
        let reason = ev.reason.as_deref().unwrap_or_default();
        if reason == "FailedKillPod" || reason == "ExceededGracePeriod" {
            kill_failures.push(format!(
                "event Warning {reason} (x{}): {}",
                ev.count.unwrap_or(1),
                ev.message.as_deref().unwrap_or_default()
            ));
        }
    }
    // Keep the evidence readable: the last few of each, in log order.
    let shown = kill_failures.len().saturating_sub(6);
    evidence.extend(kill_failures.iter().skip(shown).cloned());

    // What the kernel says about the pod's processes, read before any
    // runtime remedy is considered. A frozen task shows `D` too, in
    // whatever sleep it was frozen in: the freezer, not a kernel call,
    // holds it.
    let frozen = frozen_pod(&uid, &facts.cgroups, &facts.runtime);
    let frozen_pids = frozen.as_ref().map_or(&[][..], |f| &f.frozen_pids[..]);
    let stalls: Vec<(KernelTask, KernelWait)> = kernel_stalls(&facts.processes)
        .into_iter()
        .filter(|(t, _)| !frozen_pids.contains(&t.pid))
        .map(|(t, w)| (t.clone(), w))
        .collect();
    for t in facts
        .processes
        .iter()
        .filter(|t| t.is_uninterruptible() && !frozen_pids.contains(&t.pid))
    {
        evidence.push(format!("kernel: {}", t.describe()));
    }
    if let Some(f) = &frozen {
        evidence.extend(f.evidence(&facts.processes));
    }

    // Causes.
    let mut causes = Vec::new();
    let kubelet_down =
        facts.kubelet_running == Some(false) || (facts.kubelet_running.is_none() && node_unknown);
    if stuck {
        if kubelet_down {
            causes.push(NodeCause::KubeletDown);
        }
        // A process the kernel holds in `D` explains a failing kill by
        // itself; only a shim that is itself stopped still makes the
        // runtime a cause beside it.
        let kernel_stalled = !stalls.is_empty();
        if kernel_stalled {
            causes.push(NodeCause::KernelStall);
        }
        if frozen.is_some() {
            causes.push(NodeCause::CgroupFrozen);
        }
        // A failing network DEL fails StopPodSandbox with a healthy
        // runtime: the runtime rungs do not apply unless a shim is
        // itself stopped.
        let cni_failing = kill_failures.iter().any(|k| is_cni_teardown_failure(k));
        if cni_failing {
            causes.push(NodeCause::CniTeardownFailed);
        }
        let runtime_wedged = !wedged_shims.is_empty()
            || (!kernel_stalled
                && frozen.is_none()
                && !cni_failing
                && (!unknown.is_empty()
                    || (!kill_failures.is_empty()
                        && (!tasks.is_empty() || !facts.runtime.errors.is_empty()))));
        if runtime_wedged {
            causes.push(NodeCause::WedgedRuntime);
        }
        // The kubelet's own mounts still being there only counts when its
        // log cannot be read: with the log, a failing TearDown shows up
        // there, and mounts without failures are a teardown in progress.
        let kubelet_mounts_left = mounts.iter().any(|m| !m.is_stray());
        let volume_blocked = !busy_volumes.is_empty()
            || mounts.iter().any(PodMount::is_stray)
            || (kubelet_mounts_left
                && !facts.kubelet_log_available
                && !runtime_wedged
                && tasks.iter().all(|t| t.status != "RUNNING"));
        if volume_blocked {
            causes.push(NodeCause::BusyVolume);
        }
        if causes.is_empty() {
            causes.push(NodeCause::Unknown);
        }
    }

    if let Some(c) = &facts.cni {
        evidence.push(if c.configs.is_empty() {
            format!("CNI: no network configuration in {}", c.conf_dir.display())
        } else {
            format!("CNI: {} in {}", c.configs.join(", "), c.conf_dir.display())
        });
    }
    let cni_restore = facts
        .cni
        .as_ref()
        .filter(|c| causes.contains(&NodeCause::CniTeardownFailed) && c.configs.is_empty())
        .and_then(|c| c.own.clone());

    let display = format!("pod {pod_key}");
    let summary = if !stuck {
        match overdue {
            None => format!("{display} is not being deleted"),
            Some(_) if finally_deleted => format!(
                "{display} was finally deleted by the kubelet (grace 0); only finalizers can hold it now"
            ),
            Some(o) => format!(
                "{display} is being deleted ({}s past its deletionTimestamp), not yet stuck",
                o.as_secs()
            ),
        }
    } else {
        let secs = overdue.map_or(0, |o| o.as_secs());
        let mut why = Vec::new();
        if causes.contains(&NodeCause::KubeletDown) {
            why.push(if facts.kubelet_running == Some(false) {
                "its node's kubelet is not running, so nothing kills its containers or confirms its deletion".to_owned()
            } else {
                "its node's kubelet stopped posting status (Ready=Unknown), so nothing confirms its deletion".to_owned()
            });
        }
        if causes.contains(&NodeCause::KernelStall) {
            let (task, wait) = &stalls[0];
            let mut line = format!(
                "process {} ({}) waits in the kernel for {}, so no kill can end it",
                task.pid,
                task.command,
                wait.describe()
            );
            if *wait == KernelWait::FrozenFilesystem
                && let Some(m) = &task.mount
            {
                line.push_str(&format!(
                        " ({} {} mounted at {} in the container is frozen; it goes on once whoever froze it thaws it, e.g. `fsfreeze --unfreeze` on its mount point)",
                        m.fs_type,
                        m.source,
                        m.mount_point.display()
                    ));
            }
            why.push(line);
        }
        if let Some(f) = frozen
            .as_ref()
            .filter(|_| causes.contains(&NodeCause::CgroupFrozen))
        {
            why.push(f.why());
        }
        if causes.contains(&NodeCause::WedgedRuntime) {
            why.push(if wedged_shims.iter().any(ShimFact::is_stopped) {
                "its containerd shim is stopped, so the runtime cannot stop its containers"
                    .to_owned()
            } else {
                "the runtime cannot stop its containers".to_owned()
            });
        }
        if causes.contains(&NodeCause::BusyVolume) {
            let stray: Vec<String> = mounts
                .iter()
                .filter(|m| m.is_stray())
                .map(|m| m.mount.mount_point.display().to_string())
                .collect();
            let vols: Vec<&str> = busy_volumes.iter().map(|v| v.volume.as_str()).collect();
            why.push(match (vols.is_empty(), stray.is_empty()) {
                (false, false) => format!(
                    "the kubelet cannot tear down volume(s) {} because of stray mount(s) {}",
                    vols.join(", "),
                    stray.join(", ")
                ),
                (false, true) => {
                    format!("the kubelet cannot tear down volume(s) {}", vols.join(", "))
                }
                (true, _) => format!("mounts remain under {}", dir.display()),
            });
        }
        if causes.contains(&NodeCause::CniTeardownFailed) {
            why.push(match &facts.cni {
                Some(c) if c.configs.is_empty() => format!(
                    "the network plugin cannot tear down its sandbox: no CNI configuration is left in {} (\"cni plugin not initialized\")",
                    c.conf_dir.display()
                ),
                _ => "the network plugin's DEL fails, so the runtime cannot stop its sandbox (\"failed to destroy network for sandbox\")".to_owned(),
            });
        }
        if causes.contains(&NodeCause::Unknown) {
            why.push("the node shows no cause yet".to_owned());
        }
        format!(
            "{display} is stuck terminating on {} ({secs}s past its deletionTimestamp): {}",
            facts.node,
            why.join("; and ")
        )
    };

    NodeFinding {
        pod: ObjectRef {
            api_version: "v1".into(),
            kind: "Pod".into(),
            namespace: Some(namespace),
            name,
            uid: meta.uid.clone(),
        },
        node: facts.node.clone(),
        pod_dir: dir,
        stuck,
        overdue_seconds: overdue.map(|o| o.as_secs()),
        causes,
        summary,
        evidence,
        busy_volumes,
        mounts,
        holders,
        wedged_shims,
        shims,
        tasks,
        kill_failures,
        next_kubelet_retry,
        kubelet_running: facts.kubelet_running,
        kernel_stalls: stalls,
        cni_restore,
        frozen,
    }
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
