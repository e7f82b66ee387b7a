//! A line of the kubelet's log, on a node the run can reach.

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use unstuck_core::scenario::KubeletLogCheck;

use super::{CheckContext, CheckError, CheckResult};

/// How much of the kubelet's log a condition searches, from its end: far
/// more than a scenario's run writes, far less than a long-lived node's.
const KUBELET_LOG_WINDOW: u64 = 64 << 20;

pub(super) async fn kubelet_log(ctx: &CheckContext<'_>, k: &KubeletLogCheck) -> CheckResult {
    let node = ctx.node.ok_or(CheckError::NoNode)?;
    let text = node
        .kubelet_log_tail(KUBELET_LOG_WINDOW)
        .await?
        .ok_or_else(|| CheckError::Unmet(format!("node {} has no kubelet log yet", node.name())))?;
    // A pod is named in kubelet lines as ns/name or, in volume
    // operations, only by its UID: accept either.
    let mut pod_keys = Vec::new();
    if let (Some(p), Some(ns)) = (&k.pod, &k.namespace) {
        let ns = ctx.names.namespace(ns);
        pod_keys.push(format!("{ns}/{}", p.as_str()));
        let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
        // Without the UID (the pod is gone, or the read failed) the
        // ns/name form is still looked for; a failed read is said.
        match pods.get_opt(p).await {
            Ok(pod) => pod_keys.extend(pod.and_then(|p| p.metadata.uid)),
            Err(e) => {
                return Err(CheckError::Api {
                    what: format!("reading pod {ns}/{}", p.as_str()),
                    source: e,
                });
            }
        }
    }
    let wanted = ctx.names.text(&k.contains);
    let hit = text.lines().rev().find(|l| {
        l.contains(wanted.as_str())
            && (pod_keys.is_empty() || pod_keys.iter().any(|key| l.contains(key)))
    });
    match hit {
        Some(line) => Ok(format!("kubelet log: {}", line.trim())),
        None => Err(CheckError::Unmet(format!(
            "no kubelet log line contains \"{wanted}\""
        ))),
    }
}
