#[test]
fn a_file_lock_is_held_by_one_opener_until_it_is_dropped() {
    let path = std::env::temp_dir().join(format!("unstuck-lock-test-{}", std::process::id()));
    let held = lock_file(&path).unwrap();
    // A second open file description is a second flock holder.
    let other = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    assert!(
        matches!(other.try_lock(), Err(std::fs::TryLockError::WouldBlock)),
        "a second opener must wait while the lock is held"
    );
    drop(held);
    other.try_lock().expect("free once the holder dropped it");
    drop(other);
    std::fs::remove_file(&path).unwrap();
}

use super::*;

#[test]
fn a_frozen_tree_is_thawed_parents_first_and_a_thawed_one_left_alone() {
    let root = std::env::temp_dir().join(format!("unstuck-thaw-test-{}", std::process::id()));
    let _ = fs::remove_dir_all(&root);
    let v1 = root.join("freezer/unstuck-x");
    let v2 = root.join("unified/unstuck-x");
    for d in [
        v1.join("kubepods/pod1"),
        v2.join("kubepods/pod1"),
        v2.join("kubepods/pod2"),
    ] {
        fs::create_dir_all(d).unwrap();
    }
    fs::write(v1.join("freezer.state"), "THAWED\n").unwrap();
    fs::write(v1.join("kubepods/freezer.state"), "FROZEN\n").unwrap();
    fs::write(v1.join("kubepods/pod1/freezer.state"), "FROZEN\n").unwrap();
    fs::write(v2.join("kubepods/cgroup.freeze"), "0\n").unwrap();
    fs::write(v2.join("kubepods/pod1/cgroup.freeze"), "1\n").unwrap();
    fs::write(v2.join("kubepods/pod2/cgroup.freeze"), "0\n").unwrap();

    let thawed = thaw_cgroup_tree(&v1).unwrap();
    assert_eq!(thawed, [v1.join("kubepods"), v1.join("kubepods/pod1")]);
    assert_eq!(thaw_cgroup_tree(&v2).unwrap(), [v2.join("kubepods/pod1")]);
    for f in ["kubepods/freezer.state", "kubepods/pod1/freezer.state"] {
        assert_eq!(fs::read_to_string(v1.join(f)).unwrap(), "THAWED");
    }
    assert_eq!(
        fs::read_to_string(v2.join("kubepods/pod1/cgroup.freeze")).unwrap(),
        "0"
    );
    assert!(
        thaw_cgroup_tree(&v1).unwrap().is_empty(),
        "a second pass finds nothing frozen"
    );
    assert!(thaw_cgroup_tree(&root.join("gone")).unwrap().is_empty());
    fs::remove_dir_all(&root).unwrap();
}

#[test]
fn stat_with_parentheses_in_the_name_parses() {
    let stat = "4242 (containerd-shim (x)) T 1 4242 4242 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 10 0 987654 0 0";
    assert_eq!(parse_stat(stat), Some(('T', 987654)));
}

#[test]
fn mountinfo_lines_decode_escapes_and_skip_optional_fields() {
    let text = "36 35 98:0 /mnt1 /mnt/with\\040space rw,noatime master:1 - ext3 /dev/root rw,errors=continue\n\
                612 29 0:5 / /var/lib/unstuck/c/kubelet/pods/u1/volumes/kubernetes.io~empty-dir/data/held rw shared:3 - tmpfs tmpfs rw\n";
    let m = parse_mountinfo(text);
    assert_eq!(m.len(), 2);
    assert_eq!(m[0].mount_point, PathBuf::from("/mnt/with space"));
    assert_eq!(m[0].fs_type, "ext3");
    assert_eq!(m[0].source, "/dev/root");
    assert_eq!(m[1].fs_type, "tmpfs");
}

#[test]
fn this_process_is_alive_and_a_wrong_start_time_is_not() {
    let me = process(std::process::id() as i32).expect("self in /proc");
    assert!(is_alive(me.pid, me.start_time));
    assert!(!is_alive(me.pid, me.start_time + 1));
}
