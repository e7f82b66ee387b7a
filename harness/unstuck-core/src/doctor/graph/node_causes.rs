//! What the node doctor found on a stuck pod's node: the pod waits on
//! each cause it named, most fundamental first.

use super::NodeState;
use super::build::{Builder, NodePart};
use crate::doctor::node::{NodeCause, NodeFinding};

/// Adds the pod and the causes the node doctor named for it.
pub(super) fn add(b: &mut Builder, f: &NodeFinding) {
    let pod = if f.stuck {
        b.stuck(&f.pod)
    } else {
        b.object(&f.pod)
    };
    for cause in &f.causes {
        let (part, state, detail, why) = describe(f, cause);
        let to = b.on_node(&f.node, part, &f.pod, state, detail);
        b.edge(&pod, &to, format!("node doctor: {why}"), None);
    }
}

/// Where on the node a cause lies, its state, a short detail and the
/// evidence line.
fn describe(f: &NodeFinding, cause: &NodeCause) -> (NodePart, NodeState, Option<String>, String) {
    let first = |lines: &[String]| lines.first().cloned().unwrap_or_else(|| f.summary.clone());
    match cause {
        NodeCause::KubeletDown => (
            NodePart::Kubelet,
            NodeState::NotReady,
            Some("kubelet not running".into()),
            f.summary.clone(),
        ),
        NodeCause::WedgedRuntime => (
            NodePart::Runtime,
            NodeState::Failing,
            (!f.wedged_shims.is_empty())
                .then(|| format!("{} wedged shim(s)", f.wedged_shims.len())),
            first(&f.kill_failures),
        ),
        NodeCause::KernelStall => (
            NodePart::Kernel,
            NodeState::Failing,
            f.kernel_stalls.first().map(|(task, _)| {
                format!(
                    "pid {} ({}) in state {}{}",
                    task.pid,
                    task.command,
                    task.state,
                    task.wchan
                        .as_deref()
                        .map(|w| format!(" at {w}"))
                        .unwrap_or_default()
                )
            }),
            f.summary.clone(),
        ),
        NodeCause::BusyVolume => (
            NodePart::Volumes,
            NodeState::Failing,
            (!f.busy_volumes.is_empty()).then(|| {
                f.busy_volumes
                    .iter()
                    .map(|v| v.volume.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            }),
            f.busy_volumes
                .first()
                .map(|v| v.error.clone())
                .unwrap_or_else(|| f.summary.clone()),
        ),
        NodeCause::CniTeardownFailed => (
            NodePart::Network,
            NodeState::Failing,
            None,
            first(&f.kill_failures),
        ),
        NodeCause::Unknown => (
            NodePart::Kubelet,
            NodeState::Unknown,
            Some("the node shows no cause".into()),
            f.summary.clone(),
        ),
        // A cause added after this module: named by its serialised name.
        #[allow(unreachable_patterns)]
        other => (
            NodePart::Other(
                serde_json::to_value(other)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_else(|| "cause".to_owned()),
            ),
            NodeState::Failing,
            None,
            f.summary.clone(),
        ),
    }
}
