//! The node doctor's diagnosis and ladder on facts recorded from real
//! stuck pods (`tests/recorded/node/<case>/facts.json`, written by the
//! unstuck crate's `node_faults` integration test with
//! `UNSTUCK_RECORD_NODE_FIXTURES`), and on variations of them.

mod doctor_support;

use std::time::Duration;

use k8s_openapi::jiff::SignedDuration;
use unstuck_core::doctor::{
    PodStuckHint,
    node::{
        DiagnoseNodeOptions, Holder, HolderUse, HolderUseKind, NodeCause, NodeFacts, NodeFinding,
        NodeRemedy, NodeStep, diagnose_pod, plan_node,
    },
};

use doctor_support::node_facts as facts;

fn diagnose(f: &NodeFacts) -> NodeFinding {
    diagnose_pod(f, &DiagnoseNodeOptions::default())
}

fn names(steps: &[NodeStep]) -> Vec<&'static str> {
    steps.iter().map(|s| s.remedy.name()).collect()
}

#[test]
fn every_recorded_collection_round_trips() {
    for case in ["busy-mount", "held-subpath", "wedged-shim", "kubelet-down"] {
        let f = facts(case);
        let back: NodeFacts = serde_json::from_str(&serde_json::to_string(&f).unwrap()).unwrap();
        assert_eq!(back, f, "{case}");
        let finding = diagnose(&f);
        let again: NodeFinding =
            serde_json::from_str(&serde_json::to_string(&finding).unwrap()).unwrap();
        assert_eq!(again, finding, "{case}");
    }
}

#[test]
fn a_nested_mount_with_a_holder_is_a_busy_volume_released_first() {
    let f = facts("busy-mount");
    let finding = diagnose(&f);
    assert!(finding.stuck);
    assert_eq!(finding.causes, vec![NodeCause::BusyVolume]);
    assert_eq!(finding.hint(), PodStuckHint::VolumeTeardown);
    assert_eq!(finding.busy_volumes.len(), 1);
    let v = &finding.busy_volumes[0];
    assert_eq!(v.volume, "data");
    assert!(v.busy && v.failures >= 3, "{v:#?}");
    assert!(v.retry_at.is_some() && finding.next_kubelet_retry == v.retry_at);
    let stray: Vec<_> = finding.stray_mounts().collect();
    assert_eq!(stray.len(), 1);
    assert!(
        stray[0]
            .mount
            .mount_point
            .ends_with("volumes/kubernetes.io~empty-dir/data/.unstuck-busy")
    );
    assert_eq!(stray[0].mount.source, "unstuck-busy");
    assert!(
        finding
            .summary
            .contains("cannot tear down volume(s) data because of stray mount(s)"),
        "{}",
        finding.summary
    );
    assert!(
        finding
            .evidence
            .iter()
            .any(|e| e.starts_with("kubelet log: E") && e.contains("device or resource busy"))
    );

    let plan = plan_node(&finding);
    assert_eq!(
        names(&plan),
        ["ReleaseHolder", "LazyUnmount", "ForceDelete"]
    );
    let NodeRemedy::ReleaseHolder { stop, unmount } = &plan[0].remedy else {
        unreachable!()
    };
    assert_eq!(stop.len(), 2, "the holder shell and its sleep: {stop:?}");
    assert!(
        stop.iter()
            .any(|p| p.command.contains("unstuck-busy-holder"))
    );
    assert_eq!(unmount, &vec![stray[0].mount.mount_point.clone()]);
    let NodeRemedy::LazyUnmount { paths } = &plan[1].remedy else {
        unreachable!()
    };
    assert_eq!(paths, unmount);
    assert!(plan[..2].iter().all(|s| !s.force));
    assert!(plan[2].force, "force delete is flagged and last");
}

#[test]
fn a_held_subpath_mount_stops_the_holder_but_never_unmounts_the_kubelets_mount_first() {
    let finding = diagnose(&facts("held-subpath"));
    assert_eq!(finding.causes, vec![NodeCause::BusyVolume]);
    let v = &finding.busy_volumes[0];
    assert_eq!(v.volume, "cfg");
    assert!(v.error.ends_with("target is busy."), "{}", v.error);
    assert_eq!(finding.stray_mounts().count(), 0);
    let plan = plan_node(&finding);
    assert_eq!(
        names(&plan),
        ["ReleaseHolder", "LazyUnmount", "ForceDelete"]
    );
    let NodeRemedy::ReleaseHolder { stop, unmount } = &plan[0].remedy else {
        unreachable!()
    };
    assert!(
        unmount.is_empty(),
        "the kubelet unmounts its own subPath mount"
    );
    assert_eq!(stop.len(), 2);
    let NodeRemedy::LazyUnmount { paths } = &plan[1].remedy else {
        unreachable!()
    };
    assert_eq!(paths.len(), 1);
    assert!(paths[0].ends_with("volume-subpaths/cfg/c/1"), "{paths:?}");
}

#[test]
fn a_stopped_shim_is_a_wedged_runtime_killed_first() {
    let f = facts("wedged-shim");
    let finding = diagnose(&f);
    assert!(finding.stuck);
    assert_eq!(finding.causes, vec![NodeCause::WedgedRuntime]);
    assert_eq!(finding.hint(), PodStuckHint::RuntimeKill);
    assert_eq!(finding.wedged_shims.len(), 1);
    assert!(finding.wedged_shims[0].is_stopped());
    assert_eq!(finding.tasks.len(), 2);
    assert!(finding.tasks.iter().all(|t| t.is_unknown() && t.pid == 0));
    assert!(finding.kill_failures.iter().any(|k| k.starts_with("event Warning FailedKillPod")
        && k.contains(r#"failed to "KillContainer" for "c" with KillContainerError: "rpc error: code = DeadlineExceeded"#)));
    assert!(
        finding
            .kill_failures
            .iter()
            .any(|k| k.contains("\"Kill container failed\""))
    );
    // The projected token mount is still there (volumes are torn down
    // after the containers), but it is not blamed.
    assert!(!finding.causes.contains(&NodeCause::BusyVolume));
    assert!(
        finding.summary.contains("shim is stopped"),
        "{}",
        finding.summary
    );

    let plan = plan_node(&finding);
    assert_eq!(names(&plan), ["KillShim", "RestartRuntime", "ForceDelete"]);
    let NodeRemedy::KillShim { shims } = &plan[0].remedy else {
        unreachable!()
    };
    assert_eq!(shims[0].pid, finding.wedged_shims[0].pid);
    assert_eq!(shims[0].start_time, finding.wedged_shims[0].start_time);
}

#[test]
fn an_unresponsive_but_running_shim_with_unknown_tasks_is_still_wedged() {
    let mut f = facts("wedged-shim");
    f.runtime.shims[0].state = 'S';
    let finding = diagnose(&f);
    assert_eq!(finding.causes, vec![NodeCause::WedgedRuntime]);
    assert_eq!(finding.wedged_shims.len(), 1);
    assert_eq!(names(&plan_node(&finding))[0], "KillShim");
}

#[test]
fn once_the_runtime_is_restarted_and_no_shim_is_left_only_the_restart_rung_remains() {
    let mut f = facts("wedged-shim");
    f.runtime.shims.clear();
    let finding = diagnose(&f);
    // Tasks still UNKNOWN: the runtime is still wedged, but no shim to kill.
    assert_eq!(finding.causes, vec![NodeCause::WedgedRuntime]);
    assert_eq!(
        names(&plan_node(&finding)),
        ["RestartRuntime", "ForceDelete"]
    );
}

#[test]
fn after_the_release_nothing_blocks_and_the_kubelets_retry_is_awaited_before_force() {
    let mut f = facts("busy-mount");
    f.mounts.clear();
    f.holders.clear();
    let finding = diagnose(&f);
    assert_eq!(
        finding.causes,
        vec![NodeCause::BusyVolume],
        "the log still shows the failures"
    );
    let plan = plan_node(&finding);
    assert_eq!(names(&plan), ["AwaitKubelet", "ForceDelete"]);
    assert_eq!(
        plan[0].remedy,
        NodeRemedy::AwaitKubelet {
            until: finding.next_kubelet_retry
        }
    );
}

#[test]
fn node_daemons_holding_the_pod_directory_are_never_stopped() {
    let mut f = facts("busy-mount");
    let dir = f
        .kubelet_dir
        .join("pods")
        .join(f.pod.metadata.uid.clone().unwrap());
    for (pid, command) in [
        (
            4242,
            "/root/.cache/unstuck/k8s/v1.34.4/bin/kubelet --config=x",
        ),
        (
            4343,
            "/usr/bin/containerd-shim-runc-v2 -namespace k8s.io -id x -address y",
        ),
    ] {
        f.holders.push(Holder {
            pid,
            start_time: 1,
            state: 'S',
            command: command.into(),
            uses: vec![HolderUse {
                kind: HolderUseKind::Fd(7),
                path: dir.join("volumes"),
            }],
        });
    }
    let finding = diagnose(&f);
    assert_eq!(finding.holders.len(), 4);
    let NodeRemedy::ReleaseHolder { stop, .. } = &plan_node(&finding)[0].remedy else {
        unreachable!()
    };
    assert!(
        stop.iter().all(|p| p.pid != 4242 && p.pid != 4343),
        "{stop:?}"
    );
    assert!(finding.evidence.iter().any(|e| e.contains("node daemon")));
}

#[test]
fn stuck_is_keyed_on_the_deletion_timestamp_not_the_phase() {
    // Running with a busy volume is still a busy volume.
    let mut f = facts("busy-mount");
    f.pod.status.as_mut().unwrap().phase = Some("Running".into());
    assert_eq!(diagnose(&f).causes, vec![NodeCause::BusyVolume]);

    // Within the threshold: not stuck, no plan.
    let mut f = facts("busy-mount");
    let ts = f.pod.metadata.deletion_timestamp.clone().unwrap().0;
    f.taken_at = ts.checked_add(SignedDuration::from_secs(5)).unwrap();
    let finding = diagnose(&f);
    assert!(!finding.stuck && finding.causes.is_empty());
    assert!(plan_node(&finding).is_empty());
    assert!(
        finding.summary.contains("not yet stuck"),
        "{}",
        finding.summary
    );
    // ... unless the threshold is lower.
    let finding = diagnose_pod(
        &f,
        &DiagnoseNodeOptions {
            stuck_after: Duration::from_secs(1),
        },
    );
    assert!(finding.stuck);

    // Not being deleted: never stuck, whatever the node shows.
    let mut f = facts("busy-mount");
    f.pod.metadata.deletion_timestamp = None;
    let finding = diagnose(&f);
    assert!(!finding.stuck && plan_node(&finding).is_empty());
    assert_eq!(finding.overdue_seconds, None);

    // Finally deleted by the kubelet (grace 0): only finalizers hold it.
    let mut f = facts("wedged-shim");
    f.pod.metadata.deletion_grace_period_seconds = Some(0);
    let finding = diagnose(&f);
    assert!(!finding.stuck);
    assert!(
        finding.summary.contains("finally deleted"),
        "{}",
        finding.summary
    );
}

#[test]
fn nothing_visible_on_the_node_is_unknown_and_waits_before_force() {
    let mut f = facts("wedged-shim");
    f.runtime = Default::default();
    f.pod_events.clear();
    f.kubelet_log.clear();
    f.mounts.clear();
    let finding = diagnose(&f);
    assert_eq!(finding.causes, vec![NodeCause::Unknown]);
    assert_eq!(finding.hint(), PodStuckHint::Unknown);
    assert_eq!(names(&plan_node(&finding)), ["AwaitKubelet", "ForceDelete"]);
}

#[test]
fn without_a_kubelet_log_leftover_volume_mounts_are_blamed() {
    let mut f = facts("wedged-shim");
    f.runtime = Default::default();
    f.pod_events.clear();
    f.kubelet_log.clear();
    f.kubelet_log_available = false;
    let finding = diagnose(&f);
    assert_eq!(finding.causes, vec![NodeCause::BusyVolume]);
    assert!(
        finding
            .evidence
            .iter()
            .any(|e| e.contains("kubelet log not available"))
    );
    let plan = plan_node(&finding);
    assert_eq!(names(&plan), ["LazyUnmount", "ForceDelete"]);
}

#[test]
fn lines_about_other_pods_are_ignored() {
    let mut f = facts("busy-mount");
    let other = facts("held-subpath");
    f.kubelet_log = other.kubelet_log.clone();
    f.mounts.clear();
    f.holders.clear();
    let finding = diagnose(&f);
    assert!(
        finding.busy_volumes.is_empty(),
        "{:#?}",
        finding.busy_volumes
    );
    assert_eq!(finding.causes, vec![NodeCause::Unknown]);
}

#[test]
fn collections_recorded_before_the_kubelet_and_node_were_looked_at_still_load() {
    for case in ["busy-mount", "held-subpath", "wedged-shim"] {
        let f = facts(case);
        assert_eq!(
            (f.kubelet_running, &f.node_ready, f.node_lease_renewed),
            (None, &None, None),
            "{case}"
        );
        let finding = diagnose(&f);
        assert!(!finding.causes.contains(&NodeCause::KubeletDown), "{case}");
        let json = serde_json::to_value(&f).unwrap();
        assert!(json.get("kubeletRunning").is_none() && json.get("nodeReady").is_none());
    }
}

#[test]
fn a_stopped_kubelet_is_kubelet_down_and_started_again_first() {
    let f = facts("kubelet-down");
    assert_eq!(f.kubelet_running, Some(false));
    let finding = diagnose(&f);
    assert!(finding.stuck);
    assert_eq!(finding.causes, vec![NodeCause::KubeletDown]);
    assert_eq!(finding.hint(), PodStuckHint::NodeLost);
    assert_eq!(finding.kubelet_running, Some(false));
    // Nothing stopped the containers, and nothing failed: no other cause.
    assert_eq!(finding.tasks.len(), 2);
    assert!(finding.tasks.iter().all(|t| t.status == "RUNNING"));
    assert!(finding.kill_failures.is_empty() && finding.busy_volumes.is_empty());
    assert_eq!(finding.stray_mounts().count(), 0);
    for quoted in [
        "no kubelet process runs on node",
        r#"Ready=Unknown (NodeStatusUnknown): "Kubelet stopped posting node status." since"#,
        "the kubelet last renewed its Lease kube-node-lease/",
        "event Warning NodeNotReady (x1) from node-controller: Node is not ready",
    ] {
        assert!(
            finding.evidence.iter().any(|e| e.contains(quoted)),
            "{quoted:?} not in {:#?}",
            finding.evidence
        );
    }
    assert!(
        finding.summary.contains("kubelet is not running"),
        "{}",
        finding.summary
    );

    let plan = plan_node(&finding);
    assert_eq!(names(&plan), ["RestartKubelet", "ForceDelete"]);
    assert!(!plan[0].force);
    assert!(plan[0].why.contains("does not run"), "{}", plan[0].why);
    assert!(plan[1].force);
    assert!(
        plan[1].why.contains("containers still run"),
        "{}",
        plan[1].why
    );
}

#[test]
fn once_the_kubelet_runs_again_it_is_not_blamed_while_the_node_catches_up() {
    let mut f = facts("kubelet-down");
    f.kubelet_running = Some(true);
    let finding = diagnose(&f);
    assert_eq!(finding.causes, vec![NodeCause::Unknown]);
    assert!(
        finding
            .evidence
            .iter()
            .any(|e| e.contains("the kubelet process runs on node") && e.contains("not Ready")),
        "{:#?}",
        finding.evidence
    );
    assert_eq!(names(&plan_node(&finding)), ["AwaitKubelet", "ForceDelete"]);
}

#[test]
fn where_the_node_cannot_say_whether_its_kubelet_runs_a_node_gone_unknown_is_kubelet_down() {
    let mut f = facts("kubelet-down");
    f.kubelet_running = None;
    let finding = diagnose(&f);
    assert_eq!(finding.causes, vec![NodeCause::KubeletDown]);
    assert!(
        finding.summary.contains("stopped posting status"),
        "{}",
        finding.summary
    );
    let plan = plan_node(&finding);
    assert_eq!(names(&plan), ["RestartKubelet", "ForceDelete"]);
    assert!(plan[0].why.contains("stopped posting node status"));

    // A Ready node (or one not looked at) is not blamed.
    f.node_ready.as_mut().unwrap().status = "True".into();
    assert_eq!(diagnose(&f).causes, vec![NodeCause::Unknown]);
    f.node_ready = None;
    assert_eq!(diagnose(&f).causes, vec![NodeCause::Unknown]);
}

#[test]
fn a_kubelet_that_is_down_comes_before_every_other_cause() {
    let mut f = facts("wedged-shim");
    f.kubelet_running = Some(false);
    let finding = diagnose(&f);
    assert_eq!(
        finding.causes,
        vec![NodeCause::KubeletDown, NodeCause::WedgedRuntime]
    );
    assert_eq!(finding.hint(), PodStuckHint::NodeLost);
    assert_eq!(
        names(&plan_node(&finding)),
        [
            "RestartKubelet",
            "KillShim",
            "RestartRuntime",
            "ForceDelete"
        ]
    );
}

#[test]
fn a_pod_on_a_lost_node_within_its_threshold_is_not_stuck_yet() {
    let mut f = facts("kubelet-down");
    let ts = f.pod.metadata.deletion_timestamp.clone().unwrap().0;
    f.taken_at = ts.checked_add(SignedDuration::from_secs(5)).unwrap();
    let finding = diagnose(&f);
    assert!(!finding.stuck && finding.causes.is_empty());
    assert!(plan_node(&finding).is_empty());
    // The node's state is still shown.
    assert!(
        finding
            .evidence
            .iter()
            .any(|e| e.contains("no kubelet process runs"))
    );
}
