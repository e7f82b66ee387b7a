//! Kubelet log parsing on recorded lines: the v1.34.4 kubelet of this
//! project's local clusters (recorded while injecting the node faults), and
//! the older kubelets quoted in seed articles 003 and 004.

mod doctor_support;

use unstuck_core::doctor::node::{
    KubeletEvent, KubeletLogEntry, RuntimeCall, Severity, SyncLoopOp, VolumeFailureKind,
    is_busy_error, klog_records, parse_kubelet_log,
};

fn recorded(path: &str) -> String {
    doctor_support::recorded_text(format!("node/{path}"))
}

fn parse(path: &str) -> Vec<KubeletLogEntry> {
    let text = recorded(path);
    let records = klog_records(&text);
    parse_kubelet_log(records.iter().map(String::as_str))
}

/// (volume, uid, error, retry_after) of every TearDown/subPath failure.
fn failures(
    entries: &[KubeletLogEntry],
) -> Vec<(VolumeFailureKind, String, String, String, String)> {
    entries
        .iter()
        .filter_map(|e| match &e.event {
            KubeletEvent::VolumeTearDownFailed {
                kind,
                volume,
                pod_uid,
                error,
                retry_after,
                ..
            } => Some((
                *kind,
                volume.clone(),
                pod_uid.clone(),
                error.clone(),
                retry_after.clone().unwrap_or_default(),
            )),
            _ => None,
        })
        .collect()
}

#[test]
fn v1_34_emptydir_teardown_fails_with_ebusy_and_backs_off_then_succeeds() {
    let entries = parse("busy-mount/kubelet.log");
    let uid = "5f2b6b7d-d187-4b22-bc17-93965e88726e";
    let f = failures(&entries);
    assert_eq!(f.len(), 6, "{f:#?}");
    for (kind, volume, pod_uid, error, _) in &f {
        assert_eq!(*kind, VolumeFailureKind::TearDown);
        assert_eq!(volume, "data");
        assert_eq!(pod_uid, uid);
        assert!(
            error.starts_with("unlinkat /var/lib/unstuck/clusters/h4-exp/kubelet/pods/"),
            "{error}"
        );
        assert!(
            error.ends_with("/volumes/kubernetes.io~empty-dir/data/held: device or resource busy"),
            "{error}"
        );
        assert!(is_busy_error(error));
    }
    let backoff: Vec<&str> = f.iter().map(|x| x.4.as_str()).collect();
    assert_eq!(backoff, ["500ms", "1s", "2s", "4s", "8s", "16s"]);
    // The first failure says exactly when the kubelet retries.
    let KubeletEvent::VolumeTearDownFailed {
        retry_at,
        unique_name,
        ..
    } = &entries
        .iter()
        .find(|e| matches!(e.event, KubeletEvent::VolumeTearDownFailed { .. }))
        .unwrap()
        .event
    else {
        unreachable!()
    };
    assert_eq!(
        retry_at.unwrap().to_string(),
        "2026-11-22T02:04:51.521053398Z"
    );
    assert_eq!(unique_name, &format!("kubernetes.io/empty-dir/{uid}-data"));

    // After the stray mount was unmounted: TearDown succeeded, then the
    // kubelet's own final delete (DELETE, REMOVE) and the cleanup.
    let later: Vec<&KubeletEvent> = entries
        .iter()
        .skip_while(|e| !matches!(&e.event, KubeletEvent::VolumeTearDownSucceeded { volume, .. } if volume == "data"))
        .map(|e| &e.event)
        .collect();
    assert!(
        matches!(later[0], KubeletEvent::VolumeTearDownSucceeded { pod_uid, .. } if pod_uid == uid)
    );
    assert!(later.iter().any(|e| matches!(e, KubeletEvent::SyncLoop { op: SyncLoopOp::Delete, pods } if pods == &["default/busy"])));
    assert!(later.iter().any(|e| matches!(e, KubeletEvent::SyncLoop { op: SyncLoopOp::Remove, pods } if pods == &["default/busy"])));
    assert!(later.iter().any(
        |e| matches!(e, KubeletEvent::OrphanVolumesCleaned { pod_uid, .. } if pod_uid == uid)
    ));
    // The projected token volume tore down normally at the start.
    assert!(entries.iter().any(|e| matches!(&e.event, KubeletEvent::VolumeTearDownSucceeded { volume, .. } if volume.starts_with("kube-api-access-"))));
    assert!(
        entries
            .iter()
            .all(|e| e.event.concerns(uid, "default/busy", &[]))
    );
}

#[test]
fn v1_34_subpath_cleanup_spans_lines_and_says_target_is_busy() {
    let text = recorded("held-subpath/kubelet.log");
    let records = klog_records(&text);
    assert!(
        records.len() < text.lines().count(),
        "continuation lines were joined"
    );
    let entries = parse_kubelet_log(records.iter().map(String::as_str));
    let f = failures(&entries);
    assert!(f.len() >= 5, "{f:#?}");
    let (kind, volume, uid, error, _) = &f[0];
    assert_eq!(*kind, VolumeFailureKind::SubPathCleanup);
    assert_eq!(volume, "cfg");
    assert_eq!(uid, "04f25227-dd75-4931-b2e7-616bf39d5c0f");
    assert!(error.contains("error cleaning subpath mount /var/lib/unstuck/clusters/h4-fx/kubelet/pods/04f25227-dd75-4931-b2e7-616bf39d5c0f/volume-subpaths/cfg/c/1: unmount failed: exit status 32"), "{error}");
    assert!(error.contains("\nOutput: umount: "), "{error}");
    assert!(
        error.ends_with("volume-subpaths/cfg/c/1: target is busy."),
        "{error}"
    );
    assert!(is_busy_error(error));
}

#[test]
fn v1_34_kill_failures_of_a_wedged_shim() {
    let entries = parse("wedged-shim/kubelet.log");
    let uid = "103ae535-dbd1-4f09-ad8a-a606947563f7";
    let ctr = "b2df554a353a1667af5ccf1400be0671d9fd71d155407c22cedf273336539b89";
    let sandbox = "117b8b35c3d92c99dda97e8ce3fbf4125fade9709000c5353edee0a621520fb8";
    let events: Vec<&KubeletEvent> = entries.iter().map(|e| &e.event).collect();
    assert!(events.iter().any(|e| matches!(e,
        KubeletEvent::KillingContainer { pod: Some(p), container_id: Some(c), grace_period: Some(2), .. }
        if p == "default/wedge" && c == ctr)));
    assert!(events.iter().any(|e| matches!(e,
        KubeletEvent::RuntimeCallFailed { call: RuntimeCall::StopContainer, id, error }
        if id == ctr && error == "rpc error: code = DeadlineExceeded desc = context deadline exceeded")));
    assert!(events.iter().any(|e| matches!(e,
        KubeletEvent::RuntimeCallFailed { call: RuntimeCall::StopPodSandbox, id, .. } if id == sandbox)));
    assert!(events.iter().any(|e| matches!(e,
        KubeletEvent::KillContainerFailed { pod_uid: Some(u), container: Some(c), container_id: Some(id), error, .. }
        if u == uid && c == "c" && id == ctr && error.contains("DeadlineExceeded"))));
    let sync = entries
        .iter()
        .find_map(|e| match &e.event {
            KubeletEvent::SyncFailed {
                pod_uid, failures, ..
            } => Some((pod_uid, failures, e.severity)),
            _ => None,
        })
        .expect("Error syncing pod");
    assert_eq!(sync.0.as_deref(), Some(uid));
    assert_eq!(sync.2, Severity::Error);
    let f = sync.1;
    assert_eq!(f.len(), 2);
    assert_eq!(
        (
            f[0].action.as_str(),
            f[0].target.as_str(),
            f[0].reason.as_str()
        ),
        ("KillContainer", "c", "KillContainerError")
    );
    assert_eq!(
        (
            f[1].action.as_str(),
            f[1].target.as_str(),
            f[1].reason.as_str()
        ),
        ("KillPodSandbox", uid, "KillPodSandboxError")
    );
    assert!(f.iter().all(
        |x| x.message == "rpc error: code = DeadlineExceeded desc = context deadline exceeded"
    ));
    let ids = [ctr.to_owned(), sandbox.to_owned()];
    assert!(
        entries
            .iter()
            .all(|e| e.event.concerns(uid, "default/wedge", &ids))
    );
}

#[test]
fn seed_003_glusterfs_unmount_target_busy_in_chinese() {
    let entries = parse("seeds/seed-003-glusterfs.log");
    let f = failures(&entries);
    assert_eq!(f.len(), 1);
    let (kind, volume, uid, error, backoff) = &f[0];
    assert_eq!(*kind, VolumeFailureKind::TearDown);
    assert_eq!(volume, "diag-log");
    assert_eq!(uid, "5c948341-c030-4996-b888-f032577d97b0");
    assert!(
        error.starts_with(
            "Unmount failed: exit status 32\nUnmounting arguments: /var/lib/kubelet/pods/"
        ),
        "{error}"
    );
    assert!(error.contains("目标忙"), "{error}");
    assert!(is_busy_error(error));
    assert_eq!(backoff, "500ms");
    let KubeletEvent::VolumeTearDownFailed { retry_at, .. } = &entries.last().unwrap().event else {
        unreachable!()
    };
    assert_eq!(
        retry_at.unwrap().to_string(),
        "2021-07-28T08:25:21.439325811Z"
    );
    // Old-style sync loop lines name the pod as `name_ns(uid)`.
    let deletes = entries
        .iter()
        .filter(|e| {
            matches!(
                e.event,
                KubeletEvent::SyncLoop {
                    op: SyncLoopOp::Delete,
                    ..
                }
            )
        })
        .count();
    assert_eq!(deletes, 2);
    assert!(
        entries
            .iter()
            .all(|e| e.event.concerns(uid, "cam/cam1-78b6fc6bc8-cjsw5", &[]))
    );
}

#[test]
fn seed_003_a_normal_delete_ends_with_remove() {
    let entries = parse("seeds/seed-003-normal-delete.log");
    assert!(matches!(&entries.last().unwrap().event,
        KubeletEvent::SyncLoop { op: SyncLoopOp::Remove, pods } if pods[0].ends_with("(85ee282f-a843-4f10-a99c-79d447f83f2a)")));
}

#[test]
fn seed_004_subpath_cleanup_behind_a_journald_prefix() {
    let entries = parse("seeds/seed-004-subpath.log");
    let f = failures(&entries);
    assert_eq!(f.len(), 1);
    let (kind, volume, uid, error, backoff) = &f[0];
    assert_eq!(*kind, VolumeFailureKind::SubPathCleanup);
    assert_eq!(volume, "filebeat-config");
    assert_eq!(uid, "c74b89dd-be53-11e8-a1f4-525400f721a0");
    assert!(
        error.ends_with("/volume-subpaths/filebeat-config/filebeat/1: device or resource busy"),
        "{error}"
    );
    assert_eq!(backoff, "1s");
    let KubeletEvent::VolumeTearDownFailed { retry_at, .. } = &entries[0].event else {
        unreachable!()
    };
    assert_eq!(
        retry_at.unwrap().to_string(),
        "2018-09-22T12:04:08.711632504Z"
    );
    assert_eq!(entries[0].time, "0922 20:04:07.711666");
}

#[test]
fn unrelated_and_garbled_lines_are_skipped() {
    let text = "hello\nI1122 02:04:50.830994    5380 cri_stats_provider.go:573] \"Failed to get the info of the filesystem with mountpoint\" err=\"x\"\nE1122 02:04:51.021105    5380 nestedpendingoperations.go:348] Operation for \"x\" failed. Error: UnmountVolume.TearDown failed for volume \"unterminated\n";
    let records = klog_records(text);
    assert!(parse_kubelet_log(records.iter().map(String::as_str)).is_empty());
}
