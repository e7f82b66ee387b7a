//! Pods that never start (seed 004's Pending / ContainerCreating /
//! ImagePullBackOff / ImageInspectError / CrashLoopBackOff), replayed on a
//! snapshot recorded from a real v1.34.4 local cluster by
//! `tests/pods_not_starting.rs` in the unstuck crate (namespace it-start,
//! kept to that namespace's pods and events), and on variants of it.

mod doctor_support;

use std::time::Duration;

use k8s_openapi::{
    api::core::v1::{ContainerStateWaiting, Event, ObjectReference, Pod},
    apimachinery::pkg::apis::meta::v1::Time,
};
use unstuck_core::doctor::{
    Action, DiagnoseOptions, Finding, FindingDetail, FindingKind, PodStartCause, Snapshot,
    diagnose, plan,
};

fn recorded() -> Snapshot {
    doctor_support::recorded("pods-not-starting")
}

fn opts(secs: u64) -> DiagnoseOptions {
    DiagnoseOptions {
        stuck_after: Duration::from_secs(secs),
        ..Default::default()
    }
}

fn not_starting<'a>(findings: &'a [Finding], name: &str) -> Option<&'a Finding> {
    findings
        .iter()
        .find(|f| f.kind() == FindingKind::PodNotStarting && f.subject.name == name)
}

fn cause(f: &Finding) -> PodStartCause {
    match &f.detail {
        FindingDetail::PodNotStarting { cause, .. } => *cause,
        other => panic!("{other:?}"),
    }
}

fn pod_mut<'a>(s: &'a mut Snapshot, name: &str) -> &'a mut Pod {
    s.pods
        .iter_mut()
        .find(|p| p.metadata.name.as_deref() == Some(name))
        .unwrap()
}

#[test]
fn each_recorded_pod_is_explained_in_the_kubelets_and_schedulers_words() {
    let s = recorded();
    let findings = diagnose(&s, &opts(3));
    let table = [
        (
            "no-node",
            PodStartCause::Unschedulable,
            "PodScheduled=False (Unschedulable): \"0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector.",
        ),
        (
            "no-image",
            PodStartCause::ImagePull,
            "container app: waiting (ErrImageNeverPull): \"Container image \\\"unstuck.local/absent:0.0\\\" is not present with pull policy of Never\"",
        ),
        (
            "no-config",
            PodStartCause::ContainerConfig,
            "container app: waiting (CreateContainerConfigError): \"configmap \\\"absent-settings\\\" not found\"",
        ),
        (
            "no-volume",
            PodStartCause::VolumeMount,
            "event Warning FailedMount: \"MountVolume.SetUp failed for volume \\\"cfg\\\" : configmap \\\"absent-volume\\\" not found\"",
        ),
        (
            "crashing",
            PodStartCause::CrashLoop,
            "container app: waiting (CrashLoopBackOff): \"back-off 10s restarting failed container=app",
        ),
    ];
    for (name, want, quoted) in table {
        let f = not_starting(&findings, name).unwrap_or_else(|| panic!("{name}: {findings:#?}"));
        assert_eq!(cause(f), want, "{name}");
        assert!(
            f.evidence.iter().any(|e| e.starts_with(quoted)),
            "{name}: no evidence starting with {quoted}: {:#?}",
            f.evidence
        );
    }
    let crash = not_starting(&findings, "crashing").unwrap();
    assert!(
        crash
            .evidence
            .iter()
            .any(|e| e.ends_with("restarted 1 time(s); last run exited 3 (Error)")),
        "{:#?}",
        crash.evidence
    );
    // The scheduler's complaint from before the node was Ready is old news
    // for pods that were scheduled since.
    let volume = not_starting(&findings, "no-volume").unwrap();
    assert!(
        volume
            .evidence
            .iter()
            .all(|e| !e.contains("FailedScheduling")),
        "{:#?}",
        volume.evidence
    );
    assert!(
        not_starting(&findings, "healthy").is_none(),
        "{findings:#?}"
    );
}

#[test]
fn nothing_is_changed_for_a_pod_that_does_not_start() {
    let s = recorded();
    let findings = diagnose(&s, &opts(3));
    let p = plan(&findings, &s);
    assert!(!p.steps.is_empty());
    for step in &p.steps {
        assert!(matches!(step.action, Action::Refuse { .. }), "{step:#?}");
    }
}

#[test]
fn pods_younger_than_the_threshold_are_left_to_start() {
    let s = recorded();
    // The snapshot was taken seconds after the pods were created.
    let findings = diagnose(&s, &opts(600));
    assert!(
        findings
            .iter()
            .all(|f| f.kind() != FindingKind::PodNotStarting),
        "{findings:#?}"
    );
}

#[test]
fn a_pod_being_deleted_or_finished_is_not_reported_as_not_starting() {
    let mut s = recorded();
    pod_mut(&mut s, "no-image").metadata.deletion_timestamp = Some(Time(s.taken_at));
    pod_mut(&mut s, "crashing").status.as_mut().unwrap().phase = Some("Failed".into());
    let findings = diagnose(&s, &opts(3));
    assert!(
        not_starting(&findings, "no-image").is_none(),
        "{findings:#?}"
    );
    assert!(
        not_starting(&findings, "crashing").is_none(),
        "{findings:#?}"
    );
    assert!(not_starting(&findings, "no-config").is_some());
}

#[test]
fn an_unreadable_image_and_a_failing_sandbox_have_their_own_causes() {
    let mut s = recorded();
    // Seed 004: "readlink /mnt/disk0/docker/data/overlay2: invalid argument".
    let status = pod_mut(&mut s, "no-image").status.as_mut().unwrap();
    status.container_statuses.as_mut().unwrap()[0]
        .state
        .as_mut()
        .unwrap()
        .waiting = Some(ContainerStateWaiting {
        reason: Some("ImageInspectError".into()),
        message: Some("Failed to inspect image \"app:1\": rpc error: code = Unknown desc = readlink /mnt/disk0/docker/data/overlay2: invalid argument".into()),
    });
    // A pod in ContainerCreating whose sandbox the runtime cannot create.
    let volume = pod_mut(&mut s, "no-volume").clone();
    s.events
        .retain(|e| e.involved_object.name != volume.metadata.name);
    s.events.push(Event {
        involved_object: ObjectReference {
            kind: Some("Pod".into()),
            namespace: volume.metadata.namespace.clone(),
            name: volume.metadata.name.clone(),
            uid: volume.metadata.uid.clone(),
            ..Default::default()
        },
        type_: Some("Warning".into()),
        reason: Some("FailedCreatePodSandBox".into()),
        message: Some("Failed to create pod sandbox: rpc error: code = Unknown desc = failed to setup network for sandbox".into()),
        last_timestamp: Some(Time(s.taken_at)),
        ..Default::default()
    });
    let findings = diagnose(&s, &opts(3));
    assert_eq!(
        cause(not_starting(&findings, "no-image").unwrap()),
        PodStartCause::ImageInspect
    );
    let sandbox = not_starting(&findings, "no-volume").unwrap();
    assert_eq!(cause(sandbox), PodStartCause::Sandbox);
    assert!(
        sandbox.evidence.iter().any(|e| e
            .starts_with("event Warning FailedCreatePodSandBox: \"Failed to create pod sandbox")),
        "{:#?}",
        sandbox.evidence
    );
}

#[test]
fn a_running_pod_is_not_reported_for_a_sandbox_failure_it_got_past() {
    // Seen in CI on a loaded machine: the healthy pod's first sandbox
    // attempt failed, the second worked, and the Warning event stays.
    let mut s = recorded();
    let healthy = pod_mut(&mut s, "healthy").clone();
    assert_eq!(
        healthy.status.as_ref().and_then(|st| st.phase.as_deref()),
        Some("Running")
    );
    for reason in ["FailedCreatePodSandBox", "FailedMount"] {
        s.events.push(Event {
            involved_object: ObjectReference {
                kind: Some("Pod".into()),
                namespace: healthy.metadata.namespace.clone(),
                name: healthy.metadata.name.clone(),
                uid: healthy.metadata.uid.clone(),
                ..Default::default()
            },
            type_: Some("Warning".into()),
            reason: Some(reason.into()),
            message: Some(format!("{reason}: context deadline exceeded")),
            last_timestamp: Some(Time(s.taken_at)),
            ..Default::default()
        });
    }
    let findings = diagnose(&s, &opts(3));
    assert!(
        not_starting(&findings, "healthy").is_none(),
        "{findings:#?}"
    );
    // The control: the same events on a pod still creating are its cause.
    let status = pod_mut(&mut s, "healthy").status.as_mut().unwrap();
    status.phase = Some("Pending".into());
    status.container_statuses.as_mut().unwrap()[0].state =
        Some(k8s_openapi::api::core::v1::ContainerState {
            waiting: Some(ContainerStateWaiting {
                reason: Some("ContainerCreating".into()),
                message: None,
            }),
            ..Default::default()
        });
    let findings = diagnose(&s, &opts(3));
    assert!(
        not_starting(&findings, "healthy").is_some(),
        "{findings:#?}"
    );
}

#[test]
fn a_crash_looping_container_caught_between_two_back_offs_is_still_a_crash_loop() {
    let mut s = recorded();
    let status = pod_mut(&mut s, "crashing").status.as_mut().unwrap();
    let cs = &mut status.container_statuses.as_mut().unwrap()[0];
    let last = cs.last_state.as_ref().unwrap().terminated.clone();
    cs.state.as_mut().unwrap().waiting = None;
    cs.state.as_mut().unwrap().terminated = last;
    cs.restart_count = 2;
    let findings = diagnose(&s, &opts(3));
    let f = not_starting(&findings, "crashing").unwrap();
    assert_eq!(cause(f), PodStartCause::CrashLoop);
    assert!(
        f.evidence
            .iter()
            .any(|e| e == "container app: exited 3 (Error) and restarted 2 time(s)"),
        "{:#?}",
        f.evidence
    );
}
