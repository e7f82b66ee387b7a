//! Pods that never start: the other half of seed 004's catalogue (Pending,
//! ContainerCreating, ImagePullBackOff, ImageInspectError,
//! CreateContainerConfigError, CrashLoopBackOff). Not stuck in Terminating,
//! but the same question from the same person: why does this pod not get
//! where it should, and what evidence says so. Explained, never remedied:
//! the fix is in the workload's spec, its image or its node.
//!
//! The strings matched are the kubelet's and the scheduler's own: waiting
//! reasons from `pkg/kubelet/images/types.go`,
//! `pkg/kubelet/container/sync_result.go` and
//! `pkg/kubelet/kuberuntime/kuberuntime_container.go`, event reasons from
//! `pkg/kubelet/events/event.go`, and the `PodScheduled` condition.

mod pull;

use k8s_openapi::api::core::v1::{ContainerStateTerminated, Pod, PodStatus};
use k8s_openapi::jiff::SignedDuration;

use super::model::{
    Finding, FindingDetail, ObjectRef, PodStartCause, PullProblem, Snapshot, container_statuses,
    display_name,
};
use super::owner::fmt_secs;
use crate::text::quoted;

/// Waiting reasons that mean the image cannot be had.
const IMAGE_PULL: [&str; 4] = [
    "ErrImagePull",
    "ImagePullBackOff",
    "ErrImageNeverPull",
    "InvalidImageName",
];
/// Waiting reasons that mean the container cannot be created from its spec.
const CONTAINER_CONFIG: [&str; 4] = [
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
    "PreStartHookError",
];
/// Warning event reasons worth quoting for a pod that does not start.
const EVENT_REASONS: [&str; 10] = [
    "FailedScheduling",
    "FailedToRetrieveImagePullSecret",
    "FailedMount",
    "FailedAttachVolume",
    "FailedCreatePodSandBox",
    "Failed",
    "InspectFailed",
    "ErrImageNeverPull",
    "BackOff",
    "FailedSync",
];
/// How many events are quoted per pod.
const MAX_EVENTS: usize = 6;

/// A [`FindingKind::PodNotStarting`] for `pod` when it is not being
/// deleted, is older than `threshold`, and has not started for a reason
/// the API shows (or is still Pending with none).
pub(crate) fn pod_not_starting(
    snapshot: &Snapshot,
    threshold: SignedDuration,
    pod: &Pod,
) -> Option<Finding> {
    if pod.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let status = pod.status.as_ref()?;
    let phase = status.phase.clone();
    if matches!(phase.as_deref(), Some("Succeeded" | "Failed")) {
        return None;
    }
    let age = snapshot.age_of(pod.metadata.creation_timestamp.as_ref()?.0);
    if age <= threshold {
        return None;
    }

    let mut evidence = vec![format!(
        "phase {}, created {} before the snapshot, node {}",
        phase.as_deref().unwrap_or("<unknown>"),
        fmt_secs(age.as_secs()),
        pod.spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .unwrap_or("<none>")
    )];
    let unscheduled = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "PodScheduled" && c.status == "False");
    if let Some(c) = unscheduled {
        evidence.push(format!(
            "PodScheduled=False ({}): {}",
            c.reason.as_deref().unwrap_or_default(),
            quoted(c.message.as_deref().unwrap_or_default())
        ));
    }
    let waiting_cause = container_lines(status, &mut evidence);
    let event_cause = event_lines(snapshot, pod, unscheduled.is_some(), &mut evidence);

    // A sandbox or mount failure the kubelet got past is history: a pod
    // whose containers all run has started, whatever its events say (on a
    // loaded node a first sandbox attempt can time out and the second work).
    let started = phase.as_deref() == Some("Running")
        && container_statuses(status)
            .all(|cs| cs.state.as_ref().is_some_and(|s| s.running.is_some()));
    let pull = pull::image_pull(snapshot, pod, status);
    let pulling_slowly = pull.as_ref().filter(|p| p.problem == PullProblem::Slow);
    if let Some(p) = pulling_slowly {
        evidence.push(format!(
            "event Normal Pulling: {} {} before the snapshot, and no Pulled or Failed since",
            quoted(&p.quote),
            fmt_secs(p.pulling_for_seconds.unwrap_or_default())
        ));
    }
    let cause = if unscheduled.is_some() {
        PodStartCause::Unschedulable
    } else if let Some(c) = waiting_cause {
        c
    } else if let Some(c) = event_cause.filter(|_| !started) {
        c
    } else if pulling_slowly.is_some() {
        PodStartCause::ImagePull
    } else if phase.as_deref() == Some("Pending") {
        PodStartCause::Unknown
    } else {
        // Running, and no container waits for a reason of note.
        return None;
    };

    let pull = pull.filter(|_| cause == PodStartCause::ImagePull);
    let explained = match &pull {
        Some(p) => p.explain(),
        None => cause.explain().to_string(),
    };
    Some(Finding {
        subject: ObjectRef::pod(&pod.metadata),
        summary: format!(
            "pod {} has not started {} after it was created: {explained}",
            display_name(&pod.metadata),
            fmt_secs(age.as_secs()),
        ),
        evidence,
        detail: FindingDetail::PodNotStarting {
            node: pod.spec.as_ref().and_then(|s| s.node_name.clone()),
            phase,
            age_seconds: age.as_secs(),
            cause,
            pull,
        },
    })
}

/// One evidence line per container that waits for a reason of note or
/// crash-loops; the first such container's cause.
fn container_lines(status: &PodStatus, evidence: &mut Vec<String>) -> Option<PodStartCause> {
    let mut waiting_cause = None;
    for cs in container_statuses(status) {
        let state = cs.state.as_ref();
        // Between two back-offs a crash-looping container shows as just
        // exited (`kubectl get pods` says Error) rather than waiting.
        if let Some(t) = state.and_then(|s| s.terminated.as_ref())
            && t.exit_code != 0
            && cs.restart_count > 0
        {
            evidence.push(format!(
                "container {}: {} and restarted {} time(s)",
                cs.name,
                exited(t),
                cs.restart_count
            ));
            waiting_cause.get_or_insert(PodStartCause::CrashLoop);
            continue;
        }
        let Some(w) = state.and_then(|s| s.waiting.as_ref()) else {
            continue;
        };
        let reason = w.reason.as_deref().unwrap_or_default();
        let cause = waiting_cause_of(reason);
        if cause.is_none() && reason != "ContainerCreating" && reason != "PodInitializing" {
            continue;
        }
        let mut line = format!("container {}: waiting ({reason})", cs.name);
        if let Some(m) = w.message.as_deref().filter(|m| !m.is_empty()) {
            line.push_str(&format!(": {m}", m = quoted(m)));
        }
        if cs.restart_count > 0 {
            line.push_str(&format!(", restarted {} time(s)", cs.restart_count));
        }
        if let Some(t) = cs.last_state.as_ref().and_then(|s| s.terminated.as_ref()) {
            line.push_str(&format!("; last run {}", exited(t)));
        }
        evidence.push(line);
        if waiting_cause.is_none() {
            waiting_cause = cause;
        }
    }
    waiting_cause
}

/// The pod's warning events, quoted (at most [`MAX_EVENTS`]); the cause a
/// volume or sandbox failure among them names.
fn event_lines(
    snapshot: &Snapshot,
    pod: &Pod,
    unscheduled: bool,
    evidence: &mut Vec<String>,
) -> Option<PodStartCause> {
    let mut events = pod_warnings(snapshot, pod);
    if !unscheduled {
        // Old news once it is scheduled (often "untolerated taint(s)" from
        // before the node was Ready).
        events.retain(|(reason, _)| reason != "FailedScheduling");
    }
    let event_cause = events.iter().find_map(|(reason, _)| match reason.as_str() {
        "FailedMount" | "FailedAttachVolume" => Some(PodStartCause::VolumeMount),
        "FailedCreatePodSandBox" => Some(PodStartCause::Sandbox),
        _ => None,
    });
    evidence.extend(events.iter().take(MAX_EVENTS).map(|(reason, message)| {
        format!(
            "event Warning {reason}: {message}",
            message = quoted(message)
        )
    }));
    event_cause
}

/// `exited 3 (Error)`.
fn exited(t: &ContainerStateTerminated) -> String {
    match t.reason.as_deref() {
        Some(r) => format!("exited {} ({r})", t.exit_code),
        None => format!("exited {}", t.exit_code),
    }
}

fn waiting_cause_of(reason: &str) -> Option<PodStartCause> {
    if IMAGE_PULL.contains(&reason) {
        Some(PodStartCause::ImagePull)
    } else if reason == "ImageInspectError" {
        Some(PodStartCause::ImageInspect)
    } else if CONTAINER_CONFIG.contains(&reason) {
        Some(PodStartCause::ContainerConfig)
    } else if reason == "CrashLoopBackOff" {
        Some(PodStartCause::CrashLoop)
    } else {
        None
    }
}

/// The pod's Warning events of note, newest first, one per distinct
/// (reason, message).
fn pod_warnings(snapshot: &Snapshot, pod: &Pod) -> Vec<(String, String)> {
    let mut events: Vec<_> = snapshot
        .pod_warnings(&pod.metadata)
        .filter(|e| EVENT_REASONS.contains(&e.reason.as_deref().unwrap_or_default()))
        .collect();
    events.sort_by_key(|e| {
        std::cmp::Reverse(
            e.last_timestamp
                .as_ref()
                .map(|t| t.0)
                .or(e.event_time.as_ref().map(|t| t.0)),
        )
    });
    let mut out: Vec<(String, String)> = Vec::new();
    for e in events {
        let item = (
            e.reason.clone().unwrap_or_default(),
            e.message.clone().unwrap_or_default(),
        );
        if !out.contains(&item) {
            out.push(item);
        }
    }
    out
}
