//! A pod deleted while its node's kubelet is gone: the API doctor reads the
//! node's Ready condition and lease, calls it NodeLost (not a runtime
//! problem, although its container still shows running), and plans no
//! force. Replayed on a snapshot recorded from a real v1.34.4 cluster
//! whose kubelet was killed.

mod doctor_support;

use std::time::Duration;

use unstuck_core::doctor::{
    Action, DiagnoseOptions, FindingDetail, FindingKind, PodStuckHint, Snapshot, diagnose, plan,
};

fn recorded() -> Snapshot {
    doctor_support::recorded("node-lost")
}

fn opts() -> DiagnoseOptions {
    DiagnoseOptions {
        stuck_after: Duration::from_secs(5),
        ..Default::default()
    }
}

fn pod_finding(s: &Snapshot) -> (PodStuckHint, Vec<String>, String) {
    let findings = diagnose(s, &opts());
    let p = plan(&findings, s);
    let (i, f) = findings
        .iter()
        .enumerate()
        .find(|(_, f)| f.kind() == FindingKind::PodStuckTerminating && f.subject.name == "web")
        .unwrap_or_else(|| panic!("{findings:#?}"));
    let FindingDetail::PodStuckTerminating { hint, .. } = &f.detail else {
        panic!("{:?}", f.detail)
    };
    let step = p.steps.iter().find(|s| s.finding_index == i).unwrap();
    let Action::Refuse { reason, .. } = &step.action else {
        panic!("{step:#?}")
    };
    // (The recording holds other experiments' objects; only this pod's
    // step matters, and it is a refusal.)
    (*hint, f.evidence.clone(), reason.clone())
}

#[test]
fn a_pod_on_a_node_that_stopped_answering_is_node_lost() {
    let (hint, evidence, reason) = pod_finding(&recorded());
    assert_eq!(hint, PodStuckHint::NodeLost);
    assert!(
        evidence.iter().any(|e| e.starts_with(
            r#"node explore-node: Ready=Unknown (NodeStatusUnknown): "Kubelet stopped posting node status." since "#
        )),
        "{evidence:#?}"
    );
    assert!(
        evidence
            .iter()
            .any(|e| e.starts_with("its kubelet last renewed lease kube-node-lease/explore-node ")),
        "{evidence:#?}"
    );
    assert!(
        evidence
            .iter()
            .any(|e| e == "taints node.kubernetes.io/unreachable:NoSchedule"),
        "{evidence:#?}"
    );
    assert!(
        reason.contains("bring the kubelet on node explore-node back"),
        "{reason}"
    );
    assert!(
        reason.contains("node.kubernetes.io/out-of-service=nodeshutdown:NoExecute"),
        "{reason}"
    );
}

#[test]
fn the_same_pod_on_a_ready_node_points_at_the_runtime() {
    let mut s = recorded();
    for n in &mut s.nodes {
        for c in n
            .status
            .as_mut()
            .and_then(|st| st.conditions.as_mut())
            .into_iter()
            .flatten()
        {
            if c.type_ == "Ready" {
                c.status = "True".into();
            }
        }
    }
    let (hint, evidence, _) = pod_finding(&s);
    assert_eq!(hint, PodStuckHint::RuntimeKill);
    assert!(!evidence.iter().any(|e| e.starts_with("node explore-node")));
}

#[test]
fn a_pod_whose_node_object_is_gone_is_node_lost() {
    let mut s = recorded();
    s.nodes
        .retain(|n| n.metadata.name.as_deref() != Some("explore-node"));
    // Keep one unrelated node so the snapshot still records nodes.
    let mut other = recorded().nodes.remove(0);
    other.metadata.name = Some("another-node".into());
    s.nodes.push(other);
    let (hint, evidence, _) = pod_finding(&s);
    assert_eq!(hint, PodStuckHint::NodeLost);
    assert!(
        evidence
            .iter()
            .any(|e| e.starts_with("node explore-node does not exist any more")),
        "{evidence:#?}"
    );
}
