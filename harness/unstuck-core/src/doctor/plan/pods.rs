//! Pod remedies: none from the API. A pod stuck terminating needs a
//! node-level remedy (or a webhook's, when one rejects its final DELETE),
//! and a pod that never starts is fixed in its spec, image or node.

use super::{PlannedStep, refuse, related_findings, wait};
use crate::doctor::model::{Finding, FindingDetail, FindingKind, PodStuckHint};

/// PodNotStarting: not stuck in deletion; nothing for the doctor.
pub(super) fn not_starting(i: usize, f: &Finding) -> PlannedStep {
    refuse(
        i,
        format!(
            "{} is not stuck in deletion; what keeps it from starting is fixed in its spec, image or node, not by the doctor",
            f.subject
        ),
    )
}

/// PodStuckTerminating: a wait when a dead webhook rejects its final
/// DELETE, otherwise a refusal naming the node-level remedy.
pub(super) fn stuck_terminating(i: usize, f: &Finding, all: &[Finding]) -> PlannedStep {
    if matches!(
        &f.detail,
        FindingDetail::PodStuckTerminating {
            hint: PodStuckHint::DeleteRejected,
            ..
        }
    ) {
        let related = related_findings(all, |g| g.kind() == FindingKind::DeadWebhook);
        wait(
            i,
            format!(
                "{}: the kubelet deletes it at its next status sync once the webhook rejecting its final DELETE no longer fails closed",
                f.subject
            ),
            format!(
                "no force delete and nothing on the node: the pod's containers are gone; what blocks is admission{related}"
            ),
        )
    } else {
        let hint = match &f.detail {
            FindingDetail::PodStuckTerminating { hint, node, .. } => {
                let node = node.as_deref().unwrap_or("<none>");
                match hint {
                    PodStuckHint::VolumeTeardown => format!(
                        "release what keeps its volumes busy on node {node} and let the kubelet finish"
                    ),
                    PodStuckHint::RuntimeKill => format!(
                        "un-wedge the container runtime on node {node} and let the kubelet retry"
                    ),
                    PodStuckHint::NodeLost => format!(
                        "bring the kubelet on node {node} back (it then finishes the pod by itself); only if the node is known to be down for good, `kubectl taint node {node} node.kubernetes.io/out-of-service=nodeshutdown:NoExecute` lets the pod garbage collector delete its pods and their volumes detach (remove the taint when the node returns)"
                    ),
                    PodStuckHint::Unknown => format!("inspect the kubelet on node {node}"),
                    PodStuckHint::NetworkTeardown => format!(
                        "repair the network plugin on node {node} (its binary, configuration, or what it calls); killing shims or restarting the runtime does not help, and a force delete would leak the sandbox, its network namespace and its IP"
                    ),
                    PodStuckHint::DeleteRejected => format!(
                        "make the webhook rejecting the kubelet's final DELETE fail open, then the kubelet on node {node} finishes"
                    ),
                }
            }
            _ => "inspect the kubelet on its node".to_owned(),
        };
        refuse(
            i,
            format!(
                "{} needs a node-level remedy: {hint}; a force delete (grace 0) is the last resort and is not planned by the API doctor",
                f.subject
            ),
        )
    }
}
