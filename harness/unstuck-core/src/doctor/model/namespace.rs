//! What the namespace controller shows: the counts its conditions quote
//! ([`ResourceCount`], [`FinalizerCount`]), its workqueue as
//! kube-controller-manager's metrics give it ([`ControllerManagerMetrics`]),
//! and why it is not progressing ([`NamespaceStall`]). Reading and judging
//! them is [`crate::doctor::conditions`]' and
//! [`crate::doctor::namespace_stall`]'s.

use serde::{Deserialize, Serialize};

/// One entry of a `NamespaceContentRemaining` message.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceCount {
    /// Plural resource name, e.g. `widgets`.
    pub resource: String,
    /// API group, `""` for core.
    pub group: String,
    /// Instances remaining.
    pub count: u64,
}

impl ResourceCount {
    /// `resource.group` (just `resource` for the core group), the way
    /// kubectl names a resource type.
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.resource.clone()
        } else {
            format!("{}.{}", self.resource, self.group)
        }
    }
}

/// One entry of a `NamespaceFinalizersRemaining` message.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FinalizerCount {
    /// The finalizer key.
    pub finalizer: String,
    /// How many objects still carry it.
    pub count: u64,
}

/// What the collector read from kube-controller-manager's `/metrics`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ControllerManagerMetrics {
    /// Where it was read, e.g. `https://127.0.0.1:21057/metrics`.
    pub endpoint: String,
    /// Why it could not be read (unreachable, timed out, refused, not
    /// parseable); `None` when it was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The namespace controller's workqueue; `None` when the endpoint was
    /// read but has no `name="namespace"` series (the controller is not
    /// running in that process).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_queue: Option<WorkqueueMetrics>,
}

/// One client-go workqueue's gauges and counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkqueueMetrics {
    /// `workqueue_depth`: items waiting.
    pub depth: f64,
    /// `workqueue_unfinished_work_seconds`: summed age of the items being
    /// processed right now.
    pub unfinished_work_seconds: f64,
    /// `workqueue_longest_running_processor_seconds`: the oldest item in
    /// processing.
    pub longest_running_processor_seconds: f64,
    /// `workqueue_adds_total`: items ever added.
    pub adds_total: f64,
}

/// Why the namespace controller is not progressing, as far as the
/// evidence goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum StallCause {
    /// kube-controller-manager's leader Lease is missing or expired.
    ControllerManagerNotLeading,
    /// Its namespace workqueue has an item in processing for longer than
    /// the threshold.
    WorkqueueStuck,
    /// Its namespace workqueue is empty with nothing in processing: the
    /// deletion never reached the controller (or it dropped it).
    WorkqueueIdle,
    /// Its metrics have no namespace workqueue: the namespace controller is
    /// not running in that process (not the leader, or
    /// `--controllers=-namespace`).
    NamespaceControllerMissing,
    /// Another Terminating namespace's condition names a failure that
    /// blocks every namespace deletion (discovery, group/version parsing).
    ClusterWideBlocker,
    /// The collector's own list of a type in the namespace failed on that
    /// type's CRD conversion webhook: the namespace controller's lists
    /// fail the same way, before it has written any condition saying so.
    ConversionWebhookFailing,
    /// None of the above could be shown.
    Unknown,
}

impl StallCause {
    /// One line: what it means and where to look.
    pub fn explain(self) -> &'static str {
        match self {
            StallCause::ControllerManagerNotLeading => {
                "kube-controller-manager is down or not leading (its leader lease is not renewed); nothing runs the namespace controller"
            }
            StallCause::WorkqueueStuck => {
                "the namespace controller is stuck: a worker has been on one item for longer than the threshold"
            }
            StallCause::WorkqueueIdle => {
                "the namespace controller is idle: its workqueue is empty and nothing is in processing, so it is not working on this namespace now (a retry delayed by its rate limiter, or a deletion its informer never delivered)"
            }
            StallCause::NamespaceControllerMissing => {
                "the kube-controller-manager whose metrics were read runs no namespace controller (it is not the leader, or its --controllers flag leaves it out)"
            }
            StallCause::ClusterWideBlocker => {
                "other namespaces' conditions name a failure that blocks every namespace deletion"
            }
            StallCause::ConversionWebhookFailing => {
                "a CRD's conversion webhook fails: the namespace controller cannot list or delete that type's objects, so its deletion cannot go on; repair the webhook's backend (or see the DeadConversionWebhook finding)"
            }
            StallCause::Unknown => {
                "no cause could be shown from the API; read kube-controller-manager's log"
            }
        }
    }
}

/// The detail of a
/// [`FindingKind::NamespaceNotProgressing`](super::finding_kind::FindingKind::NamespaceNotProgressing).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NamespaceStall {
    /// The most likely cause.
    pub cause: StallCause,
    /// Whether the namespace has any status condition.
    pub has_conditions: bool,
    /// Other Terminating namespaces whose conditions name a cluster-wide
    /// failure.
    pub blocked_elsewhere: Vec<String>,
    /// CRDs whose conversion webhook failed the collector's own lists.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failing_conversions: Vec<String>,
}
