//! Per Kubernetes version: the cold build time ci/setup.sh recorded when
//! it built the version, boot to node Ready, and the whole suite's wall
//! time (`unstuck run --k8s-version V`). Versions not built are named with
//! the command that builds them. Figures only.

use std::time::Instant;

use unstuck::{
    cluster::local::LocalCluster,
    components::{self, SUPPORTED_K8S_VERSIONS},
};

pub async fn run() {
    let root = super::repo_root();
    let cache = components::cache_dir();
    println!(
        "per Kubernetes version (cold build as recorded by ci/setup.sh; boot and suite measured now):"
    );
    println!(
        "  {:<9} {:>11} {:>13} {:>11} {:>8}",
        "version", "cold build", "node Ready", "suite", "result"
    );
    // UNSTUCK_BENCH_VERSIONS=v1.37.2,... limits the run to those versions.
    let only: Option<Vec<String>> = std::env::var("UNSTUCK_BENCH_VERSIONS")
        .ok()
        .map(|v| v.split(',').map(|s| s.trim().to_string()).collect());
    for &version in SUPPORTED_K8S_VERSIONS {
        if only
            .as_ref()
            .is_some_and(|o| !o.iter().any(|v| v == version))
        {
            continue;
        }
        if components::locate(version).is_err() {
            println!("  {version:<9} not built (sudo ci/setup.sh --k8s-version {version})");
            continue;
        }
        let build = std::fs::read_to_string(cache.join("k8s").join(version).join("build-seconds"))
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .map_or("-".into(), |s| format!("{s} s"));
        let mut up = super::owned(&format!(
            "bench-v{}",
            version.replace('.', "-").trim_start_matches('v')
        ));
        up.k8s_version = version.to_string();
        let t = Instant::now();
        let boot = match LocalCluster::up(up).await {
            Ok(c) => {
                let ready = t.elapsed();
                c.down().await;
                format!("{:.1} s", ready.as_secs_f64())
            }
            Err(e) => format!("failed: {e}"),
        };
        let (wall, report, _) = super::suite::unstuck_run(
            &root,
            &root.join("scenarios"),
            &["--k8s-version", version],
            version,
        )
        .await;
        let result = report.map_or("no report".into(), |r| {
            format!("{}/{}", r.passed(), r.scenarios.len())
        });
        println!(
            "  {version:<9} {build:>11} {boot:>13} {:>9.1} s {result:>8}",
            wall.as_secs_f64()
        );
    }
}
