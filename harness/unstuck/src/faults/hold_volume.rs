//! `holdVolume`: a process whose working directory is the kubelet's own
//! mount of one of the pod's volumes (a Secret's, ConfigMap's or projected
//! tmpfs), so its unmount fails with "target is busy" and the pod stays
//! Terminating (kubernetes/kubernetes#113426: a node_exporter with host
//! mounts). Failure catalog case 4. The mechanics are [`busy_mount`]'s
//! ([`BusyKind::HeldVolume`]); this file gives them a scenario name and
//! the `volume` parameter.

use kube::Client;
use serde::Deserialize;

use super::busy_mount::{self, BusyKind, BusyMount, BusyMountOptions};
use super::{FaultError, FaultKind};
use crate::node::Node;

/// `holdVolume`.
pub struct HoldVolumeFault;

/// `holdVolume`'s parameters.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HoldVolumeParams {
    /// The volume's name in the pod spec.
    pub volume: String,
}

impl FaultKind for HoldVolumeFault {
    const NAME: &'static str = "holdVolume";
    type Params = HoldVolumeParams;
    type Placed = BusyMount;

    async fn inject(
        client: &Client,
        node: &dyn Node,
        namespace: &str,
        name: &str,
        params: HoldVolumeParams,
    ) -> Result<BusyMount, FaultError> {
        let opts = BusyMountOptions {
            kind: BusyKind::HeldVolume,
            volume: Some(params.volume),
            holder: true,
        };
        busy_mount::inject(client, node, namespace, name, &opts).await
    }
}
