//! What [`super::diagnose_pod`] reads from [`NodeFacts`], one part of the
//! node at a time; each step appends its quoted facts to the evidence in
//! the order the verdict shows them.

use std::{collections::BTreeMap, path::Path};

use k8s_openapi::jiff::SignedDuration;

use super::super::kernel::{KernelTask, KernelWait, kernel_stalls};
use super::super::klog::{
    KubeletEvent, KubeletLogEntry, RuntimeCall, VolumeFailureKind, is_busy_error, parse_kubelet_log,
};
use super::super::runtime::{ShimFact, TaskFact};
use super::super::thaw::{FrozenPod, frozen_pod};
use super::super::{Holder, NodeFacts};
use super::{BusyVolume, DiagnoseNodeOptions};
use crate::doctor::model::status_container_ids;
use crate::text::quoted;

/// Where the pod's deletion stands.
pub(super) struct Deletion {
    /// Time since the deletionTimestamp; `None` when not being deleted.
    pub overdue: Option<SignedDuration>,
    /// The kubelet already sent the final delete (grace 0).
    pub finally_deleted: bool,
    pub stuck: bool,
}

/// Stuck: keyed on deletionTimestamp (it includes the grace period).
pub(super) fn deletion(
    facts: &NodeFacts,
    opts: &DiagnoseNodeOptions,
    evidence: &mut Vec<String>,
) -> Deletion {
    let meta = &facts.pod.metadata;
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
    Deletion {
        overdue,
        finally_deleted,
        stuck,
    }
}

/// The kubelet itself and the node's standing with the control plane.
/// Returns whether the node is `Ready=Unknown`.
pub(super) fn kubelet_standing(facts: &NodeFacts, evidence: &mut Vec<String>) -> bool {
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
            "node {}: Ready={} ({}): {}{}",
            facts.node,
            c.status,
            c.reason.as_deref().unwrap_or("<none>"),
            quoted(c.message.as_deref().unwrap_or_default()),
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
    node_unknown
}

/// The kubelet's log, the lines about this pod only.
pub(super) fn pod_log(
    facts: &NodeFacts,
    uid: &str,
    pod_key: &str,
    evidence: &mut Vec<String>,
) -> Vec<KubeletLogEntry> {
    let ids = facts.runtime.ids();
    let mut pod_ids = ids.clone();
    // IDs from the pod's status too, so kubelet lines about them count
    // even when the runtime no longer lists them.
    pod_ids.extend(status_container_ids(&facts.pod));
    pod_ids.sort();
    pod_ids.dedup();
    let entries: Vec<_> = parse_kubelet_log(facts.kubelet_log.iter().map(String::as_str))
        .into_iter()
        .filter(|e| e.event.concerns(uid, pod_key, &pod_ids))
        .collect();
    if !facts.kubelet_log_available {
        evidence.push(
            "kubelet log not available on this node: volume errors cannot be read".to_owned(),
        );
    }
    entries
}

/// Volume teardown failures not followed by a success for the same volume.
pub(super) fn busy_volumes(
    entries: &[KubeletLogEntry],
    evidence: &mut Vec<String>,
) -> Vec<BusyVolume> {
    let mut volumes: BTreeMap<String, BusyVolume> = BTreeMap::new();
    for e in entries {
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
            "kubelet: {} failed for volume {} {} time(s) ({} .. {}): {}{}",
            match v.kind {
                VolumeFailureKind::TearDown => "UnmountVolume.TearDown",
                VolumeFailureKind::SubPathCleanup => "subPath cleanup",
            },
            quoted(&v.volume),
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
    busy_volumes
}

/// Processes holding something under the pod directory.
pub(super) fn holders(facts: &NodeFacts, dir: &Path, evidence: &mut Vec<String>) -> Vec<Holder> {
    let holders: Vec<Holder> = facts
        .holders
        .iter()
        .filter(|h| h.uses.iter().any(|u| u.path.starts_with(dir)))
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
    holders
}

/// The runtime's side of the pod.
pub(super) struct RuntimeView {
    pub tasks: Vec<TaskFact>,
    pub shims: Vec<ShimFact>,
    pub wedged_shims: Vec<ShimFact>,
    pub kill_failures: Vec<String>,
}

/// The runtime: shims, tasks, kill failures.
pub(super) fn runtime(
    facts: &NodeFacts,
    entries: &[KubeletLogEntry],
    evidence: &mut Vec<String>,
) -> RuntimeView {
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
    let kill_failures = kill_failures(facts, entries);
    // Keep the evidence readable: the last few of each, in log order.
    let shown = kill_failures.len().saturating_sub(6);
    evidence.extend(kill_failures.iter().skip(shown).cloned());
    RuntimeView {
        tasks,
        shims,
        wedged_shims,
        kill_failures,
    }
}

/// Kill failures quoted from the kubelet log, then from the pod's events.
fn kill_failures(facts: &NodeFacts, entries: &[KubeletLogEntry]) -> Vec<String> {
    let mut kill_failures: Vec<String> = Vec::new();
    for e in entries {
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
    kill_failures
}

/// What the kernel says about the pod's processes, read before any
/// runtime remedy is considered. A frozen task shows `D` too, in
/// whatever sleep it was frozen in: the freezer, not a kernel call,
/// holds it.
pub(super) fn kernel(
    facts: &NodeFacts,
    uid: &str,
    evidence: &mut Vec<String>,
) -> (Option<FrozenPod>, Vec<(KernelTask, KernelWait)>) {
    let frozen = frozen_pod(uid, &facts.cgroups, &facts.runtime);
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
    (frozen, stalls)
}
