//! The suite as CI pays for it: `unstuck run` end to end (boot, every
//! scenario, teardown) for the whole suite and for the five core cases,
//! and how much the isolation buys: the sum of the scenarios' own times
//! over the wall time (the parallel speed-up). Goals (issue 11): whole
//! suite ≤ 3 min, core cases ≤ 60 s. Figures only, no assertion on them.

use std::{
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use unstuck::{
    core::scenario::load_dir,
    exec::Cmd,
    report::{RunReport, merge},
};

pub async fn run() {
    let root = super::repo_root();
    let scenarios = root.join("scenarios");
    let all = load_dir(&scenarios).expect("scenarios load");
    // The failure catalog's five cases, each by its first scenario.
    let mut core: Vec<PathBuf> = Vec::new();
    for case in 1..=5 {
        if let Some(s) = all.iter().find(|s| s.catalog_case == Some(case)) {
            core.push(s.path().to_path_buf());
        }
    }
    let core_dir = std::env::temp_dir().join(format!("unstuck-bench-core-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&core_dir);
    std::fs::create_dir_all(&core_dir).expect("temp dir");
    for f in &core {
        std::os::unix::fs::symlink(f, core_dir.join(f.file_name().expect("file name")))
            .expect("symlink");
    }
    println!("the suite end to end (`unstuck run`: boot, scenarios, teardown):");
    let whole = suite(&root, &scenarios, "whole").await;
    let five = suite(&root, &core_dir, "core").await;
    let _ = std::fs::remove_dir_all(&core_dir);
    for (what, n, r) in [
        ("whole suite", all.len(), whole),
        ("five core cases", core.len(), five),
    ] {
        match r {
            Some(r) => println!(
                "  {what:<16} {n:>2} scenarios: wall {:>7.1} s ({} passed, {} failed); sum of scenario times {:.1} s; speed-up {:.1}x",
                r.wall.as_secs_f64(),
                r.passed,
                r.failed,
                r.sum.as_secs_f64(),
                r.sum.as_secs_f64() / r.wall.as_secs_f64()
            ),
            None => println!("  {what}: the run wrote no report"),
        }
    }
}

struct SuiteRun {
    wall: Duration,
    sum: Duration,
    passed: usize,
    failed: usize,
}

/// `unstuck run` of the scenarios in `scenarios` (plus `extra` arguments),
/// end to end: its wall time, the report it wrote (if any) and how it
/// exited.
pub async fn unstuck_run(
    root: &Path,
    scenarios: &Path,
    extra: &[&str],
    label: &str,
) -> (Duration, Option<RunReport>, String) {
    let out = std::env::temp_dir().join(format!("unstuck-bench-{label}-{}", std::process::id()));
    let t = Instant::now();
    let run = Cmd::new(env!("CARGO_BIN_EXE_unstuck"))
        .arg("run")
        .args(extra.iter().copied())
        .arg("--scenarios")
        .arg(scenarios.as_os_str())
        .arg("--fixtures")
        .arg(root.join("fixtures").as_os_str())
        .arg("--out")
        .arg(out.as_os_str())
        .timeout(Duration::from_secs(1800))
        .run_raw()
        .await;
    let wall = t.elapsed();
    let report = std::fs::read_dir(&out)
        .ok()
        .and_then(|d| {
            d.flatten()
                .map(|e| e.path())
                .find(|p| p.join("report.json").exists())
        })
        .and_then(|p| merge::load(&p).ok());
    let _ = std::fs::remove_dir_all(&out);
    let exit = match run {
        Ok(o) => o.status.to_string(),
        Err(e) => format!("did not run: {e}"),
    };
    (wall, report, exit)
}

async fn suite(root: &Path, scenarios: &Path, label: &str) -> Option<SuiteRun> {
    let (wall, report, exit) = unstuck_run(root, scenarios, &[], label).await;
    let report = report?;
    if !exit.contains("exit status: 0") {
        println!("  ({label}: unstuck run {exit})");
    }
    Some(SuiteRun {
        wall,
        sum: report
            .scenarios
            .iter()
            .map(|s| Duration::from_millis(s.duration_ms as u64))
            .sum(),
        passed: report.passed(),
        failed: report.failed(),
    })
}
