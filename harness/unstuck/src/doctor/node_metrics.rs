//! What the doctor adds to a snapshot from the node, where the node offers
//! it: kube-controller-manager's namespace workqueue, read once per
//! snapshot by the first round and by every re-check alike.

use super::DoctorOptions;

/// With a Terminating namespace, reads kube-controller-manager's namespace
/// workqueue into the snapshot where the node offers it (a local
/// cluster's, within `kcm_metrics::TIMEOUT`), and only when a namespace
/// could need it.
pub(super) async fn add_controller_manager_metrics(
    snapshot: &mut unstuck_core::doctor::Snapshot,
    opts: &DoctorOptions,
) {
    let terminating = snapshot
        .namespaces
        .iter()
        .any(|n| n.metadata.deletion_timestamp.is_some());
    if let Some(node) = &opts.node
        && terminating
        && snapshot.controller_manager_metrics.is_none()
    {
        // A node that cannot say leaves the judgement to the API alone.
        snapshot.controller_manager_metrics =
            node.controller_manager_metrics().await.unwrap_or_else(|e| {
                tracing::debug!("controller-manager metrics: {e}");
                None
            });
    }
}
