//! `unstuck run` as a user runs it, with isolation: a scenario that must
//! run alone (a node fault) gets a local cluster of its own beside the
//! shared one, and neither a finished nor an interrupted (Ctrl-C) run
//! leaves a cluster, process or directory of either behind.

use std::{
    path::Path,
    process::Child,
    sync::mpsc,
    time::{Duration, Instant},
};

use unstuck::cluster::local;

mod common;

/// A scenarios folder holding two of the built-in scenarios: one that
/// shares the cluster and one that injects a node fault.
fn two_scenarios(tag: &str) -> common::Scratch {
    common::scenarios_folder(
        &format!("iso-{tag}"),
        &[
            "01-orphan-finalizer-configmap.yaml",
            "08-busy-volume-mount.yaml",
        ],
    )
}

/// Reads stderr lines until one contains `needle` (or the run ends),
/// returning every line read.
fn read_until(rx: &mpsc::Receiver<String>, needle: &str, limit: Duration) -> Vec<String> {
    let deadline = Instant::now() + limit;
    let mut seen = Vec::new();
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        match rx.recv_timeout(left) {
            Ok(line) => {
                let hit = line.contains(needle);
                seen.push(line);
                if hit {
                    break;
                }
            }
            Err(_) => break,
        }
    }
    seen
}

/// The run's cluster name, from "bringing up local cluster 'run-xxxxxx'".
fn run_cluster(lines: &[String]) -> String {
    lines
        .iter()
        .find_map(|l| {
            l.split("bringing up local cluster '")
                .nth(1)
                .and_then(|rest| rest.split('\'').next())
        })
        .unwrap_or_else(|| panic!("no cluster named in {lines:?}"))
        .to_string()
}

fn wait_exit(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("unstuck run did not end within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Clusters of this run (the shared one and `<name>-<n>`) still known, and
/// processes whose command line names their directories.
fn left_behind(run: &str) -> Vec<String> {
    let mut left: Vec<String> = local::list()
        .into_iter()
        .filter(|c| c.name == run || c.name.starts_with(&format!("{run}-")))
        .map(|c| format!("cluster {} ({})", c.name, c.dir.display()))
        .collect();
    let dir = local::state::state_root().join(run);
    let marker = dir.to_string_lossy().into_owned();
    for p in unstuck::host::processes() {
        let cmd = p.command_line();
        if cmd.contains(&marker) {
            left.push(format!("process {} ({cmd})", p.pid));
        }
    }
    left
}

fn report(out: &Path) -> serde_json::Value {
    let dir = std::fs::read_dir(out)
        .expect("run folder")
        .flatten()
        .map(|e| e.path())
        .find(|p| p.join("report.json").exists())
        .expect("a report.json");
    serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap()
}

fn scenario<'a>(report: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    report["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("{name} not in the report"))
}

#[test]
fn a_node_fault_runs_on_a_cluster_of_its_own_and_nothing_is_left() {
    let scenarios = two_scenarios("pass");
    let out = scenarios.sibling("out");
    let (mut child, rx) = common::spawn_run(&scenarios, &out);
    let lines = read_until(&rx, "bringing up local cluster", Duration::from_secs(60));
    let run = run_cluster(&lines);
    let status = wait_exit(&mut child, Duration::from_secs(900));
    let left = left_behind(&run);
    let report = report(&out);
    // The run's folder goes with `out`: kept first when it failed.
    let failed = match status.success() {
        true => String::new(),
        false => common::run_failure(&out, "isolation-pass"),
    };
    assert!(status.success(), "unstuck run failed:\n{failed}");
    let node_case = scenario(&report, "busy-volume-mount");
    assert_eq!(node_case["outcome"]["result"], "passed");
    let own = node_case["isolated"]["name"].as_str().unwrap_or_default();
    assert!(
        own.starts_with(&format!("{run}-")),
        "the node fault ran on '{own}', not a cluster of its own beside '{run}'"
    );
    let shared_case = scenario(&report, "orphan-finalizer-configmap");
    assert_eq!(shared_case["outcome"]["result"], "passed");
    assert!(
        shared_case.get("isolated").is_none(),
        "the orphan finalizer case needs no cluster of its own: {shared_case:#}"
    );
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn ctrl_c_tears_down_the_shared_and_the_own_clusters() {
    let scenarios = two_scenarios("int");
    let out = scenarios.sibling("out");
    let (mut child, rx) = common::spawn_run(&scenarios, &out);
    let mut lines = read_until(&rx, "bringing up local cluster", Duration::from_secs(60));
    let run = run_cluster(&lines);
    // Interrupt once the scenario on its own cluster is under way: its
    // cluster booted and its first step started.
    let started = "start  busy-volume-mount (on a cluster of its own)";
    if !lines.iter().any(|l| l.contains(started)) {
        lines.extend(read_until(&rx, started, Duration::from_secs(300)));
    }
    let own_dir = local::state::state_root().join(format!("{run}-1"));
    let deadline = Instant::now() + Duration::from_secs(300);
    while !own_dir.join("logs/kubelet.log").exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(
        own_dir.exists(),
        "the node case's own cluster {} never appeared; saw {lines:?}",
        own_dir.display()
    );
    // SAFETY: kill(2) on our own child's pid.
    #[allow(unsafe_code)]
    let rc = unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    assert_eq!(rc, 0, "SIGINT to unstuck run");
    let status = wait_exit(&mut child, Duration::from_secs(600));
    let left = left_behind(&run);
    let report = report(&out);
    // The run's folder goes with `out`: kept first when something was
    // left, to tell why.
    let kept = match left.is_empty() {
        true => String::new(),
        false => format!(
            "\nthe run's folder is kept in {}",
            common::keep_evidence(&out, "isolation-ctrl-c").display()
        ),
    };
    assert!(!status.success(), "an interrupted run must not pass");
    assert!(left.is_empty(), "left behind after Ctrl-C: {left:?}{kept}");
    assert!(
        !own_dir.exists(),
        "{} is still there after Ctrl-C",
        own_dir.display()
    );
    let node_case = scenario(&report, "busy-volume-mount");
    // Stopped with the run: no verdict, and not a failure.
    let failed = match node_case["outcome"]["result"] == "interrupted" {
        true => String::new(),
        false => common::run_failure(&out, "isolation-ctrl-c"),
    };
    assert_eq!(
        node_case["outcome"]["result"], "interrupted",
        "{failed}\n{node_case:#}"
    );
}

/// Four `unstuck run --filter` started together (issue 30), each on one
/// small scenario with a `--out` of its own: each brings up a cluster of
/// its own, passes, and its report names its own cluster and no other
/// run's; afterwards nothing of any of the four is left.
#[test]
fn four_runs_side_by_side_each_keep_to_their_own_cluster() {
    let picks = [
        "orphan-finalizer-configmap",
        "namespace-metadata-finalizer",
        "namespace-spec-finalizer",
        "uninstalled-crd-controller",
    ];
    let root = common::repo_root();
    let (scenarios, fixtures) = (root.join("scenarios"), root.join("fixtures"));
    let started = Instant::now();
    let runs: Vec<(&str, common::Scratch, Child, mpsc::Receiver<String>)> = picks
        .iter()
        .map(|pick| {
            let out = common::Scratch::path(&format!("unstuck-side-by-side-{pick}"));
            let (child, rx) = common::spawn_unstuck(
                &[
                    "run",
                    "--scenarios",
                    scenarios.to_str().expect("a UTF-8 path"),
                    "--fixtures",
                    fixtures.to_str().expect("a UTF-8 path"),
                    "--filter",
                    pick,
                    "--out",
                    out.to_str().expect("a UTF-8 path"),
                ],
                &[],
            );
            (*pick, out, child, rx)
        })
        .collect();
    let mut ended = Vec::new();
    for (pick, out, mut child, rx) in runs {
        let lines = read_until(&rx, "bringing up local cluster", Duration::from_secs(120));
        let run = run_cluster(&lines);
        let status = wait_exit(&mut child, Duration::from_secs(900));
        ended.push((pick, out, run, status));
    }
    eprintln!(
        "four runs ended after {:.0} s",
        started.elapsed().as_secs_f64()
    );
    let names: Vec<&str> = ended.iter().map(|(_, _, run, _)| run.as_str()).collect();
    for (i, name) in names.iter().enumerate() {
        assert!(
            !names[i + 1..].contains(name),
            "two runs shared cluster {name}: {names:?}"
        );
    }
    for (pick, out, run, status) in &ended {
        let report = report(out);
        // The run's folder goes with `out`: kept first when it failed.
        let failed = match status.success() {
            true => String::new(),
            false => common::run_failure(out, &format!("side-by-side-{pick}")),
        };
        assert!(
            status.success(),
            "unstuck run --filter {pick} beside three others failed:\n{failed}"
        );
        let cluster = report["cluster"].as_str().unwrap_or_default();
        assert!(
            cluster.contains(&format!("'{run}'")),
            "the report of {pick} names cluster '{cluster}', not its own '{run}'"
        );
        let text = report.to_string();
        for other in names.iter().filter(|n| *n != run) {
            assert!(
                !text.contains(*other),
                "the report of {pick} ({run}) names {other}, another run's cluster"
            );
        }
        let ran: Vec<&str> = report["scenarios"]
            .as_array()
            .expect("a scenarios list")
            .iter()
            .filter_map(|s| s["name"].as_str())
            .collect();
        assert_eq!(ran, vec![*pick], "--filter {pick} ran only it");
        assert_eq!(scenario(&report, pick)["outcome"]["result"], "passed");
        eprintln!("{pick}: passed on {cluster}");
    }
    let left: Vec<String> = ended
        .iter()
        .flat_map(|(_, _, run, _)| {
            let dir = local::state::state_root().join(run);
            let mut left = left_behind(run);
            if dir.exists() {
                left.push(format!("directory {}", dir.display()));
            }
            left
        })
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}
