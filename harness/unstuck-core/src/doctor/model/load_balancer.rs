//! A Service that waits on its cloud load balancer's deletion: the facts a
//! [`super::FindingKind::LoadBalancerCleanupPending`] finding carries.
//!
//! `service.kubernetes.io/load-balancer-cleanup` is added and removed by
//! one controller only: the service controller of a cloud controller
//! manager (`k8s.io/cloud-provider/controllers/service`), which removes it
//! after the cloud's load balancer is deleted. kube-controller-manager has
//! not run that controller since in-tree cloud providers left it (v1.31,
//! KEP-2395: its `service-lb-controller` only logs a warning), so on a
//! cluster whose cloud controller manager is gone nothing ever removes it.
//! Removing it by hand lets the Service go and leaves the load balancer in
//! the cloud, still billed, with nothing in the cluster that remembers it:
//! hence the addresses, kept so a person can find and delete it.

use serde::{Deserialize, Serialize};

use super::object::ObjectRecord;
use super::verdict::FinalizerRemoval;

/// The finalizer the cloud controller manager's service controller sets on
/// every Service of type LoadBalancer before it creates the load balancer.
pub const LOAD_BALANCER_CLEANUP: &str = "service.kubernetes.io/load-balancer-cleanup";

/// The cloud controller manager's leader-election Lease (its default
/// `--leader-elect-resource-namespace`/`-name`).
pub const CLOUD_CONTROLLER_LEASE: (&str, &str) = ("kube-system", "cloud-controller-manager");

/// The Event source its service controller reports as.
pub const SERVICE_CONTROLLER: &str = "service-controller";

/// Whether `record` is a Service holding the cleanup key: what the
/// detector takes and the collector reads whole, decided in one place.
pub fn holds_cleanup_key(record: &ObjectRecord) -> bool {
    record.api_version == "v1"
        && record.kind == "Service"
        && record
            .finalizers()
            .iter()
            .any(|f| f == LOAD_BALANCER_CLEANUP)
}

/// The facts of one Service held by the load balancer cleanup finalizer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LoadBalancerCleanup {
    /// The Service's finalizers and the verdict on the cleanup key's owner
    /// (the cloud controller manager); `orphan` holds the key only when
    /// that owner is shown dead (or assumed dead by `--assume-dead`).
    pub removal: FinalizerRemoval,
    /// `status.loadBalancer.ingress` (IP or hostname): the load balancer a
    /// removal by hand leaves in the cloud. Empty when the status names
    /// none (or the Service could not be read whole).
    pub ingress: Vec<String>,
    /// The newest Warning from the service controller about this Service
    /// (`DeleteLoadBalancerFailed`, ...): the cloud refusing the deletion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<CloudFailure>,
}

impl LoadBalancerCleanup {
    /// The addresses in words, for summaries and plan reasons.
    pub fn ingress_text(&self) -> String {
        if self.ingress.is_empty() {
            "none in its status".to_owned()
        } else {
            self.ingress.join(", ")
        }
    }
}

/// A failure the service controller reported on the Service.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CloudFailure {
    /// The Event's reason, e.g. `DeleteLoadBalancerFailed`.
    pub reason: String,
    /// Its message: the cloud's own error.
    pub message: String,
    /// How many times it was reported (`count`, or the series' count).
    pub count: i32,
    /// Seconds from its last report to the snapshot.
    pub last_seen_secs: i64,
}
