//! The doctor at scale: scan time and peak RSS of `unstuck doctor` (its own
//! process, so the figure is the doctor's alone) at 20k and 100k objects,
//! whole cluster and one namespace. Goals (issue 8): 100k objects in
//! ≤ 2 s and ≤ 64 MiB; one namespace ≤ 0.1 s whatever the cluster size.
//! Figures only, no assertion on them.
#![allow(unsafe_code)] // wait4: the kernel's peak RSS of the doctor's process.

use std::{path::Path, process::Command, time::Instant};

use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::{Api, Client, api::PostParams};
use unstuck::cluster::local::LocalCluster;

const NAMESPACES: usize = 100;
const ROUNDS: usize = 3;

pub async fn run() {
    let cluster = LocalCluster::up(super::owned("bench-scale"))
        .await
        .expect("cluster up");
    let client = cluster.client();
    let nss: Vec<String> = (0..NAMESPACES).map(|i| format!("scale-{i:03}")).collect();
    for ns in &nss {
        let obj: Namespace = serde_json::from_value(serde_json::json!({"metadata": {"name": ns}}))
            .expect("namespace");
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &obj)
            .await
            .expect("create namespace");
    }
    println!("doctor at scale (unstuck doctor, its own process; median of {ROUNDS}):");
    println!(
        "  {:>8} {:<16} {:>10} {:>10}",
        "objects", "scope", "scan", "peak RSS"
    );
    let mut have = 0;
    for per_ns in [200, 1000] {
        let t = Instant::now();
        populate(&client, &nss, have, per_ns).await;
        eprintln!(
            "  (populated to {} ConfigMaps in {:.1} s)",
            per_ns * NAMESPACES,
            t.elapsed().as_secs_f64()
        );
        have = per_ns;
        for (label, scope) in [("whole cluster", None), ("one namespace", Some(&nss[0]))] {
            let mut runs: Vec<(f64, u64, u64, f64)> = (0..ROUNDS)
                .map(|_| doctor(&cluster.kubeconfig(), scope.map(String::as_str)))
                .collect();
            runs.sort_by(|a, b| a.0.total_cmp(&b.0));
            let (scan, rss_kib, seen, cpu) = runs[ROUNDS / 2];
            println!(
                "  {:>8} {label:<16} {:>8.3} s {:>6.1} MiB   ({seen} objects listed; the doctor's whole process used {cpu:.2} s CPU)",
                per_ns * NAMESPACES,
                scan,
                rss_kib as f64 / 1024.0
            );
        }
    }
    let report = cluster.down().await;
    println!("scale cluster down: {report}");
}

/// ConfigMaps `cm-{from}..cm-{to}` in every namespace, many at once.
async fn populate(client: &Client, nss: &[String], from: usize, to: usize) {
    let creates = nss
        .iter()
        .flat_map(|ns| (from..to).map(move |j| (ns.clone(), j)));
    stream::iter(creates)
        .for_each_concurrent(64, |(ns, j)| {
            let client = client.clone();
            async move {
                let cm: ConfigMap = serde_json::from_value(
                    serde_json::json!({"metadata": {"name": format!("cm-{j:04}")}, "data": {"k": "v"}}),
                )
                .expect("cm");
                Api::<ConfigMap>::namespaced(client, &ns)
                    .create(&PostParams::default(), &cm)
                    .await
                    .expect("create configmap");
            }
        })
        .await;
}

/// One `unstuck doctor -o json` run: its scan time, its peak RSS (KiB,
/// from the kernel's rusage of the child), the objects it listed and the
/// CPU seconds it used (user + system): what is not CPU is waiting on the
/// API server.
fn doctor(kubeconfig: &Path, namespace: Option<&str>) -> (f64, u64, u64, f64) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_unstuck"));
    cmd.args(["doctor", "-o", "json", "--kubeconfig"])
        .arg(kubeconfig)
        .env("UNSTUCK_LOG", "warn")
        .stdout(std::process::Stdio::piped());
    if let Some(ns) = namespace {
        cmd.args(["-n", ns]);
    }
    // Reaped by wait4 below, which also returns the child's rusage.
    #[allow(clippy::zombie_processes)]
    let child = cmd.spawn().expect("unstuck doctor runs");
    let pid = child.id() as libc::pid_t;
    let mut stdout = child.stdout.expect("stdout");
    let mut out = Vec::new();
    std::io::Read::read_to_end(&mut stdout, &mut out).expect("doctor's output");
    let mut status = 0;
    // SAFETY: rusage is plain data, filled by the kernel for our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(r, pid, "wait4 on the doctor");
    let report: serde_json::Value = serde_json::from_slice(&out).expect("JSON report");
    (
        report["scan"]["seconds"].as_f64().expect("scan seconds"),
        usage.ru_maxrss as u64,
        report["scan"]["objectsSeen"].as_u64().unwrap_or(0),
        tv(usage.ru_utime) + tv(usage.ru_stime),
    )
}

fn tv(t: libc::timeval) -> f64 {
    t.tv_sec as f64 + t.tv_usec as f64 / 1e6
}
