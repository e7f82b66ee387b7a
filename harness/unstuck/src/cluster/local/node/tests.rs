//! The local node on this machine's own processes, mounts and files.

use super::*;

fn node() -> LocalNode {
    let bins = Binaries {
        k8s_version: "v0".into(),
        k8s_dir: "/nonexistent".into(),
        etcd: "/nonexistent/etcd".into(),
        containerd: "/nonexistent/containerd".into(),
        ctr: "/nonexistent/ctr".into(),
        ip: "/nonexistent/ip".into(),
        images: Vec::new(),
    };
    LocalNode::new(
        Layout::new("t", 0, Path::new("/nonexistent/clusters")),
        bins,
    )
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("unstuck-node-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[tokio::test]
async fn a_background_process_holding_a_directory_is_found_and_its_group_killed() {
    let n = node();
    let dir = scratch("holder");
    let argv: Vec<String> = [
        "sh",
        "-c",
        r#"cd "$1" || exit 1; exec 3< "$1"; while :; do sleep 1; done"#,
        "unstuck-test-holder",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([dir.display().to_string()])
    .collect();
    let p = n.start_background(&argv).await.unwrap();
    assert!(p.command.contains("unstuck-test-holder"), "{p:?}");
    let mut holders = Vec::new();
    for _ in 0..50 {
        holders = n.holders_of(&dir).await.unwrap();
        if holders.iter().any(|h| h.pid == p.pid && h.uses.len() >= 2) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let h = holders
        .iter()
        .find(|h| h.pid == p.pid)
        .expect("holder found");
    assert!(
        h.uses
            .iter()
            .any(|u| u.kind == HolderUseKind::Cwd && u.path == dir),
        "{h:?}"
    );
    assert!(
        h.uses
            .iter()
            .any(|u| matches!(u.kind, HolderUseKind::Fd(3))),
        "{h:?}"
    );
    // It is not our child: it leads its own group, which one signal ends.
    n.signal(-p.pid, libc::SIGKILL).await.unwrap();
    for _ in 0..50 {
        if n.holders_of(&dir).await.unwrap().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(n.holders_of(&dir).await.unwrap().is_empty());
    n.remove_dir(&dir).await.unwrap();
    n.remove_dir(&dir).await.unwrap(); // a missing directory is fine
    assert!(n.list_dir(&dir).await.unwrap().is_empty());
}

#[tokio::test]
async fn a_tmpfs_mounts_and_unmounts_when_root() {
    if !host::is_root() {
        return;
    }
    let n = node();
    let dir = scratch("tmpfs");
    n.mount_tmpfs(&dir, "unstuck-test").await.unwrap();
    let m = n.mounts().await.unwrap();
    let mine = m.iter().find(|m| m.mount_point == dir).expect("mounted");
    assert_eq!(
        (mine.fs_type.as_str(), mine.source.as_str()),
        ("tmpfs", "unstuck-test")
    );
    n.unmount(&dir, false).await.unwrap();
    assert!(
        !n.mounts()
            .await
            .unwrap()
            .iter()
            .any(|m| m.mount_point == dir)
    );
    std::fs::remove_dir(&dir).unwrap();
}

#[tokio::test]
async fn the_kubelet_log_tail_starts_at_a_whole_line() {
    let mut n = node();
    let dir = scratch("log");
    n.layout = Layout::new("t", 0, &dir);
    std::fs::create_dir_all(n.layout.logs_dir()).unwrap();
    assert_eq!(n.kubelet_log_tail(10).await.unwrap(), None, "no log yet");
    std::fs::write(
        n.layout.log_file("kubelet"),
        "first line\nsecond line\nthird\n",
    )
    .unwrap();
    assert_eq!(
        n.kubelet_log_tail(14).await.unwrap().as_deref(),
        Some("third\n")
    );
    assert_eq!(
        n.kubelet_log_tail(1 << 20).await.unwrap().as_deref(),
        Some("first line\nsecond line\nthird\n")
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
