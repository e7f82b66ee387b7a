//! A pod the kubelet does not finish waits on what its status points at
//! on its node.

use super::super::NodeState;
use super::super::build::{Builder, NodePart};
use crate::doctor::model::{
    DeadWebhookFacts, Finding, FindingDetail, ObjectRef, PodStuckHint, WebhookConfigKind,
};
use crate::doctor::webhook::webhooks;

/// A pod the kubelet does not finish waits on what its status points at
/// on its node (the node doctor's causes replace this guess when it
/// looked: see `node_causes`).
pub(super) fn pod_stuck(
    b: &mut Builder,
    i: usize,
    f: &Finding,
    node: Option<&str>,
    hint: PodStuckHint,
) {
    let pod = b.stuck(&f.subject);
    if b.node_doctor_saw(&f.subject) {
        return;
    }
    let node = node.unwrap_or("<none>");
    let s = &f.subject;
    let (to, why) = match hint {
        PodStuckHint::NodeLost => (
            b.on_node(node, NodePart::Kubelet, s, NodeState::NotReady, None),
            "its node does not answer: no kubelet confirms the kill",
        ),
        PodStuckHint::RuntimeKill => (
            b.on_node(node, NodePart::Runtime, s, NodeState::Failing, None),
            "containers still running past grace, or FailedKillPod: the runtime does not stop them",
        ),
        PodStuckHint::VolumeTeardown => (
            b.on_node(node, NodePart::Volumes, s, NodeState::Failing, None),
            "containers gone, the kubelet has not finished: most likely a volume that cannot be unmounted",
        ),
        PodStuckHint::NetworkTeardown => (
            b.on_node(node, NodePart::Network, s, NodeState::Failing, None),
            "FailedKillPod: failed to destroy network for sandbox",
        ),
        PodStuckHint::DeleteRejected => {
            for hook in dead_pod_delete_webhooks(b, s) {
                b.edge(
                    &pod,
                    &hook,
                    "containers gone; the kubelet's final DELETE is rejected by this webhook",
                    Some(i),
                );
            }
            return;
        }
        PodStuckHint::Unknown => (
            b.on_node(
                node,
                NodePart::Kubelet,
                s,
                NodeState::Unknown,
                Some("the API shows no cause".into()),
            ),
            "the API shows no cause; look at the kubelet on its node",
        ),
        // A hint added after this module: the pod waits on its kubelet.
        #[allow(unreachable_patterns)]
        _ => (
            b.on_node(node, NodePart::Kubelet, s, NodeState::Unknown, None),
            "see the finding",
        ),
    };
    b.edge(&pod, &to, why, Some(i));
}

/// The dead webhooks (those with a DeadWebhook finding) that match the
/// final DELETE of pod `subject`.
fn dead_pod_delete_webhooks(b: &mut Builder, subject: &ObjectRef) -> Vec<String> {
    let Some(pod) = crate::doctor::admission::pod_of(b.snapshot, subject) else {
        return Vec::new();
    };
    let dead: Vec<(WebhookConfigKind, String, String)> = b
        .findings
        .iter()
        .filter_map(|g| match &g.detail {
            FindingDetail::DeadWebhook(DeadWebhookFacts {
                configuration,
                configuration_name,
                webhook,
                ..
            }) => Some((*configuration, configuration_name.clone(), webhook.clone())),
            _ => None,
        })
        .collect();
    let matching: Vec<(WebhookConfigKind, String, String)> = webhooks(b.snapshot)
        .into_iter()
        .filter(|w| w.matches_final_delete_of(pod, b.snapshot))
        .map(|w| (w.config_kind, w.config_name.to_owned(), w.name.to_owned()))
        .filter(|w| dead.contains(w))
        .collect();
    matching
        .into_iter()
        .map(|(kind, config, name)| b.webhook(kind, &config, &name, NodeState::FailingClosed, None))
        .collect()
}
