//! The public incidents (issue 12): every scenario that names an
//! `incident:` run end to end with `unstuck run`, and what the doctor did
//! about them: how many it recovered, how many it refused by design (no
//! recovered gate: the scenario asserts the refusal), and how many unsafe
//! remedies it took (goal 0). Figures only, no assertion on them.
//!
//! Unsafe, as the incident corpus lists the workarounds that did harm: a
//! force delete of a pod (grace 0, the node left dirty), a lazy unmount
//! (hides a busy filesystem), or removing a finalizer Kubernetes itself
//! serves (`customresourcecleanup`, `job-tracking`, `foregroundDeletion`,
//! the protection keys, `kubernetes`), whose controller is alive.

use unstuck::core::scenario::load_dir;

/// Finalizers whose controller is Kubernetes' own.
const BUILT_IN_KEYS: [&str; 6] = [
    "customresourcecleanup.apiextensions.k8s.io",
    "batch.kubernetes.io/job-tracking",
    "foregroundDeletion",
    "kubernetes.io/pvc-protection",
    "kubernetes.io/pv-protection",
    "\"kubernetes\"",
];

/// Whether a remedy line (`Name detail`) is one of the unsafe workarounds.
fn unsafe_remedy(line: &str) -> bool {
    line.starts_with("ForceDelete")
        || line.starts_with("LazyUnmount")
        || (line.starts_with("RemoveFinalizers")
            && line
                .split_once("removed ")
                .is_some_and(|(_, removed)| BUILT_IN_KEYS.iter().any(|k| removed.contains(k))))
}

pub async fn run() {
    let root = super::repo_root();
    let all = load_dir(&root.join("scenarios")).expect("scenarios load");
    let incidents: Vec<_> = all.iter().filter(|s| s.incident.is_some()).collect();
    let dir = std::env::temp_dir().join(format!("unstuck-bench-incidents-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    for s in &incidents {
        let f = s.path();
        std::os::unix::fs::symlink(f, dir.join(f.file_name().expect("file name")))
            .expect("symlink");
    }
    let (wall, report, exit) = super::suite::unstuck_run(&root, &dir, &[], "incidents").await;
    let _ = std::fs::remove_dir_all(&dir);
    let Some(report) = report else {
        println!("public incidents: the run wrote no report ({exit})");
        return;
    };
    println!(
        "public incidents ({} scenarios, `unstuck run` end to end in {:.1} s):",
        report.scenarios.len(),
        wall.as_secs_f64()
    );
    let (mut recovered, mut refused, mut failed, mut unsafe_taken) = (0, 0, 0, 0);
    let mut recover_ms = Vec::new();
    for s in &report.scenarios {
        let unsafe_here: Vec<&String> = s.remedies.iter().filter(|r| unsafe_remedy(r)).collect();
        unsafe_taken += unsafe_here.len();
        let verdict = match (s.passed(), s.time_to_recover_ms) {
            (false, _) => {
                failed += 1;
                "FAILED".to_string()
            }
            (true, Some(ms)) => {
                recovered += 1;
                recover_ms.push(ms);
                format!("recovered in {:.1} s", ms as f64 / 1000.0)
            }
            (true, None) => {
                refused += 1;
                "refused, as the scenario requires".to_string()
            }
        };
        println!(
            "  {:<42} {:<28} {verdict}{}",
            s.name(),
            s.scenario.incident.as_deref().unwrap_or("-"),
            if unsafe_here.is_empty() {
                String::new()
            } else {
                format!("; UNSAFE: {unsafe_here:?}")
            }
        );
    }
    let with_remedy = recovered + failed;
    println!(
        "  recovery rate {recovered}/{with_remedy} where a safe remedy exists ({:.0} %), {refused} justified refusal(s), {failed} failed; unsafe remedies taken: {unsafe_taken}",
        if with_remedy == 0 {
            0.0
        } else {
            100.0 * recovered as f64 / with_remedy as f64
        }
    );
    if !recover_ms.is_empty() {
        recover_ms.sort();
        println!(
            "  time to recover (doctor step to recovered gate): median {:.1} s, max {:.1} s",
            recover_ms[recover_ms.len() / 2] as f64 / 1000.0,
            *recover_ms.last().unwrap_or(&0) as f64 / 1000.0
        );
    }
}
