//! Ctrl-C while a cluster boots stops the boot where it stands and deletes
//! what it had made, instead of waiting for the node to be Ready first;
//! and while it waits, the boot says what for (a plain line every
//! `UNSTUCK_PROGRESS_EVERY` seconds, as a CI log gets it). On real local
//! clusters: `unstuck cluster up`, and `unstuck run`, whose report then
//! holds the scenario as interrupted, not failed. Needs root and the
//! components (ci/setup.sh); never skipped.

use std::{
    ffi::OsStr,
    path::Path,
    sync::mpsc::Receiver,
    time::{Duration, Instant},
};

use unstuck::cluster::local::state::state_root;

mod common;

/// Every line left on `rx` until both pipes close.
fn drain(rx: &Receiver<String>) -> Vec<String> {
    let mut lines = Vec::new();
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(120) {
        match rx.recv_timeout(Duration::from_secs(1)) {
            Ok(l) => lines.push(l),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    lines
}

/// Waits for a line with `needle` and returns it, keeping the lines before.
fn line_with(rx: &Receiver<String>, needle: &str, seen: &mut Vec<String>) -> String {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(240) {
        if let Ok(l) = rx.recv_timeout(Duration::from_secs(1)) {
            seen.push(l.clone());
            if l.contains(needle) {
                return l;
            }
        }
    }
    panic!(
        "no line with {needle:?}; lines so far:\n{}",
        seen.join("\n")
    );
}

/// Processes whose command line names `dir` (a cluster's components and
/// reaper all do).
fn processes_naming(dir: &Path) -> Vec<String> {
    let dir = dir.display().to_string();
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            cmdline
                .contains(&dir)
                .then(|| format!("process {pid}: {}", cmdline.trim()))
        })
        .collect()
}

/// Ctrl-C to `child`, as a terminal sends it: its exit status, and every
/// line it printed (`seen` so far, then the rest until its pipes close).
fn interrupt(
    mut child: std::process::Child,
    rx: &Receiver<String>,
    mut seen: Vec<String>,
) -> (std::process::ExitStatus, String) {
    // SAFETY: kill(2) with a pid this test started.
    #[allow(unsafe_code)]
    let rc = unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    assert_eq!(rc, 0, "SIGINT to unstuck");
    let status = child.wait().expect("unstuck ends");
    seen.extend(drain(rx));
    (status, seen.join("\n"))
}

/// A plain progress line every second, and the boot's step lines.
fn progress_env() -> Vec<(&'static str, &'static OsStr)> {
    [PROGRESS, STEPS]
        .iter()
        .map(|(k, v)| (*k, OsStr::new(*v)))
        .collect()
}

/// Nothing of cluster `name` is left: no record, no process.
fn nothing_left_of(name: &str) {
    let dir = state_root().join(name);
    assert!(
        !dir.exists(),
        "the cluster's directory {} is left",
        dir.display()
    );
    let procs = processes_naming(&dir);
    assert!(procs.is_empty(), "processes left: {procs:#?}");
    let list = common::unstuck(&["cluster", "list"]);
    let list = String::from_utf8_lossy(&list.stdout);
    assert!(
        !list.lines().any(|l| l.starts_with(&format!("{name}\t"))),
        "`cluster list` still shows {name}:\n{list}"
    );
}

const PROGRESS: (&str, &str) = ("UNSTUCK_PROGRESS_EVERY", "1");
const STEPS: (&str, &str) = ("UNSTUCK_LOG", "info,unstuck::step=debug");

#[test]
fn ctrl_c_while_cluster_up_boots_deletes_the_cluster_at_once() {
    let name = common::cluster_name("intr-up");
    let env = progress_env();
    let (child, rx) = common::spawn_unstuck(&["cluster", "up", &name], &env);
    let mut seen = Vec::new();
    // Past the control plane's start, so there is something to delete.
    line_with(&rx, "kube-apiserver answers for cluster", &mut seen);
    // The boot says what it waits for, and the bound.
    let waiting = line_with(&rx, "still waiting for", &mut seen);
    assert!(waiting.contains("of at most"), "{waiting}");
    let (status, text) = interrupt(child, &rx, seen);
    assert_eq!(status.code(), Some(130), "{text}");
    assert!(
        text.contains(&format!(
            "interrupted while local cluster '{name}' was starting; deleted it"
        )),
        "{text}"
    );
    assert!(
        !text.contains(&format!("cluster '{name}' is up")),
        "it went on to Ready: {text}"
    );
    assert!(!text.contains("LEFT OR FAILED"), "{text}");
    nothing_left_of(&name);
}

#[test]
fn ctrl_c_while_a_run_boots_reports_its_scenario_interrupted() {
    let out = common::Scratch::path("unstuck-intr-run");
    let out_arg = out.display().to_string();
    let env = progress_env();
    let root = common::repo_root();
    let scenarios = root.join("scenarios").display().to_string();
    let fixtures = root.join("fixtures").display().to_string();
    let (child, rx) = common::spawn_unstuck(
        &[
            "run",
            "--scenarios",
            &scenarios,
            "--fixtures",
            &fixtures,
            "--filter",
            "orphan-finalizer-configmap",
            "--out",
            &out_arg,
        ],
        &env,
    );
    let mut seen = Vec::new();
    let boot = line_with(&rx, "bringing up local cluster", &mut seen);
    let name = boot
        .split('\'')
        .nth(1)
        .unwrap_or_else(|| panic!("a cluster name in {boot:?}"))
        .to_owned();
    line_with(&rx, "kube-apiserver answers for cluster", &mut seen);
    let (status, text) = interrupt(child, &rx, seen);
    // Interrupted is no pass, and no failure of the scenario either.
    assert_eq!(status.code(), Some(1), "{text}");
    assert!(
        text.contains("interrupted while the local cluster was starting; deleted it"),
        "{text}"
    );
    assert!(
        !text.contains("node Ready in"),
        "it went on to Ready: {text}"
    );
    let junit = std::fs::read_dir(&out)
        .expect("the run's folder")
        .flatten()
        .map(|e| e.path().join("junit.xml"))
        .find(|p| p.exists())
        .unwrap_or_else(|| panic!("no junit.xml under {}: {text}", out_arg));
    let junit = std::fs::read_to_string(&junit).expect("junit.xml");
    assert!(junit.contains("<skipped"), "{junit}");
    assert!(junit.contains("failures=\"0\""), "{junit}");
    assert!(
        junit.contains("while its local cluster was starting"),
        "{junit}"
    );
    nothing_left_of(&name);
}
