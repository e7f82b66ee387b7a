//! Measured figures, not assertions: set-up time, local cluster up and
//! down, per-case time-to-detect and time-to-recover, and the doctor's full
//! scan against the seed's kubectl pipeline on a populated cluster, as a
//! ratio measured in the same run. Run with `ci/bench.sh` (as root).

use std::{
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::{Api, api::PostParams};
use unstuck::{
    cluster::local::{LocalCluster, UpOptions},
    components,
    doctor::collect,
    exec::Cmd,
    runner::suite::{SuiteOptions, run_suite},
};

const UP_DOWN_ROUNDS: usize = 3;
const NAMESPACES: usize = 50;
const OBJECTS_PER_NAMESPACE: usize = 40;
const SCAN_ROUNDS: usize = 5;

mod incidents;
mod kind;
mod owners;
mod scale;
mod suite;
mod versions;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("repository root")
}

fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn owned(name: &str) -> UpOptions {
    let mut o = UpOptions::new(name);
    o.reaper = Some(env!("CARGO_BIN_EXE_unstuck").into());
    o
}

/// Sections to run: `UNSTUCK_BENCH_SECTIONS=basic,suite,incidents,owners,versions,scale,kind` (default all).
fn wanted(section: &str) -> bool {
    std::env::var("UNSTUCK_BENCH_SECTIONS")
        .map(|v| v.split(',').any(|s| s.trim() == section))
        .unwrap_or(true)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    if wanted("basic") {
        basic().await;
    }
    if wanted("suite") {
        suite::run().await;
    }
    if wanted("incidents") {
        incidents::run().await;
    }
    if wanted("owners") {
        owners::run().await;
    }
    if wanted("versions") {
        versions::run().await;
    }
    if wanted("scale") {
        scale::run().await;
    }
    if wanted("kind") {
        kind::run().await;
    }
}

async fn basic() {
    let root = repo_root();
    let version = components::DEFAULT_K8S_VERSION;
    println!(
        "unstuck benchmark (Kubernetes {version}, {} cores)",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    setup_times(&root, version).await;
    up_down_times().await;

    let cluster = LocalCluster::up(owned("bench-main"))
        .await
        .expect("cluster up");
    let client = cluster.client();
    per_case_times(&root, &cluster, version).await;
    let nss = populate(&client).await;
    let scan = doctor_scan_time(&client).await;
    seed_pipeline_times(&cluster, &nss, scan).await;

    let report = cluster.down().await;
    println!("bench cluster down: {report}");
}

/// Set-up: cold as recorded by ci/setup.sh when it built this cache, warm
/// measured now.
async fn setup_times(root: &Path, version: &str) {
    let cache = components::cache_dir();
    let read = |p: PathBuf| {
        std::fs::read_to_string(p)
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
    };
    let k8s_cold = read(cache.join("k8s").join(version).join("build-seconds"));
    let etcd_cold = read(
        cache
            .join("etcd")
            .join(components::DEFAULT_ETCD_VERSION)
            .join("build-seconds"),
    );
    match (k8s_cold, etcd_cold) {
        (Some(k), Some(e)) => println!(
            "set-up, cold (recorded when this cache was built): Kubernetes {k} s + etcd {e} s = {} s",
            k + e
        ),
        _ => println!("set-up, cold: not recorded (cache built by an older ci/setup.sh)"),
    }
    let t = Instant::now();
    let warm = Cmd::new("bash")
        .arg(root.join("ci/setup.sh"))
        .timeout(Duration::from_secs(3600))
        .run_raw()
        .await
        .expect("ci/setup.sh runs");
    assert!(
        warm.status.success(),
        "ci/setup.sh failed: {}",
        String::from_utf8_lossy(&warm.stderr)
    );
    let warm_setup = t.elapsed();
    println!("set-up, warm: {}", secs(warm_setup));
    if let (Some(k), Some(e)) = (k8s_cold, etcd_cold) {
        println!(
            "  warm/cold ratio: 1/{:.0}",
            (k + e) as f64 / warm_setup.as_secs_f64()
        );
    }
}

/// Cluster up to node Ready, and down.
async fn up_down_times() {
    let (mut ups, mut downs) = (Vec::new(), Vec::new());
    for i in 0..UP_DOWN_ROUNDS {
        let t = Instant::now();
        let c = LocalCluster::up(owned(&format!("bench-updown-{i}")))
            .await
            .expect("cluster up");
        ups.push(t.elapsed());
        let t = Instant::now();
        let report = c.down().await;
        downs.push(t.elapsed());
        assert!(report.errors.is_empty(), "{report}");
    }
    println!(
        "cluster up to node Ready: median {} over {UP_DOWN_ROUNDS} ({:?})",
        secs(median(ups.clone())),
        ups.iter().map(|d| secs(*d)).collect::<Vec<_>>()
    );
    println!(
        "cluster down: median {} over {UP_DOWN_ROUNDS}",
        secs(median(downs))
    );
}

/// Per case: time to detect and to recover, from one suite run.
async fn per_case_times(root: &Path, cluster: &LocalCluster, version: &str) {
    let scenarios =
        unstuck::core::scenario::load_dir(&root.join("scenarios")).expect("scenarios load");
    let out = std::env::temp_dir().join(format!("unstuck-bench-{}", std::process::id()));
    let opts = SuiteOptions {
        client: cluster.client(),
        fixtures_dir: root.join("fixtures"),
        out_dir: out.clone(),
        node: Some(std::sync::Arc::new(unstuck::cluster::local::LocalNode::of(
            cluster,
        ))),
        parallelism: 1,
        // One at a time on one cluster: each case's own figures, undisturbed.
        own_clusters: None,
        cluster: "bench-main".into(),
        k8s_version: version.into(),
        provider: Default::default(),
        shard: None,
        cluster_exits: cluster.component_exits(),
        journal: None,
    };
    let (_keep, never) = tokio::sync::watch::channel(false);
    let report = run_suite(&opts, scenarios, never).await;
    println!(
        "per case (sequential, detect = doctor's diagnosis, recover = doctor start to recovered gate):"
    );
    for s in &report.scenarios {
        println!(
            "  {:<32} {}  detect {:>8}  recover {:>8}",
            s.name(),
            if s.passed() { "pass" } else { "FAIL" },
            s.time_to_detect_ms
                .map_or("-".into(), |ms| format!("{ms} ms")),
            s.time_to_recover_ms
                .map_or("-".into(), |ms| format!("{ms} ms")),
        );
    }
    let _ = std::fs::remove_dir_all(&out);
}

/// Populate: 50 namespaces x 40 objects, for the scans to read. Returns
/// the namespaces.
async fn populate(client: &kube::Client) -> Vec<String> {
    let t = Instant::now();
    let nss: Vec<String> = (0..NAMESPACES).map(|i| format!("bench-{i:02}")).collect();
    for ns in &nss {
        let obj: Namespace = serde_json::from_value(serde_json::json!({"metadata": {"name": ns}}))
            .expect("namespace");
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &obj)
            .await
            .expect("create namespace");
    }
    let creates = nss
        .iter()
        .flat_map(|ns| (0..OBJECTS_PER_NAMESPACE).map(move |j| (ns.clone(), j)));
    stream::iter(creates)
        .for_each_concurrent(32, |(ns, j)| {
            let client = client.clone();
            async move {
                let cm: ConfigMap = serde_json::from_value(serde_json::json!({"metadata": {"name": format!("cm-{j:02}")}, "data": {"k": "v"}})).expect("cm");
                Api::<ConfigMap>::namespaced(client, &ns).create(&PostParams::default(), &cm).await.expect("create configmap");
            }
        })
        .await;
    println!(
        "populated {NAMESPACES} namespaces x {OBJECTS_PER_NAMESPACE} objects in {}",
        secs(t.elapsed())
    );
    nss
}

/// The doctor's full scan: discovery + metadata-only LIST of every type,
/// cluster-wide. Returns the median.
async fn doctor_scan_time(client: &kube::Client) -> Duration {
    let mut scans = Vec::new();
    let mut seen = 0;
    for _ in 0..SCAN_ROUNDS {
        let (_, stats) = collect::collect(client).await.expect("collect");
        seen = stats.objects_seen;
        scans.push(stats.duration);
    }
    let scan = median(scans);
    println!(
        "doctor full scan (whole cluster, {seen} objects): median {} over {SCAN_ROUNDS}",
        secs(scan)
    );
    scan
}

/// The seed's pipeline, per namespace, as a person runs it, and its ratio
/// to the doctor's `scan`.
async fn seed_pipeline_times(cluster: &LocalCluster, nss: &[String], scan: Duration) {
    let kubectl = cluster.binaries().kubectl();
    let pipeline = |ns: &str| {
        format!(
            "{k} api-resources --verbs=list --namespaced -o name | xargs -n 1 {k} get --show-kind --ignore-not-found -n {ns} >/dev/null",
            k = kubectl.display()
        )
    };
    let t = Instant::now();
    Cmd::new("sh")
        .args(["-c", &pipeline(&nss[0])])
        .env("KUBECONFIG", cluster.kubeconfig())
        .timeout(Duration::from_secs(600))
        .output()
        .await
        .expect("pipeline runs");
    let one_ns = t.elapsed();
    println!("seed pipeline, one namespace: {}", secs(one_ns));
    let t = Instant::now();
    let all: String = nss
        .iter()
        .map(|ns| pipeline(ns))
        .collect::<Vec<_>>()
        .join("; ");
    Cmd::new("sh")
        .args(["-c", &all])
        .env("KUBECONFIG", cluster.kubeconfig())
        .timeout(Duration::from_secs(3600))
        .output()
        .await
        .expect("pipeline runs");
    let every_ns = t.elapsed();
    println!(
        "seed pipeline, all {NAMESPACES} namespaces: {}",
        secs(every_ns)
    );
    println!(
        "ratio: doctor full-cluster scan is {:.0}x faster than the pipeline over every namespace ({:.1}x faster than the pipeline over a single namespace)",
        every_ns.as_secs_f64() / scan.as_secs_f64(),
        one_ns.as_secs_f64() / scan.as_secs_f64()
    );
}
