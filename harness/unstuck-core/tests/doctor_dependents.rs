//! An owner in foreground deletion waiting on stuck dependents: the doctor
//! walks the chain (Deployment -> ReplicaSet -> Pods) to its leaves and
//! fixes only those. Replayed on a snapshot recorded from a real v1.34.4
//! cluster (namespace fd), and on variants of it.

mod doctor_support;

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use unstuck_core::doctor::{
    Action, DiagnoseOptions, Finding, FindingDetail, FindingKind, Plan, Snapshot, diagnose, plan,
};

fn recorded() -> Snapshot {
    doctor_support::recorded("foreground-deletion-chain")
}

fn run(s: &Snapshot) -> (Vec<Finding>, Plan) {
    let findings = diagnose(
        s,
        &DiagnoseOptions {
            stuck_after: Duration::from_secs(3),
            ..Default::default()
        },
    );
    let p = plan(&findings, s);
    (findings, p)
}

fn about<'a>(findings: &'a [Finding], kind: FindingKind, subject_kind: &str) -> Vec<&'a Finding> {
    findings
        .iter()
        .filter(|f| f.kind() == kind && f.subject.kind == subject_kind)
        .collect()
}

#[test]
fn the_chain_is_walked_to_the_pods_and_only_the_pods_are_changed() {
    let s = recorded();
    let (findings, p) = run(&s);

    let deployment = about(&findings, FindingKind::WaitingOnDependents, "Deployment");
    let replica_set = about(&findings, FindingKind::WaitingOnDependents, "ReplicaSet");
    assert_eq!(
        (deployment.len(), replica_set.len()),
        (1, 1),
        "{findings:#?}"
    );
    let FindingDetail::WaitingOnDependents { dependents, leaves } = &deployment[0].detail else {
        panic!("{:?}", deployment[0].detail)
    };
    // The Deployment's direct dependent is the ReplicaSet; the chain ends
    // at the two pods.
    assert_eq!(dependents.len(), 1);
    assert_eq!(dependents[0].kind, "ReplicaSet");
    assert_eq!(leaves.len(), 2);
    assert!(leaves.iter().all(|l| l.kind == "Pod"));
    assert!(
        deployment[0]
            .evidence
            .iter()
            .any(|e| e.starts_with("blocked leaf: Pod fd/web-")
                && e.ends_with("held by [pods.guard.example.com/protect]")),
        "{:#?}",
        deployment[0].evidence
    );

    // foregroundDeletion is not reported as a live controller's key once
    // the dependents explain it.
    assert!(
        findings
            .iter()
            .all(|f| f.kind() != FindingKind::WaitingOnLiveController),
        "{findings:#?}"
    );
    let pods = about(&findings, FindingKind::OrphanFinalizer, "Pod");
    assert_eq!(pods.len(), 2);

    // Owners wait, pointing at the pods' findings; only pods are patched.
    for owner in [deployment[0], replica_set[0]] {
        let i = findings.iter().position(|f| f == owner).unwrap();
        let step = p.steps.iter().find(|s| s.finding_index == i).unwrap();
        assert!(matches!(step.action, Action::Wait { .. }), "{step:#?}");
        assert!(
            step.rationale.contains("OrphanFinalizer"),
            "{}",
            step.rationale
        );
    }
    // (The recording holds another experiment's ConfigMap in namespace fg.)
    let patched: Vec<(String, Vec<String>)> = p
        .mutating_steps()
        .filter(|s| !matches!(&s.action, Action::RemoveFinalizers(r) if r.target.namespace.as_deref() == Some("fg")))
        .map(|s| match &s.action {
            Action::RemoveFinalizers(r) => (r.target.kind.clone(), r.remove.clone()),
            other => panic!("unexpected step {other:?}"),
        })
        .collect();
    assert_eq!(
        patched,
        vec![
            (
                "Pod".to_owned(),
                vec!["pods.guard.example.com/protect".to_owned()]
            ),
            (
                "Pod".to_owned(),
                vec!["pods.guard.example.com/protect".to_owned()]
            ),
        ]
    );
}

#[test]
fn without_block_owner_deletion_the_owner_is_not_waiting_on_them() {
    let mut s = recorded();
    for r in s.terminating.iter_mut().filter(|r| r.kind == "Pod") {
        for o in r.metadata.owner_references.iter_mut().flatten() {
            o.block_owner_deletion = Some(false);
        }
    }
    let (findings, _) = run(&s);
    assert!(about(&findings, FindingKind::WaitingOnDependents, "ReplicaSet").is_empty());
    // The ReplicaSet's foregroundDeletion is then the garbage collector's
    // own business (its controller is alive in the recording).
    assert_eq!(
        about(
            &findings,
            FindingKind::WaitingOnLiveController,
            "ReplicaSet"
        )
        .len(),
        1,
        "{findings:#?}"
    );
}

#[test]
fn an_ownership_cycle_does_not_hang_the_walk() {
    let mut s = recorded();
    let deployment_uid = s
        .terminating
        .iter()
        .find(|r| r.kind == "Deployment")
        .and_then(|r| r.metadata.uid.clone())
        .unwrap();
    let pod = s
        .terminating
        .iter()
        .find(|r| r.kind == "Pod")
        .cloned()
        .unwrap();
    let pod_uid = pod.metadata.uid.clone().unwrap();
    let d = s
        .terminating
        .iter_mut()
        .find(|r| r.kind == "Deployment")
        .unwrap();
    d.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "v1".into(),
        kind: "Pod".into(),
        name: pod.name().to_owned(),
        uid: pod_uid,
        block_owner_deletion: Some(true),
        controller: None,
    }]);
    // The pod now (indirectly) owns its own owner; it also waits in
    // foreground deletion.
    let p = s.terminating.iter_mut().find(|r| r.kind == "Pod").unwrap();
    p.metadata
        .finalizers
        .get_or_insert_with(Vec::new)
        .push("foregroundDeletion".into());
    let (findings, _) = run(&s);
    assert!(!findings.is_empty());
    assert!(
        findings
            .iter()
            .any(|f| f.kind() == FindingKind::WaitingOnDependents
                && f.subject.uid.as_deref() == Some(deployment_uid.as_str()))
    );
}

#[test]
fn a_pod_finished_by_its_kubelet_says_its_timestamp_is_the_final_delete() {
    let s = recorded();
    let (findings, _) = run(&s);
    let pods = about(&findings, FindingKind::OrphanFinalizer, "Pod");
    assert_eq!(pods.len(), 2, "{findings:#?}");
    for f in pods {
        assert!(
            f.evidence
                .iter()
                .any(|e| e.starts_with("deletionGracePeriodSeconds 0: the kubelet has finished")),
            "{:#?}",
            f.evidence
        );
    }
}

#[test]
fn a_pod_its_kubelet_has_not_finished_is_both_stuck_and_held() {
    // The same chain a moment earlier: the kubelet has not sent its final
    // delete yet, so the pods keep their grace period and the timestamp
    // of the deletion request plus that grace.
    let mut s = recorded();
    for p in &mut s.pods {
        if p.metadata.deletion_timestamp.is_some() {
            p.metadata.deletion_grace_period_seconds = Some(1);
        }
    }
    for r in &mut s.terminating {
        if r.kind == "Pod" {
            r.metadata.deletion_grace_period_seconds = Some(1);
        }
    }
    let (findings, _) = run(&s);
    let held = about(&findings, FindingKind::OrphanFinalizer, "Pod");
    let stuck = about(&findings, FindingKind::PodStuckTerminating, "Pod");
    assert_eq!((held.len(), stuck.len()), (2, 2), "{findings:#?}");
    assert!(
        held.iter()
            .flat_map(|f| &f.evidence)
            .all(|e| !e.contains("final delete")),
        "{held:#?}"
    );
}
