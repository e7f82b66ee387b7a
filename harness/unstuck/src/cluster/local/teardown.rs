//! Removing everything a local cluster made, from its directory alone.
//! The same code serves `down`, the reaper after a crash and the sweep of
//! stale clusters, so it must work on a cluster in any half-built state
//! and be safe to run twice.

use std::{
    fmt,
    path::{Path, PathBuf},
    time::Duration,
};

use super::{
    layout::Layout,
    network, process,
    state::{self, ClusterState},
};
use crate::host;

/// What a teardown did, for the log and for tests to check.
#[derive(Debug, Default)]
pub struct TeardownReport {
    pub stopped: Vec<String>,
    pub killed: Vec<String>,
    pub unmounted: Vec<PathBuf>,
    pub links_deleted: Vec<String>,
    /// Frozen cgroups thawed so that their processes could die.
    pub thawed: Vec<PathBuf>,
    pub errors: Vec<String>,
}

impl fmt::Display for TeardownReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "stopped {} component(s), killed {} leftover process(es), unmounted {} mount(s), deleted {} link(s)",
            self.stopped.len(),
            self.killed.len(),
            self.unmounted.len(),
            self.links_deleted.len()
        )?;
        if !self.thawed.is_empty() {
            write!(f, ", thawed {} frozen cgroup(s)", self.thawed.len())?;
        }
        if !self.errors.is_empty() {
            write!(
                f,
                "; {} problem(s): {}",
                self.errors.len(),
                self.errors.join("; ")
            )?;
        }
        Ok(())
    }
}

/// What is still on the machine for a cluster: empty means clean.
pub fn leftovers(l: &Layout) -> Vec<String> {
    let mut out = Vec::new();
    for p in cluster_processes(l) {
        out.push(format!("process {} ({})", p.pid, p.command_line()));
    }
    for m in host::mounts_under(&l.dir) {
        out.push(format!("mount {}", m.mount_point.display()));
    }
    // Links are named by slot, and a slot is handed out again as soon as
    // it is free: once another cluster holds it, the links are that
    // cluster's.
    if !slot_held_by_another(l) {
        for link in [l.host_link(), l.pod_bridge()] {
            if network::link_exists(&link) {
                out.push(format!("link {link}"));
            }
        }
    }
    for h in host::cgroup_hierarchies() {
        let dir = h.join(l.cgroup_root().trim_start_matches('/'));
        if dir.exists() {
            out.push(format!("cgroup {}", dir.display()));
        }
    }
    if l.dir.exists() {
        out.push(format!("directory {}", l.dir.display()));
    }
    out
}

/// Whether a cluster other than `l`'s has recorded `l`'s slot as its own
/// (it records it, under the root lock, before it makes any link).
fn slot_held_by_another(l: &Layout) -> bool {
    let Some(root) = l.dir.parent() else {
        return false;
    };
    state::list(root)
        .into_iter()
        .any(|(dir, s)| dir != l.dir && matches!(s, Ok(Some(other)) if other.layout.slot == l.slot))
}

/// Processes that belong to the cluster: anything whose command line names
/// its directory (components, shims) or that lives in its cgroup tree (pods).
fn cluster_processes(l: &Layout) -> Vec<host::Process> {
    let dir = l.dir.display().to_string();
    let in_cgroups = host::pids_in_cgroup_tree(&host::cgroup_hierarchies(), &l.cgroup_root());
    let me = std::process::id() as i32;
    host::processes()
        .into_iter()
        .filter(|p| p.pid != me && p.state != 'Z')
        // The reaper names the directory too, and must not kill itself.
        .filter(|p| !p.cmdline.iter().any(|a| a == "__reap"))
        .filter(|p| p.cmdline.iter().any(|a| names_dir(a, &dir)) || in_cgroups.contains(&p.pid))
        .collect()
}

/// Whether a command-line argument names `dir` or a path inside it. Not a
/// bare substring test: cluster `run-x`'s directory is a prefix of cluster
/// `run-x-1`'s, and tearing down one must never touch the other.
fn names_dir(arg: &str, dir: &str) -> bool {
    let dir = dir.trim_end_matches('/');
    arg.match_indices(dir).any(|(i, _)| {
        let after = &arg[i + dir.len()..];
        after.is_empty() || after.starts_with('/')
    })
}

fn ip_program() -> PathBuf {
    ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .unwrap_or_else(|| PathBuf::from("ip"))
}

/// Tears down the cluster in `dir`. Never fails: problems are collected in
/// the report, and everything that can be removed is.
pub async fn teardown(dir: &Path) -> TeardownReport {
    let _turn = wait_turn(dir).await;
    let mut report = TeardownReport::default();
    let state = match ClusterState::load(dir) {
        Ok(s) => s,
        Err(e) => {
            report.errors.push(e.to_string());
            None
        }
    };
    let Some(state) = state else {
        // No record (a crash before the first save): nothing named by
        // slot can be known, but the directory itself is ours.
        unmount_all(dir, &mut report);
        if host::mounts_under(dir).is_empty() {
            remove_dir(dir, &mut report);
        }
        return report;
    };
    let layout = &state.layout;
    stop_processes(&state, &mut report).await;
    // 3. Mounts: container rootfs, shm, netns, pod volumes, and anything injected.
    unmount_all(&layout.dir, &mut report);
    delete_links(layout, &mut report).await;
    remove_cgroups(layout, &mut report);

    // 6. The directory, only once nothing is mounted inside it and no
    // process of the cluster is left: the record in it is how the reaper
    // or `cluster gc` finds the cluster again to finish the job. Removed
    // with processes still running, they would be nobody's to stop.
    let running = cluster_processes(layout);
    if !host::mounts_under(&layout.dir).is_empty() {
        report.errors.push(format!(
            "kept {} because mounts remain inside it",
            layout.dir.display()
        ));
    } else if !running.is_empty() {
        report.errors.push(format!(
            "kept {} because {} process(es) of the cluster are still running: {}",
            layout.dir.display(),
            running.len(),
            running
                .iter()
                .map(|p| format!("{} ({})", p.pid, p.command_line()))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    } else {
        remove_dir(&layout.dir, &mut report);
    }
    report
}

/// Waits until no other teardown of the cluster in `dir` runs, and holds
/// that turn until dropped. A killed harness's reaper and a `cluster gc`
/// that finds the cluster stale (its owner is dead) tear it down at once
/// otherwise, and each takes the other's unmounts for failures ("Invalid
/// argument": no longer a mount), so gc failed. The lock is a `flock` on
/// the directory itself: no lock file is left behind, the kernel lets go
/// when its holder dies, and a teardown that waited finds the directory
/// gone and nothing to do. `None` (no turn to take) when the directory
/// cannot be opened (it is gone).
async fn wait_turn(dir: &Path) -> Option<std::fs::File> {
    let dir = dir.to_path_buf();
    tokio::task::spawn_blocking(move || {
        let held = std::fs::File::open(&dir).ok()?;
        match held.lock() {
            Ok(()) => Some(held),
            Err(e) => {
                tracing::warn!("locking {} for its teardown: {e}", dir.display());
                None
            }
        }
    })
    .await
    .ok()
    .flatten()
}

/// Steps 1 and 2: the components, then what they left running.
async fn stop_processes(state: &ClusterState, report: &mut TeardownReport) {
    let layout = &state.layout;
    // 1. Components, kubelet first so it does not restart pods while the rest
    // goes. Marked first, so that the owner's supervisor (when this is
    // `unstuck cluster down` from another process) restarts none of them.
    if let Err(e) = state::mark_tearing_down(&layout.dir) {
        // Its supervisor may restart what is stopped below; the leftover
        // check after the teardown would say so.
        report.errors.push(format!(
            "marking {} as torn down: {e}",
            layout.dir.display()
        ));
    }
    let order = [
        "kubelet",
        "kube-scheduler",
        "kube-controller-manager",
        "kube-apiserver",
        "etcd",
    ];
    let components = &state.components;
    for name in order {
        for c in components.iter().filter(|c| c.name == name) {
            if c.process.is_alive() {
                process::stop(&c.process, Duration::from_secs(10)).await;
                report.stopped.push(c.name.clone());
            }
        }
    }
    // 2. Pod processes and shims, then containerd itself. A frozen
    // process never dies of its SIGKILL: what a fault (or a person) froze
    // is thawed first, now that the kubelet that could act on it is gone.
    thaw_cgroups(layout, report);
    kill_leftovers(layout, report, |p| {
        !p.cmdline
            .first()
            .is_some_and(|a| a.ends_with("/containerd"))
    })
    .await;
    for c in components.iter().filter(|c| c.name == "containerd") {
        if c.process.is_alive() {
            process::stop(&c.process, Duration::from_secs(10)).await;
            report.stopped.push(c.name.clone());
        }
    }
    kill_leftovers(layout, report, |_| true).await;
}

/// Step 4, the links: pod veths go with their netns; the bridges are ours
/// to delete.
async fn delete_links(layout: &Layout, report: &mut TeardownReport) {
    let ip = ip_program();
    for link in network::bridge_members(&layout.pod_bridge())
        .into_iter()
        .chain([layout.pod_bridge(), layout.host_link()])
    {
        if network::link_exists(&link) {
            match network::delete_link(&ip, &link).await {
                Ok(()) => report.links_deleted.push(link),
                Err(e) => report.errors.push(e.to_string()),
            }
        }
    }
}

/// Thaws the cluster's cgroup tree in every hierarchy.
fn thaw_cgroups(layout: &Layout, report: &mut TeardownReport) {
    for h in host::cgroup_hierarchies() {
        let d = h.join(layout.cgroup_root().trim_start_matches('/'));
        match host::thaw_cgroup_tree(&d) {
            Ok(thawed) => report.thawed.extend(thawed),
            Err(e) => report
                .errors
                .push(format!("thaw cgroup {}: {e}", d.display())),
        }
    }
}

/// Step 5: the cluster's cgroup tree in every hierarchy, the unified one
/// of a hybrid host included.
fn remove_cgroups(layout: &Layout, report: &mut TeardownReport) {
    for h in host::cgroup_hierarchies() {
        let d = h.join(layout.cgroup_root().trim_start_matches('/'));
        if let Err(e) = host::remove_cgroup_tree(&d) {
            report
                .errors
                .push(format!("remove cgroup {}: {e}", d.display()));
        }
    }
}

async fn kill_leftovers(
    l: &Layout,
    report: &mut TeardownReport,
    which: impl Fn(&host::Process) -> bool,
) {
    for _round in 0..5 {
        let procs: Vec<host::Process> = cluster_processes(l).into_iter().filter(&which).collect();
        if procs.is_empty() {
            return;
        }
        for p in &procs {
            // SIGKILL also ends a SIGSTOPped shim, which SIGTERM would not.
            if let Err(e) = host::signal(p.pid, libc::SIGKILL) {
                report.errors.push(format!("SIGKILL to {}: {e}", p.pid));
            }
            let name = p.cmdline.first().cloned().unwrap_or_default();
            if !report
                .killed
                .iter()
                .any(|k| k.starts_with(&format!("{} ", p.pid)))
            {
                report.killed.push(format!("{} {name}", p.pid));
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Unmounts everything below `dir`, deepest first, lazily where busy.
fn unmount_all(dir: &Path, report: &mut TeardownReport) {
    for _round in 0..3 {
        let mounts = host::mounts_under(dir);
        if mounts.is_empty() {
            return;
        }
        for m in mounts {
            let result = host::unmount(&m.mount_point, false)
                .or_else(|_| host::unmount(&m.mount_point, true));
            match result {
                Ok(()) => report.unmounted.push(m.mount_point),
                Err(e) => report
                    .errors
                    .push(format!("unmount {}: {e}", m.mount_point.display())),
            }
        }
    }
}

// Only called once nothing is mounted below `dir`, so remove_dir_all never
// reaches into a bind-mounted tree that is not ours.
fn remove_dir(dir: &Path, report: &mut TeardownReport) {
    if let Err(e) = std::fs::remove_dir_all(dir)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        report.errors.push(format!("remove {}: {e}", dir.display()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_directory_is_not_a_prefix_of_another() {
        let dir = "/var/lib/unstuck/clusters/run-x";
        assert!(names_dir(
            "--data-dir=/var/lib/unstuck/clusters/run-x/etcd",
            dir
        ));
        assert!(names_dir("/var/lib/unstuck/clusters/run-x", dir));
        assert!(!names_dir(
            "--data-dir=/var/lib/unstuck/clusters/run-x-1/etcd",
            dir
        ));
        assert!(!names_dir("/var/lib/unstuck/clusters/run-xy", dir));
        assert!(names_dir(
            "-address=/var/lib/unstuck/clusters/run-x-1/a:/var/lib/unstuck/clusters/run-x/b",
            dir
        ));
    }
}
