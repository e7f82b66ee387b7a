//! The harness under its own chaos (issue 30): `unstuck run` SIGKILLed at
//! several points of a run (its cluster booting, a node fault in place,
//! its teardown under way), then `unstuck cluster gc`. Nothing of the run
//! may be left: no cluster record, process, mount, network link, cgroup
//! in any hierarchy (the unified one of a hybrid host included) or
//! directory. A SIGKILL cannot be caught: what cleans up is the run's
//! reaper (a process of its own that sees the harness's pipe close) and,
//! for anything the reaper could not finish, `cluster gc`.
//!
//! Needs root and the components built by ci/setup.sh (CI runs both).

use std::{
    process::Child,
    sync::mpsc,
    time::{Duration, Instant},
};

use unstuck::cluster::local::{self, Layout, state::state_root};

mod common;

/// Lines until one contains `needle`, or `None` when the run ended or
/// `limit` passed first.
fn wait_line(rx: &mpsc::Receiver<String>, needle: &str, limit: Duration) -> Option<String> {
    let deadline = Instant::now() + limit;
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        match rx.recv_timeout(left) {
            Ok(line) if line.contains(needle) => return Some(line),
            Ok(_) => {}
            Err(_) => return None,
        }
    }
    None
}

fn cluster_of(line: &str) -> String {
    line.split("bringing up local cluster '")
        .nth(1)
        .and_then(|rest| rest.split('\'').next())
        .unwrap_or_else(|| panic!("no cluster named in {line:?}"))
        .to_string()
}

/// The cluster's slot, from its record (while it is there).
fn slot_of(cluster: &str) -> Option<u8> {
    let dir = state_root().join(cluster);
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if let Ok(Some(st)) = local::state::ClusterState::load(&dir) {
            return Some(st.layout.slot);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    None
}

fn sigkill(child: &mut Child) {
    // SAFETY: kill(2) on our own child's pid.
    #[allow(unsafe_code)]
    let rc = unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    assert_eq!(rc, 0, "SIGKILL to unstuck run");
    let _ = child.wait();
}

/// What is still on the machine of `cluster` once its reaper had `limit`
/// to finish, then `cluster gc` ran.
fn left_after_gc(cluster: &str, slot: u8, limit: Duration) -> Vec<String> {
    let layout = Layout::new(cluster, slot, &state_root());
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline && !local::leftovers(&layout).is_empty() {
        std::thread::sleep(Duration::from_millis(500));
    }
    let gc = common::unstuck_env(&["cluster", "gc"], &[] as &[(&str, &str)]);
    let mut left = local::leftovers(&layout);
    if !gc.status.success() {
        left.push(format!("cluster gc failed: {}", common::output_text(&gc)));
    }
    left.extend(
        local::list()
            .into_iter()
            .filter(|c| c.name == cluster)
            .map(|c| format!("record {}", c.dir.display())),
    );
    left
}

/// Runs `file`, kills the run once `point` has been reached (a line that
/// contains `marker`, then `after`), and checks that nothing is left.
fn killed_at(point: &str, file: &str, marker: &str, after: Duration) {
    let scenarios = common::scenarios_folder(&format!("kill-{point}"), &[file]);
    let out = scenarios.with_extension("out");
    let (mut child, rx) = common::spawn_run(&scenarios, &out);
    let boot = wait_line(&rx, "bringing up local cluster", Duration::from_secs(120))
        .unwrap_or_else(|| panic!("{point}: the run never started a cluster"));
    let cluster = cluster_of(&boot);
    let slot = slot_of(&cluster).unwrap_or_else(|| panic!("{point}: no record of {cluster}"));
    if !marker.is_empty() {
        wait_line(&rx, marker, Duration::from_secs(300))
            .unwrap_or_else(|| panic!("{point}: never saw {marker:?}"));
    }
    std::thread::sleep(after);
    sigkill(&mut child);
    let left = left_after_gc(&cluster, slot, Duration::from_secs(90));
    let _ = std::fs::remove_dir_all(&scenarios);
    let _ = std::fs::remove_dir_all(&out);
    assert!(
        left.is_empty(),
        "{point}: left behind after SIGKILL and gc: {left:#?}"
    );
}

#[test]
fn killed_while_its_cluster_boots() {
    killed_at(
        "boot",
        "01-orphan-finalizer-configmap.yaml",
        "",
        Duration::from_secs(2),
    );
}

#[test]
fn killed_with_a_node_fault_in_place() {
    // The busy mount is placed a few seconds into the scenario.
    killed_at(
        "fault",
        "08-busy-volume-mount.yaml",
        "start  busy-volume-mount",
        Duration::from_secs(12),
    );
}

#[test]
fn killed_while_it_tears_down() {
    killed_at(
        "teardown",
        "01-orphan-finalizer-configmap.yaml",
        "pass   orphan-finalizer-configmap",
        Duration::from_millis(300),
    );
}
