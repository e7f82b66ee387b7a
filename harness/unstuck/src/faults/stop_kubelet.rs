//! Lost node: the kubelet of the pod's node is stopped.
//!
//! The runtime and the shims keep running, and so do the pod's containers,
//! but nothing on the node talks to the control plane any more. The node
//! lease is no longer renewed; after the controller manager's node-monitor
//! grace period the node lifecycle controller sets the node's `Ready`
//! condition to `Unknown` (reason `NodeStatusUnknown`, message `Kubelet
//! stopped posting node status.`), taints it
//! `node.kubernetes.io/unreachable` and marks its pods not ready. A pod
//! deleted meanwhile gets its deletionTimestamp (grace period included)
//! and then stays Terminating: only its kubelet confirms the containers
//! are gone with the final delete. Seed 004's pods on a NotReady node.
//!
//! Revert starts the kubelet again (as its service manager would); it then
//! kills the containers and finishes the pod by itself.

use kube::Client;
use serde::{Deserialize, Serialize};

use super::{FaultError, FaultKind, NoParams, Placed, PodTarget, Reverted, target_pod};
use crate::node::{Node, ProcRef};

/// A stopped kubelet in place.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoppedKubelet {
    pub pod: PodTarget,
    /// The kubelet process that was stopped.
    pub kubelet: ProcRef,
    /// Whether it ignored SIGTERM and had to be killed.
    pub killed: bool,
}

/// `stopKubelet`.
pub struct StopKubeletFault;

impl FaultKind for StopKubeletFault {
    const NAME: &'static str = "stopKubelet";
    type Params = NoParams;
    type Placed = StoppedKubelet;

    async fn inject(
        client: &Client,
        node: &dyn Node,
        namespace: &str,
        name: &str,
        _: NoParams,
    ) -> Result<StoppedKubelet, FaultError> {
        inject(client, node, namespace, name).await
    }
}

/// Stops the kubelet of `node`, where the pod must run.
pub async fn inject(
    client: &Client,
    node: &dyn Node,
    namespace: &str,
    name: &str,
) -> Result<StoppedKubelet, FaultError> {
    let (pod, _) = target_pod(client, node, namespace, name).await?;
    let stop = node.stop_kubelet().await?;
    let Some(kubelet) = stop.stopped else {
        return Err(FaultError::NotInjected(format!(
            "no kubelet runs on node {}",
            node.name()
        )));
    };
    if node.kubelet_running().await? {
        return Err(FaultError::NotInjected(format!(
            "a kubelet still runs on node {} after stopping {}",
            node.name(),
            kubelet.pid
        )));
    }
    Ok(StoppedKubelet {
        pod,
        kubelet,
        killed: stop.killed,
    })
}

impl Placed for StoppedKubelet {
    fn pod(&self) -> &PodTarget {
        &self.pod
    }

    fn describe(&self) -> String {
        format!(
            "stopped kubelet: {} to kubelet {} on node {} (pod {} runs there)",
            if self.killed {
                "SIGTERM, then SIGKILL,"
            } else {
                "SIGTERM"
            },
            self.kubelet.pid,
            self.pod.node,
            self.pod
        )
    }

    /// Starts the kubelet again when none runs. One the doctor (or anyone)
    /// already started is left alone.
    async fn revert(&self, node: &dyn Node) -> Result<Reverted, FaultError> {
        if node.kubelet_running().await? {
            return Ok(Vec::new());
        }
        let r = node.restart_kubelet().await?;
        Ok(vec![format!(
            "started the kubelet on node {} again: pid {} (answering after {} ms)",
            node.name(),
            r.new_pid,
            r.took_ms
        )])
    }
}
