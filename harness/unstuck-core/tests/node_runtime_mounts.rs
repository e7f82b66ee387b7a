//! Mount tables and runtime output recorded on a real node: `/proc/self/mountinfo`
//! lines under a pod directory, `ctr containers info` JSON and `ctr task ls`
//! of a wedged pod.

mod doctor_support;

use std::path::Path;

use unstuck_core::doctor::node::{
    ContainerKind, MountRole, classify_pod_mounts, parse_ctr_container_info, parse_ctr_tasks,
    parse_mountinfo,
};

fn recorded(path: &str) -> String {
    doctor_support::recorded_text(format!("node/{path}"))
}

#[test]
fn a_running_pods_mounts_are_all_the_kubelets() {
    let mounts = parse_mountinfo(&recorded("held-subpath/mountinfo.txt"));
    assert_eq!(mounts.len(), 2);
    let kd = Path::new("/var/lib/unstuck/clusters/h4-fx/kubelet");
    let pod = classify_pod_mounts(&mounts, kd, "04f25227-dd75-4931-b2e7-616bf39d5c0f");
    assert_eq!(pod.len(), 2);
    assert!(pod.iter().all(|m| !m.is_stray()));
    assert!(pod.iter().any(|m| m.role
        == MountRole::SubPath {
            volume: "cfg".into(),
            container: "c".into(),
            index: "1".into()
        }
        && m.mount.fs_type == "ext4"));
    assert!(pod.iter().any(|m| m.role
        == MountRole::Volume {
            plugin: "kubernetes.io/projected".into(),
            volume: "kube-api-access-2vsr7".into()
        }
        && m.mount.fs_type == "tmpfs"));
    // Another UID sees nothing.
    assert!(classify_pod_mounts(&mounts, kd, "04f25227").is_empty());
}

#[test]
fn the_injected_nested_mount_is_a_stray() {
    let mounts = parse_mountinfo(&recorded("busy-mount/mountinfo.txt"));
    let kd = Path::new("/var/lib/unstuck/clusters/h4-exp/kubelet");
    let pod = classify_pod_mounts(&mounts, kd, "5f2b6b7d-d187-4b22-bc17-93965e88726e");
    assert_eq!(pod.len(), 1);
    assert!(pod[0].is_stray());
    assert_eq!(
        pod[0].role,
        MountRole::Nested {
            plugin: "kubernetes.io/empty-dir".into(),
            volume: "data".into(),
            inner: "held".into()
        }
    );
    assert_eq!(pod[0].volume(), Some("data"));
    assert_eq!(pod[0].mount.source, "unstuck-busy");
}

#[test]
fn ctr_container_info_names_the_sandbox_and_the_pod() {
    let sandbox =
        parse_ctr_container_info(&recorded("held-subpath/ctr-container-info-sandbox.json"))
            .unwrap();
    let app = parse_ctr_container_info(&recorded("held-subpath/ctr-container-info-container.json"))
        .unwrap();
    assert_eq!(sandbox.kind, ContainerKind::Sandbox);
    assert_eq!(sandbox.sandbox_id.as_deref(), Some(sandbox.id.as_str()));
    assert_eq!(sandbox.image.as_deref(), Some("registry.k8s.io/pause:3.10"));
    assert_eq!(app.kind, ContainerKind::Container);
    assert_eq!(app.name.as_deref(), Some("c"));
    assert_eq!(
        app.sandbox_id, sandbox.sandbox_id,
        "the app runs in the sandbox's shim"
    );
    for c in [&sandbox, &app] {
        assert_eq!(
            c.pod_uid.as_deref(),
            Some("04f25227-dd75-4931-b2e7-616bf39d5c0f")
        );
    }
    assert!(parse_ctr_container_info("not json").is_none());
}

#[test]
fn ctr_task_ls_of_a_wedged_pod_shows_unknown_with_pid_zero() {
    let tasks = parse_ctr_tasks(&recorded("wedged-shim/ctr-tasks.txt"));
    assert_eq!(tasks.len(), 2);
    assert!(tasks.iter().all(|t| t.is_unknown() && t.pid == 0));
    assert!(
        tasks
            .iter()
            .any(|t| t.id == "b2df554a353a1667af5ccf1400be0671d9fd71d155407c22cedf273336539b89")
    );
}
