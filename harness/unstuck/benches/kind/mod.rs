//! The kind provider beside the local one, measured in one run: create to
//! node Ready of each (median of a few rounds) and their ratio, delete
//! times, the offline node image's build time (as ci/kind/setup.sh last
//! recorded it, a forced rebuild now, and a warm set-up now), and the five
//! core cases end to end on each provider. Figures only.

use std::time::{Duration, Instant};

use unstuck::{
    cluster::{
        kind::{self, KindCluster, KindOptions},
        local::LocalCluster,
    },
    components::{self, DEFAULT_K8S_VERSION},
    exec::Cmd,
};

const ROUNDS: usize = 3;
const CORE_CASES: &str = "orphan-finalizer-configmap,uninstalled-crd-controller,dead-metrics-apiservice,busy-volume-mount,broken-runtime-container";

pub async fn run() {
    let root = super::repo_root();
    let version = DEFAULT_K8S_VERSION;
    println!("kind provider beside the local one (Kubernetes {version}):");
    image_build_times(&root, version).await;
    up_down_times(version).await;
    core_case_times(&root).await;
    println!("  node image: {}", kind::node_image(version));
}

/// The image build as ci/kind/setup.sh last recorded it (cold when the
/// rootfs was not cached yet), a forced rebuild now (rootfs and Go tools
/// cached) and a warm set-up now (nothing to do).
async fn image_build_times(root: &std::path::Path, version: &str) {
    let info = std::fs::read_to_string(
        components::cache_dir()
            .join("kind")
            .join(format!("node-{version}/build-info")),
    )
    .unwrap_or_default();
    let field = |k: &str| {
        info.lines()
            .find_map(|l| l.strip_prefix(&format!("{k}=")))
            .unwrap_or("-")
            .to_string()
    };
    println!(
        "  node image build as recorded: {} s (rootfs cached: {}, Go tools {} s)",
        field("image_seconds"),
        field("rootfs_cached"),
        field("go_tools_seconds")
    );
    for (what, script, extra) in [
        (
            "rebuild (--force; rootfs, Go tools cached)",
            "ci/kind/build-node-image.sh",
            "--force",
        ),
        ("set-up again, everything cached", "ci/kind/setup.sh", ""),
    ] {
        let t = Instant::now();
        let r = Cmd::new("bash")
            .arg(root.join(script))
            .args(["--k8s-version", version])
            .args((!extra.is_empty()).then_some(extra))
            .timeout(Duration::from_secs(3600))
            .output()
            .await;
        println!(
            "  node image {what}: {}{}",
            super::secs(t.elapsed()),
            match r {
                Ok(_) => String::new(),
                Err(e) => format!(" FAILED: {e}"),
            }
        );
    }
}

/// Create to node Ready and delete, local and kind, round by round.
async fn up_down_times(version: &str) {
    let (mut local_up, mut kind_up, mut local_down, mut kind_down) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        let t = Instant::now();
        let c = LocalCluster::up(super::owned(&format!("bench-local-{round}")))
            .await
            .expect("local cluster up");
        local_up.push(t.elapsed());
        let t = Instant::now();
        c.down().await;
        local_down.push(t.elapsed());

        let mut opts = KindOptions::new(format!("bench-kind-{round}"), version);
        opts.reaper = Some(env!("CARGO_BIN_EXE_unstuck").into());
        let t = Instant::now();
        let c = KindCluster::up(opts).await.expect("kind cluster up");
        kind_up.push(t.elapsed());
        let t = Instant::now();
        let problems = c.down().await;
        kind_down.push(t.elapsed());
        assert!(problems.is_empty(), "kind delete: {problems:?}");
    }
    let (l, k) = (
        super::median(local_up.clone()),
        super::median(kind_up.clone()),
    );
    println!(
        "  create to node Ready: local {} , kind {} (median of {ROUNDS}; kind/local = {:.1}x)",
        super::secs(l),
        super::secs(k),
        k.as_secs_f64() / l.as_secs_f64()
    );
    println!(
        "    rounds: local {:?}, kind {:?}",
        local_up.iter().map(|d| super::secs(*d)).collect::<Vec<_>>(),
        kind_up.iter().map(|d| super::secs(*d)).collect::<Vec<_>>()
    );
    println!(
        "  delete: local {}, kind {} (median of {ROUNDS})",
        super::secs(super::median(local_down)),
        super::secs(super::median(kind_down))
    );
}

/// The five core cases end to end (boot, run, teardown) on each provider.
async fn core_case_times(root: &std::path::Path) {
    let mut walls = Vec::new();
    for provider in ["local", "kind"] {
        let dir = tempdir_with_core_cases(root);
        let (wall, report, exit) = super::suite::unstuck_run(
            root,
            &dir,
            &["--provider", provider],
            &format!("kind-bench-{provider}"),
        )
        .await;
        let _ = std::fs::remove_dir_all(&dir);
        let (passed, failed) = report.map_or((0, 0), |r| (r.passed(), r.failed()));
        println!(
            "  five core cases on {provider}: {} wall, {passed} passed, {failed} failed ({exit})",
            super::secs(wall)
        );
        walls.push(wall);
    }
    println!(
        "  five core cases kind/local = {:.1}x",
        walls[1].as_secs_f64() / walls[0].as_secs_f64()
    );
}

/// A scenarios directory holding only the five core cases' files.
fn tempdir_with_core_cases(root: &std::path::Path) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("unstuck-bench-core-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scenario dir");
    for entry in std::fs::read_dir(root.join("scenarios"))
        .expect("scenarios")
        .flatten()
    {
        let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
        let is_core = CORE_CASES
            .split(',')
            .any(|c| text.lines().any(|l| l.trim() == format!("name: {c}")));
        if is_core {
            std::fs::copy(entry.path(), dir.join(entry.file_name())).expect("copy scenario");
        }
    }
    dir
}
