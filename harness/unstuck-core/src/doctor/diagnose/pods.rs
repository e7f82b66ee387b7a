//! Pod findings: a pod the kubelet has not finished deleting, with the
//! most likely cause (node lost, runtime kill, volume or network teardown, a
//! webhook rejecting the final DELETE).

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};

use super::Diagnosis;
use crate::doctor::model::{
    Finding, FindingDetail, ObjectRef, PodStuckHint, container_statuses, display_name,
};
use crate::doctor::owner::fmt_secs;
use crate::text::quoted;

impl<'a> Diagnosis<'a> {
    /// Evidence that node `name` is not answering: its `Ready` condition
    /// is not `True` (the node lifecycle controller writes `Unknown`,
    /// `NodeStatusUnknown`, "Kubelet stopped posting node status." once its
    /// lease is stale), or the Node is gone. `None` when it is Ready, or
    /// when the snapshot holds no nodes at all (an old recording).
    fn node_not_ready(&self, name: &str) -> Option<Vec<String>> {
        if self.snapshot.nodes.is_empty() {
            return None;
        }
        let Some(node) = self
            .snapshot
            .nodes
            .iter()
            .find(|n| n.metadata.name.as_deref() == Some(name))
        else {
            return Some(vec![format!(
                "node {name} does not exist any more: no kubelet will confirm this pod's end"
            )]);
        };
        let ready = node
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))?;
        if ready.status == "True" {
            return None;
        }
        let mut lines = vec![format!(
            "node {name}: Ready={} ({}): {}{}",
            ready.status,
            ready.reason.as_deref().unwrap_or("<none>"),
            quoted(ready.message.as_deref().unwrap_or_default()),
            ready
                .last_transition_time
                .as_ref()
                .map(|t| format!(
                    " since {} ({} before the snapshot)",
                    t.0,
                    fmt_secs(self.snapshot.age_of(t.0).as_secs())
                ))
                .unwrap_or_default()
        )];
        if let Some(lease) = self.snapshot.leases.iter().find(|l| {
            l.metadata.namespace.as_deref() == Some("kube-node-lease")
                && l.metadata.name.as_deref() == Some(name)
        }) && let Some(renew) = lease.spec.as_ref().and_then(|s| s.renew_time.as_ref())
        {
            lines.push(format!(
                "its kubelet last renewed lease kube-node-lease/{name} {} before the snapshot",
                fmt_secs(self.snapshot.age_of(renew.0).as_secs())
            ));
        }
        let taints: Vec<String> = node
            .spec
            .as_ref()
            .and_then(|s| s.taints.as_ref())
            .into_iter()
            .flatten()
            .filter(|t| t.key.starts_with("node.kubernetes.io/"))
            .map(|t| format!("{}:{}", t.key, t.effect))
            .collect();
        if !taints.is_empty() {
            lines.push(format!("taints {}", taints.join(", ")));
        }
        Some(lines)
    }

    /// A pod the kubelet has not finished deleting: past its
    /// deletionTimestamp (which includes the grace period) by more than the
    /// threshold, and `deletionGracePeriodSeconds` not yet 0 (the kubelet's
    /// final DELETE sets it to 0; a pod left after that is held only by
    /// finalizers, which the finalizer path judges).
    pub(super) fn pod(&self, pod: &Pod, findings: &mut Vec<Finding>) {
        let Some(overdue) = self.is_stuck(&pod.metadata) else {
            return;
        };
        if pod.metadata.deletion_grace_period_seconds == Some(0) {
            return;
        }
        let status = pod.status.as_ref();
        let phase = status.and_then(|s| s.phase.clone());
        let node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
        let mut evidence: Vec<String> = self.deletion_line(&pod.metadata).into_iter().collect();
        evidence.push(format!(
            "deletionGracePeriodSeconds {} (the kubelet's final delete would set it to 0)",
            pod.metadata
                .deletion_grace_period_seconds
                .map_or("<unset>".to_owned(), |g| g.to_string())
        ));
        evidence.push(format!(
            "phase {}, node {}",
            phase.as_deref().unwrap_or("<unknown>"),
            node.as_deref().unwrap_or("<none>")
        ));
        let statuses: Vec<_> = status.into_iter().flat_map(container_statuses).collect();
        let (any_running, all_terminated) = container_lines(&statuses, &mut evidence);
        let (kill_events, network_teardown) = self.pod_warning_lines(pod, &mut evidence);

        let node_lost = node.as_deref().and_then(|n| self.node_not_ready(n));
        if let Some(lines) = &node_lost {
            evidence.extend(lines.iter().cloned());
            if pod
                .metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.kind == "StatefulSet")
            {
                evidence.push(
                    "a StatefulSet pod: forcing it away while its node may still run it risks two pods with one identity (split brain)".into(),
                );
            }
        }
        let terminal = matches!(phase.as_deref(), Some("Succeeded" | "Failed"));
        let rejecting = if terminal && all_terminated {
            self.dead_webhooks_on_pod_delete(pod)
        } else {
            Vec::new()
        };
        for line in &rejecting {
            evidence.push(line.clone());
        }
        // A kubelet that reports the network plugin failing is alive: its
        // node may be NotReady (the runtime's network is not ready), not
        // lost.
        let hint = if network_teardown {
            PodStuckHint::NetworkTeardown
        } else if node_lost.is_some()
            || status.and_then(|s| s.reason.as_deref()) == Some("NodeLost")
        {
            PodStuckHint::NodeLost
        } else if any_running || kill_events {
            PodStuckHint::RuntimeKill
        } else if !rejecting.is_empty() {
            PodStuckHint::DeleteRejected
        } else if terminal && all_terminated {
            PodStuckHint::VolumeTeardown
        } else {
            PodStuckHint::Unknown
        };
        let explain = explain(hint);
        findings.push(Finding {
            subject: ObjectRef::pod(&pod.metadata),
            summary: format!(
                "pod {} is {} past its grace period and not deleted: {explain}",
                display_name(&pod.metadata),
                fmt_secs(overdue.as_secs())
            ),
            evidence,
            detail: FindingDetail::PodStuckTerminating {
                node,
                phase,
                overdue_seconds: overdue.as_secs(),
                hint,
            },
        });
    }

    /// The pod's Warning events, one evidence line each; whether any says
    /// the runtime failed to kill it, and whether that failure is the
    /// network plugin's sandbox teardown.
    fn pod_warning_lines(&self, pod: &Pod, evidence: &mut Vec<String>) -> (bool, bool) {
        let mut kill_events = false;
        let mut network_teardown = false;
        let mut events: Vec<String> = self
            .snapshot
            .pod_warnings(&pod.metadata)
            .map(|e| {
                let reason = e.reason.as_deref().unwrap_or_default();
                if reason == "FailedKillPod" || reason == "ExceededGracePeriod" {
                    kill_events = true;
                }
                if reason == "FailedKillPod"
                    && e.message
                        .as_deref()
                        .is_some_and(crate::doctor::node::is_cni_teardown_failure)
                {
                    network_teardown = true;
                }
                format!(
                    "event Warning {reason}: {}",
                    quoted(e.message.as_deref().unwrap_or_default())
                )
            })
            .collect();
        events.sort();
        events.dedup();
        evidence.extend(events);
        (kill_events, network_teardown)
    }
}

/// One evidence line per container state; whether any container runs,
/// and whether all (at least one) have terminated.
fn container_lines(statuses: &[&ContainerStatus], evidence: &mut Vec<String>) -> (bool, bool) {
    let mut any_running = false;
    let mut all_terminated = !statuses.is_empty();
    for cs in statuses {
        let state = cs.state.as_ref();
        let running = state.is_some_and(|s| s.running.is_some());
        let terminated = state.and_then(|s| s.terminated.as_ref());
        any_running |= running;
        all_terminated &= terminated.is_some();
        evidence.push(format!(
            "container {}: {}",
            cs.name,
            if running {
                "running".to_owned()
            } else if let Some(t) = terminated {
                format!(
                    "terminated (exit {}{})",
                    t.exit_code,
                    t.reason
                        .as_deref()
                        .map(|r| format!(", {r}"))
                        .unwrap_or_default()
                )
            } else {
                "waiting".to_owned()
            }
        ));
    }
    (any_running, all_terminated)
}

/// What the report says a pod stuck for `hint` needs.
fn explain(hint: PodStuckHint) -> &'static str {
    match hint {
        PodStuckHint::NodeLost => {
            "its node is not answering, so no kubelet confirms the kill; bring the kubelet back, and force it away only once the node is known to be down"
        }
        PodStuckHint::RuntimeKill => {
            "the container runtime does not stop its containers (check the runtime and shim on the node)"
        }
        PodStuckHint::VolumeTeardown => {
            "its containers are gone but the kubelet has not reclaimed it: most likely a volume that cannot be unmounted (check mounts on the node)"
        }
        PodStuckHint::NetworkTeardown => {
            "the network plugin fails to tear down its sandbox (FailedKillPod: failed to destroy network for sandbox); repair the CNI plugin or its configuration on the node, then the kubelet's next retry finishes it"
        }
        PodStuckHint::DeleteRejected => {
            "its containers are gone but the kubelet's final DELETE is rejected by an admission webhook that fails closed with its backend gone (see the DeadWebhook finding)"
        }
        PodStuckHint::Unknown => "the API shows no cause; look at the kubelet on its node",
    }
}
