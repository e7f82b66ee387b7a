//! Wedged runtime (catalog case 5, seed 000).
//!
//! SIGSTOP the `containerd-shim-runc-v2` serving the pod (containerd
//! groups a pod's containers into its sandbox's shim). The shim then
//! answers nothing: containerd's state requests time out, `ctr task ls`
//! shows the pod's tasks as `UNKNOWN` with pid 0, and when the pod is
//! deleted every StopContainer/StopPodSandbox from the kubelet runs into
//! its deadline (`runtimeRequestTimeout`). The kubelet logs
//! `"Kill container failed" err="rpc error: code = DeadlineExceeded desc =
//! context deadline exceeded"` and records a `FailedKillPod` event
//! (`error killing pod: [failed to "KillContainer" for "c" with
//! KillContainerError: "rpc error: code = DeadlineExceeded ..."`), and the
//! pod stays Running and Terminating: docker's "listed but cannot be
//! stopped" container of seed 000, on containerd.
//!
//! The same deadline has a second wording: containerd inherits the
//! kubelet's gRPC deadline, and when its own context expires first it
//! answers before the kubelet gives up, as `code = Unknown desc = failed
//! to stop container "<id>": context deadline exceeded: unknown`. Which
//! one a run sees is a race of a few milliseconds (a CI run saw the
//! second for the first kill and the first for the retry).

use kube::Client;
use serde::{Deserialize, Serialize};

use super::{FaultError, undone, FaultKind, NoParams, Placed, PodTarget, Reverted, target_pod};
use crate::node::{Node, ProcRef, runtime_facts};

/// A stopped shim in place.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WedgedShim {
    pub pod: PodTarget,
    /// The stopped shim processes (one with containerd's grouping).
    pub shims: Vec<ProcRef>,
    /// Their `-id`s (sandbox IDs with grouping).
    pub shim_ids: Vec<String>,
}

/// `wedgeShim`.
pub struct WedgeShimFault;

impl FaultKind for WedgeShimFault {
    const NAME: &'static str = "wedgeShim";
    type Params = NoParams;
    type Placed = WedgedShim;

    async fn inject(
        client: &Client,
        node: &dyn Node,
        namespace: &str,
        name: &str,
        _: NoParams,
    ) -> Result<WedgedShim, FaultError> {
        inject(client, node, namespace, name).await
    }
}

/// Stops the shim(s) serving the pod. The pod must run on `node`.
pub async fn inject(
    client: &Client,
    node: &dyn Node,
    namespace: &str,
    name: &str,
) -> Result<WedgedShim, FaultError> {
    let (pod, api_pod) = target_pod(client, node, namespace, name).await?;
    let from_status: Vec<String> = api_pod
        .status
        .iter()
        .flat_map(|s| s.container_statuses.iter().flatten())
        .filter_map(|c| c.container_id.as_deref())
        .map(|id| id.rsplit("://").next().unwrap_or(id).to_owned())
        .collect();
    let rt = runtime_facts(node, &pod.uid, &from_status).await;
    if rt.shims.is_empty() {
        return Err(FaultError::NoShim {
            pod: pod.to_string(),
            node: node.name().into(),
            ids: rt.ids().join(", "),
            errors: rt.errors.join("; "),
        });
    }
    let wedged = WedgedShim {
        pod,
        shims: rt
            .shims
            .iter()
            .map(|s| ProcRef {
                pid: s.pid,
                start_time: s.start_time,
                command: s.command.clone(),
            })
            .collect(),
        shim_ids: rt.shims.iter().map(|s| s.id.clone()).collect(),
    };
    for s in &wedged.shims {
        if let Err(e) = node.signal(s.pid, libc::SIGSTOP).await {
            return Err(undone(e, &wedged, node).await);
        }
    }
    // SIGSTOP takes effect asynchronously; confirm every shim is stopped.
    for _ in 0..40 {
        let procs = node.processes().await?;
        if wedged
            .shims
            .iter()
            .all(|s| s.find(&procs).is_some_and(|p| p.state == 'T'))
        {
            return Ok(wedged);
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let failed = FaultError::NotInjected(format!(
        "shim(s) {} did not reach the stopped state",
        crate::text::list(
            &wedged
                .shims
                .iter()
                .map(|s| s.pid.to_string())
                .collect::<Vec<_>>()
        )
    ));
    Err(undone(failed, &wedged, node).await)
}

impl Placed for WedgedShim {
    fn pod(&self) -> &PodTarget {
        &self.pod
    }

    fn describe(&self) -> String {
        format!(
            "wedged shim: SIGSTOP to containerd-shim {} (-id {}) serving pod {}",
            self.shims
                .iter()
                .map(|s| s.pid.to_string())
                .collect::<Vec<_>>()
                .join(", "),
            self.shim_ids.join(", "),
            self.pod
        )
    }

    /// SIGCONT to every shim that is still the same process and still
    /// stopped. A shim the doctor killed, or that the runtime replaced, is
    /// left alone.
    async fn revert(&self, node: &dyn Node) -> Result<Reverted, FaultError> {
        let procs = node.processes().await?;
        let mut done = Vec::new();
        for s in &self.shims {
            if s.find(&procs).is_some_and(|p| p.state == 'T') {
                node.signal(s.pid, libc::SIGCONT).await?;
                done.push(format!("continued shim {}", s.pid));
            }
        }
        Ok(done)
    }
}
