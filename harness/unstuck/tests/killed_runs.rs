//! The harness under its own chaos (issue 30): `unstuck run` SIGKILLed at
//! many points of a run (etcd starting, the API server answering, images
//! importing, a scenario's objects being created, a node fault in place:
//! a busy mount, a frozen cgroup, a wedged shim, a CNI plugin missing; the
//! doctor applying, a backend container or a registry up, the report
//! being written, the teardown under way), then `unstuck cluster gc`:
//! once the run's reaper is done, or at once beside it, or with the reaper
//! killed too. Nothing of the run may be left: no cluster record,
//! process, mount (in any mount namespace, network namespaces included),
//! network link, iptables rule, cgroup in any hierarchy (the unified one
//! of a hybrid host included), directory, temp entry, container or
//! Docker network. A SIGKILL cannot be caught: what cleans up is the
//! run's reaper (a process of its own that sees the harness's pipe close)
//! and, for anything the reaper could not finish, `cluster gc`.
//!
//! Each point runs one scenario on a cluster of its own (every run makes
//! its own, named after its run id), so the points run side by side.
//! Each prints `killed at <point>: left: ...` on the real stderr, which
//! libtest does not capture, so a passing run shows what it proved.
//!
//! Needs root and the components built by ci/setup.sh (CI runs both);
//! the container and registry points need the images of ci/images/.

use std::{
    collections::HashSet,
    io::Write as _,
    path::Path,
    process::Child,
    sync::mpsc,
    time::{Duration, Instant},
};

use unstuck::cluster::local::{self, Layout, state::state_root};

mod common;

/// The run's log: the usual, plus the debug lines that mark its steps
/// (target [`unstuck::STEP_LOG`]), which the points wait for.
const RUN_LOG: &str = "info,kube_client=off,unstuck::step=debug";

/// Where a run is killed.
struct Point {
    name: &'static str,
    /// The scenario it runs.
    file: &'static str,
    /// A line of the run that says the point is reached.
    marker: &'static str,
    /// How long after that line the kill comes.
    after: Duration,
    /// Whether the scenario starts containers (so Docker must answer).
    containers: bool,
    /// Whether `cluster gc` runs at once, beside the reaper, rather than
    /// once the reaper is done.
    gc_at_once: bool,
    /// Whether the reaper dies with the run (as when a CI job's whole
    /// cgroup is killed), so that gc alone cleans up.
    reaper_killed: bool,
}

impl Point {
    const fn new(name: &'static str, file: &'static str, marker: &'static str) -> Self {
        Self {
            name,
            file,
            marker,
            after: Duration::ZERO,
            containers: false,
            gc_at_once: false,
            reaper_killed: false,
        }
    }
    const fn after(mut self, after: Duration) -> Self {
        self.after = after;
        self
    }
    const fn with_containers(mut self) -> Self {
        self.containers = true;
        self
    }
    const fn gc_at_once(mut self) -> Self {
        self.gc_at_once = true;
        self
    }
    const fn reaper_killed(mut self) -> Self {
        self.reaper_killed = true;
        self
    }
}

/// The quickest scenario: a ConfigMap held by a finalizer nobody serves.
const CONFIGMAP: &str = "01-orphan-finalizer-configmap.yaml";

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

/// Whether `text` names `path` or a path inside it: not a bare substring
/// test, since cluster `run-x`'s directory is a prefix of `run-x1`'s.
fn names_path(text: &str, path: &str) -> bool {
    text.match_indices(path).any(|(i, _)| {
        text[i + path.len()..]
            .chars()
            .next()
            .is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.'))
    })
}

/// Mounts that name `dir` (as mount point, root or option: an overlay's
/// lowerdir) in any mount namespace on the machine, not only the test's:
/// a copy of a mount in another namespace keeps its filesystem, or the
/// network namespace it pins, alive.
fn mounts_naming(dir: &Path) -> Vec<String> {
    let dir = dir.display().to_string();
    let mut seen_ns = HashSet::new();
    let mut left = Vec::new();
    for pid in std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
    {
        let Ok(ns) = std::fs::read_link(format!("/proc/{pid}/ns/mnt")) else {
            continue;
        };
        if !seen_ns.insert(ns.clone()) {
            continue;
        }
        let Ok(info) = std::fs::read_to_string(format!("/proc/{pid}/mountinfo")) else {
            continue;
        };
        for line in info.lines().filter(|l| names_path(l, &dir)) {
            let kind = if line.contains(" - nsfs ") {
                "network namespace (nsfs mount)"
            } else {
                "mount"
            };
            left.push(format!(
                "{kind} in mount namespace {} (pid {pid}): {line}",
                ns.display()
            ));
        }
    }
    left
}

/// Processes whose working directory or root lies in `dir` (a holder a
/// fault started, say), which the cluster's own check (command lines and
/// cgroups) does not look at.
fn processes_in(dir: &Path) -> Vec<String> {
    let dir = dir.display().to_string();
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let held = ["cwd", "root"].into_iter().find_map(|link| {
                let to = std::fs::read_link(format!("/proc/{pid}/{link}")).ok()?;
                names_path(&to.display().to_string(), &dir)
                    .then(|| format!("{link} {}", to.display()))
            })?;
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            Some(format!(
                "process {pid} ({}) with its {held}",
                cmdline.trim()
            ))
        })
        .collect()
}

/// The cluster's iptables rules: any naming its node address, subnets or
/// links. Asked only while no other cluster holds its slot (the names and
/// addresses are the slot's).
fn iptables_rules(l: &Layout) -> Vec<String> {
    let Ok(out) = std::process::Command::new("iptables-save").output() else {
        return Vec::new();
    };
    let slot = l.slot;
    let marks = [
        l.node_ip().to_string(),
        format!("10.214.{slot}."),
        format!("10.215.{slot}."),
        l.host_link(),
        l.pod_bridge(),
    ];
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|line| !line.starts_with('#'))
        .filter(|line| marks.iter().any(|m| line.contains(m.as_str())))
        .map(|line| format!("iptables rule {line}"))
        .collect()
}

/// The pid of the cluster's reaper, while it runs.
fn reaper_of(l: &Layout) -> Option<i32> {
    let dir = l.dir.display().to_string();
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let pid = e.file_name().to_str()?.parse::<i32>().ok()?;
            let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
            let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
            (args.contains(&b"__reap".as_slice()) && args.contains(&dir.as_bytes())).then_some(pid)
        })
        .next()
}

fn reaper_runs(l: &Layout) -> bool {
    reaper_of(l).is_some()
}

/// Sends `signal` to the cluster's reaper; whether there was one.
fn signal_reaper(l: &Layout, signal: i32) -> bool {
    let Some(pid) = reaper_of(l) else {
        return false;
    };
    // SAFETY: kill(2) on a pid just read from /proc.
    #[allow(unsafe_code)]
    let rc = unsafe { libc::kill(pid, signal) };
    rc == 0
}

fn docker_answers() -> bool {
    std::process::Command::new("docker")
        .args(["info", "--format", "{{.ID}}"])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// What is still on the machine of the run `run_pid` of `cluster` once its
/// reaper had `limit` to finish, then `cluster gc` ran.
fn left_after_gc(point: &Point, cluster: &str, slot: u8, run_pid: u32) -> Vec<String> {
    let layout = Layout::new(cluster, slot, &state_root());
    // A reaper that was killed leaves its work undone: only gc does it.
    let reaper_kept = !point.reaper_killed;
    let settled = || {
        let deadline = Instant::now() + Duration::from_secs(90);
        while Instant::now() < deadline
            && ((reaper_kept && !local::leftovers(&layout).is_empty()) || reaper_runs(&layout))
        {
            std::thread::sleep(Duration::from_millis(500));
        }
    };
    if !point.gc_at_once {
        settled();
    }
    let gc_started = Instant::now();
    let gc = {
        let _sweeps = common::sweep_lock();
        common::unstuck_env(&["cluster", "gc"], &[] as &[(&str, &str)])
    };
    eprintln!(
        "{}: cluster gc took {:.1} s: {}",
        point.name,
        gc_started.elapsed().as_secs_f64(),
        String::from_utf8_lossy(&gc.stdout).trim()
    );
    if point.gc_at_once {
        // Whatever the two left between them, once the reaper is done.
        settled();
    }
    let mut left = local::leftovers(&layout);
    if !gc.status.success() {
        left.push(format!("cluster gc failed: {}", common::output_text(&gc)));
    }
    let clusters = local::list();
    left.extend(
        clusters
            .iter()
            .filter(|c| c.name == cluster)
            .map(|c| format!("record {}", c.dir.display())),
    );
    left.extend(mounts_naming(&layout.dir));
    left.extend(processes_in(&layout.dir));
    if layout.registry_hosts_dir().exists() {
        left.push(format!(
            "registry hosts dir {}",
            layout.registry_hosts_dir().display()
        ));
    }
    if !clusters
        .iter()
        .any(|c| c.name != cluster && c.slot == Some(slot))
    {
        left.extend(iptables_rules(&layout));
    }
    left.extend(
        std::fs::read_dir(std::env::temp_dir())
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| names_path(&e.file_name().to_string_lossy(), cluster))
            .map(|e| format!("temp entry {}", e.path().display())),
    );
    // The run's containers and networks carry its pid as their owner.
    if docker_answers() {
        left.extend(common::labelled(
            unstuck::containers::labels::OWNER_PID,
            &run_pid.to_string(),
        ));
    } else if point.containers {
        left.push("docker does not answer: its containers cannot be checked".into());
    }
    left
}

/// Runs the point's scenario, kills the run once the point has been
/// reached, runs `cluster gc` and checks that nothing is left.
fn killed_at(point: Point) {
    let started = Instant::now();
    let name = point.name;
    let scenarios = common::scenarios_folder(&format!("kill-{name}"), &[point.file]);
    let out = scenarios.sibling("out");
    let (mut child, rx) = common::spawn_run_env(
        &scenarios,
        &out,
        &[("UNSTUCK_LOG", std::ffi::OsStr::new(RUN_LOG))],
    );
    let run_pid = child.id();
    let boot = wait_line(&rx, "bringing up local cluster", Duration::from_secs(120));
    let Some(boot) = boot else {
        sigkill(&mut child);
        panic!("{name}: the run never started a cluster");
    };
    let cluster = cluster_of(&boot);
    let slot = slot_of(&cluster).unwrap_or_else(|| panic!("{name}: no record of {cluster}"));
    let reached = wait_line(&rx, point.marker, Duration::from_secs(300)).is_some();
    std::thread::sleep(point.after);
    // What the check after gc must find gone: the run's containers, seen
    // by the same query while they are there.
    let containers = match point.containers {
        true => common::labelled(unstuck::containers::labels::OWNER_PID, &run_pid.to_string()),
        false => Vec::new(),
    };
    let layout = Layout::new(&cluster, slot, &state_root());
    // Stopped first, so it does nothing of its teardown before it dies.
    let reaper_stopped = point.reaper_killed && signal_reaper(&layout, libc::SIGSTOP);
    // Killed mid-run, not after: a run that had ended would prove nothing.
    let ended = child.try_wait().expect("the run's status");
    sigkill(&mut child);
    if reaper_stopped {
        signal_reaper(&layout, libc::SIGKILL);
    }
    let left = left_after_gc(&point, &cluster, slot, run_pid);
    let said = match left.is_empty() {
        true => "nothing".to_string(),
        false => left.join("; "),
    };
    // libtest captures eprintln!, not the stderr handle itself.
    let _ = std::io::stderr().write_all(
        format!(
            "killed at {name}: left: {said} (cluster {cluster}{}, {:.0} s)\n",
            match containers.is_empty() {
                true => String::new(),
                false => format!(" with {}", containers.join(", ")),
            },
            started.elapsed().as_secs_f64()
        )
        .as_bytes(),
    );
    assert!(reached, "{name}: the run never logged {:?}", point.marker);
    assert!(
        ended.is_none(),
        "{name}: the run ended ({ended:?}) before the kill"
    );
    assert!(
        reaper_stopped || !point.reaper_killed,
        "{name}: no reaper of the run to kill"
    );
    assert!(
        !point.containers || !containers.is_empty(),
        "{name}: no container of the run was up when it was killed"
    );
    assert!(
        left.is_empty(),
        "{name}: left behind after SIGKILL and gc: {left:#?}"
    );
}

#[test]
fn killed_while_etcd_starts() {
    killed_at(Point::new(
        "etcd-starting",
        CONFIGMAP,
        "etcd starts for cluster",
    ));
}

#[test]
fn killed_once_the_api_server_answers() {
    killed_at(Point::new(
        "apiserver-answering",
        CONFIGMAP,
        "kube-apiserver answers for cluster",
    ));
}

#[test]
fn killed_while_containerd_imports_images() {
    // Into the import: containerd unpacks layers on temporary mounts.
    killed_at(
        Point::new(
            "images-importing",
            CONFIGMAP,
            "containerd imports images for cluster",
        )
        .after(Duration::from_millis(400)),
    );
}

#[test]
fn killed_while_a_scenario_creates_its_objects() {
    killed_at(Point::new("object-setup", CONFIGMAP, "apply step begins"));
}

#[test]
fn killed_with_a_node_fault_in_place() {
    // A busy mount in a pod's volume, held by a process of the pod.
    killed_at(
        Point::new("busy-mount", "08-busy-volume-mount.yaml", "fault in place")
            .after(Duration::from_secs(1)),
    );
}

#[test]
fn killed_with_a_frozen_cgroup_in_place() {
    // The pod's processes cannot die before their cgroup is thawed.
    killed_at(
        Point::new(
            "frozen-cgroup",
            "33-frozen-cgroup-pod.yaml",
            "fault in place",
        )
        .after(Duration::from_secs(1)),
    );
}

#[test]
fn killed_with_a_wedged_shim() {
    // The pod's shim SIGSTOPped: it answers nothing, a SIGTERM waits.
    killed_at(
        Point::new(
            "wedged-shim",
            "09-broken-runtime-container.yaml",
            "fault in place",
        )
        .after(Duration::from_secs(1)),
    );
}

#[test]
fn killed_with_a_cni_plugin_missing() {
    // Every network teardown of a pod fails: its veth stays on the bridge.
    killed_at(
        Point::new(
            "cni-plugin-missing",
            "43-cni-plugin-not-installed.yaml",
            "fault in place",
        )
        .after(Duration::from_secs(3)),
    );
}

#[test]
fn killed_then_gc_at_once_beside_its_reaper() {
    // Two teardowns of one cluster at once: the reaper's and gc's (the
    // owner is dead, so gc calls the cluster stale).
    killed_at(
        Point::new(
            "gc-beside-reaper",
            "08-busy-volume-mount.yaml",
            "fault in place",
        )
        .after(Duration::from_secs(1))
        .gc_at_once(),
    );
}

#[test]
fn killed_with_its_reaper() {
    // Run and reaper killed together, as a CI job's whole cgroup is: gc
    // alone stops the pods, unmounts, deletes the links and cgroups.
    killed_at(
        Point::new(
            "with-its-reaper",
            "08-busy-volume-mount.yaml",
            "fault in place",
        )
        .after(Duration::from_secs(1))
        .reaper_killed(),
    );
}

#[test]
fn killed_with_its_reaper_and_a_frozen_cgroup() {
    // gc alone thaws the frozen pod cgroup before it can kill its processes.
    killed_at(
        Point::new(
            "frozen-with-its-reaper",
            "33-frozen-cgroup-pod.yaml",
            "fault in place",
        )
        .after(Duration::from_secs(1))
        .reaper_killed(),
    );
}

#[test]
fn killed_while_the_doctor_applies() {
    killed_at(Point::new("doctor-apply", CONFIGMAP, "doctor apply begins"));
}

#[test]
fn killed_with_a_backend_container_up() {
    killed_at(
        Point::new(
            "backend-container",
            "37-webhook-backend-hangs.yaml",
            "backend container started",
        )
        .with_containers(),
    );
}

#[test]
fn killed_while_it_pushes_to_a_registry() {
    killed_at(
        Point::new(
            "registry-push",
            "44-registry-down.yaml",
            "registry push begins",
        )
        .with_containers(),
    );
}

#[test]
fn killed_while_it_writes_the_report() {
    killed_at(Point::new(
        "report-writing",
        CONFIGMAP,
        "writing the report of scenario",
    ));
}

#[test]
fn killed_while_it_tears_down() {
    // Into the teardown: the kubelet is being stopped.
    killed_at(
        Point::new("teardown", CONFIGMAP, "teardown of cluster").after(Duration::from_millis(500)),
    );
}

#[test]
fn a_path_is_named_only_whole() {
    let dir = "/var/lib/unstuck/clusters/run-x";
    assert!(names_path(
        "12 1 0:5 / /var/lib/unstuck/clusters/run-x/a rw",
        dir
    ));
    assert!(names_path(
        "lowerdir=/var/lib/unstuck/clusters/run-x:/b",
        dir
    ));
    assert!(names_path("/var/lib/unstuck/clusters/run-x", dir));
    assert!(!names_path("/var/lib/unstuck/clusters/run-x1/a", dir));
    assert!(!names_path("/var/lib/unstuck/clusters/run-x-2 rw", dir));
    assert!(!names_path("unstuck-kill-etcd-42", "run-x"));
}
