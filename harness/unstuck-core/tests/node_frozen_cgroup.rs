//! The node doctor on a pod whose cgroup is frozen: facts recorded from a
//! real pod on cgroup v1 whose pod cgroup was frozen and which was then
//! deleted (`tests/recorded/node/frozen-cgroup/`, written by the unstuck
//! crate's `frozen_cgroup` integration test with
//! `UNSTUCK_RECORD_NODE_FIXTURES`), and variations of them: who else may
//! hold the freeze, and what the doctor then refuses to thaw.

mod doctor_support;

use unstuck_core::doctor::{
    PodStuckHint,
    node::{
        CgroupFact, DiagnoseNodeOptions, NodeCause, NodeFacts, NodeFinding, NodeRemedy,
        ThawVerdict, diagnose_pod, plan_node,
    },
};

fn facts() -> NodeFacts {
    doctor_support::node_facts("frozen-cgroup")
}

fn diagnose(f: &NodeFacts) -> NodeFinding {
    diagnose_pod(f, &DiagnoseNodeOptions::default())
}

fn uid(f: &NodeFacts) -> String {
    f.pod.metadata.uid.clone().unwrap()
}

/// The recorded pod's own v1 cgroup (`.../pod<uid>`).
fn pod_cgroup(f: &mut NodeFacts) -> &mut CgroupFact {
    let name = format!("pod{}", uid(f));
    f.cgroups
        .iter_mut()
        .find(|c| c.path.ends_with(&name) && c.files.contains_key("freezer.state"))
        .expect("the pod's v1 cgroup")
}

fn refusal(finding: &NodeFinding) -> String {
    match &finding.frozen.as_ref().expect("frozen").verdict {
        ThawVerdict::Refuse { why } => why.clone(),
        v => panic!("expected a refusal, got {v:#?}"),
    }
}

fn thaw_steps(finding: &NodeFinding) -> usize {
    plan_node(finding)
        .iter()
        .filter(|s| matches!(s.remedy, NodeRemedy::ThawCgroup { .. }))
        .count()
}

#[test]
fn a_frozen_pod_cgroup_is_named_with_its_files_and_processes() {
    let mut f = facts();
    let finding = diagnose(&f);
    assert!(finding.stuck);
    assert_eq!(
        finding.causes,
        vec![NodeCause::CgroupFrozen],
        "{finding:#?}"
    );
    assert_eq!(finding.hint(), PodStuckHint::RuntimeKill);
    // The frozen tasks show `D` (two in `hrtimer_nanosleep`, not
    // `__refrigerator`): the freezer, not a kernel call, holds them.
    assert!(f.processes.iter().all(|p| p.state == 'D'));
    assert!(finding.kernel_stalls.is_empty(), "{finding:#?}");
    assert!(
        !finding.summary.contains("waits in the kernel"),
        "{}",
        finding.summary
    );
    let pod = pod_cgroup(&mut f).path.display().to_string();
    assert!(
        finding.summary.contains(&pod) && finding.summary.contains("freezer.state FROZEN"),
        "{}",
        finding.summary
    );
    assert!(
        finding
            .evidence
            .iter()
            .any(|e| e.starts_with(&format!("cgroup {pod} (the pod's)"))
                && e.contains("freezer.self_freezing 1")),
        "{:#?}",
        finding.evidence
    );
    let frozen_lines: Vec<&String> = finding
        .evidence
        .iter()
        .filter(|e| e.starts_with("kernel: pid") && e.contains("frozen in cgroup"))
        .collect();
    assert_eq!(frozen_lines.len(), f.processes.len(), "{frozen_lines:#?}");
    assert!(
        frozen_lines
            .iter()
            .any(|e| e.contains("(wchan __refrigerator)")),
        "{frozen_lines:#?}"
    );
    // The kubelet's own words are quoted beside it.
    assert!(
        finding
            .kill_failures
            .iter()
            .any(|k| k.contains("KillPodSandboxError") && k.contains("DeadlineExceeded")),
        "{:#?}",
        finding.kill_failures
    );
}

#[test]
fn the_pods_own_freeze_is_thawed_first_with_its_proof_and_no_runtime_rung() {
    let mut f = facts();
    let finding = diagnose(&f);
    let pod = pod_cgroup(&mut f).path.clone();
    let z = finding.frozen.as_ref().unwrap();
    let ThawVerdict::Thaw { targets, proof } = &z.verdict else {
        panic!("{:#?}", z.verdict)
    };
    assert_eq!(
        targets.len(),
        1,
        "only the cgroup the freeze was written to"
    );
    assert_eq!(targets[0].path, pod);
    assert!(
        proof.iter().any(|p| p.contains("self_freezing 1")),
        "{proof:#?}"
    );
    assert!(
        proof
            .iter()
            .any(|p| p.contains("none of the") && p.contains("shared with other pods")),
        "{proof:#?}"
    );
    assert!(
        proof
            .iter()
            .any(|p| p.contains("RUNNING") && p.contains("no task of the pod paused")),
        "{proof:#?}"
    );
    let plan = plan_node(&finding);
    assert!(
        matches!(&plan[0].remedy, NodeRemedy::ThawCgroup { cgroups } if cgroups == targets),
        "{plan:#?}"
    );
    assert!(!plan[0].force);
    assert!(
        plan.iter().all(|s| !matches!(
            s.remedy,
            NodeRemedy::RestartRuntime | NodeRemedy::KillShim { .. }
        )),
        "{plan:#?}"
    );
    assert!(
        plan.last().unwrap().force,
        "force delete stays the last rung"
    );
}

#[test]
fn a_task_paused_by_the_runtime_is_not_thawed() {
    let mut f = facts();
    f.runtime.tasks[0].status = "PAUSED".into();
    let finding = diagnose(&f);
    assert_eq!(finding.causes, vec![NodeCause::CgroupFrozen]);
    let why = refusal(&finding);
    assert!(
        why.contains("PAUSED") && why.contains("task resume"),
        "{why}"
    );
    assert_eq!(thaw_steps(&finding), 0, "{:#?}", plan_node(&finding));
    assert!(finding.summary.contains("not thawed by the doctor"));
}

#[test]
fn a_freeze_from_a_shared_parent_is_not_thawed() {
    let mut f = facts();
    let pod = pod_cgroup(&mut f);
    pod.files.insert("freezer.self_freezing".into(), "0".into());
    pod.files
        .insert("freezer.parent_freezing".into(), "1".into());
    let besteffort = pod.path.parent().unwrap().to_path_buf();
    let parent = f
        .cgroups
        .iter_mut()
        .find(|c| c.path == besteffort)
        .expect("kubepods/besteffort recorded");
    parent.files.insert("freezer.state".into(), "FROZEN".into());
    parent
        .files
        .insert("freezer.self_freezing".into(), "1".into());
    let finding = diagnose(&f);
    assert_eq!(finding.causes, vec![NodeCause::CgroupFrozen]);
    let why = refusal(&finding);
    assert!(
        why.contains(&besteffort.display().to_string()) && why.contains("other pods share"),
        "{why}"
    );
    assert_eq!(thaw_steps(&finding), 0);
    assert!(
        finding
            .evidence
            .iter()
            .any(|e| e.contains("(above the pod, shared with other pods)")),
        "{:#?}",
        finding.evidence
    );
}

#[test]
fn a_freeze_from_above_that_was_not_read_is_not_thawed() {
    let mut f = facts();
    let pod = pod_cgroup(&mut f);
    pod.files.insert("freezer.self_freezing".into(), "0".into());
    pod.files
        .insert("freezer.parent_freezing".into(), "1".into());
    let finding = diagnose(&f);
    assert!(refusal(&finding).contains("who holds it is unknown"));
    assert_eq!(thaw_steps(&finding), 0);
}

#[test]
fn a_runtime_that_cannot_be_asked_gets_no_thaw() {
    let mut f = facts();
    f.runtime.errors.push("ctr: connection refused".into());
    let finding = diagnose(&f);
    assert!(refusal(&finding).contains("connection refused"));
    assert_eq!(thaw_steps(&finding), 0);
}

#[test]
fn thawed_cgroups_are_no_finding_and_older_recordings_diagnose_as_before() {
    let mut f = facts();
    for c in &mut f.cgroups {
        c.files.insert("freezer.state".into(), "THAWED".into());
        c.files.insert("freezer.self_freezing".into(), "0".into());
        c.files.insert("freezer.parent_freezing".into(), "0".into());
    }
    let finding = diagnose(&f);
    assert!(finding.frozen.is_none());
    assert!(!finding.causes.contains(&NodeCause::CgroupFrozen));
    // Without the freezer the `D` tasks read as kernel stalls again, as
    // before this was collected (the bug issue 18 reported).
    assert!(
        finding.causes.contains(&NodeCause::KernelStall),
        "{finding:#?}"
    );

    let old: NodeFacts = doctor_support::node_facts("frozen-filesystem");
    assert!(old.cgroups.is_empty());
    assert_eq!(diagnose(&old).causes, vec![NodeCause::KernelStall]);
}
