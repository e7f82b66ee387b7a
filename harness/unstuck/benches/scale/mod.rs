//! The doctor at scale: scan time and peak RSS of `unstuck doctor` (its own
//! process, so the figure is the doctor's alone) at 20k and 100k objects,
//! whole cluster and one namespace, beside kubectl's own paginated list of
//! the same objects (`kubectl get configmaps -o name`, the kubectl built by
//! ci/setup.sh) in the same run, and their ratio. Goals (issues 8, 18):
//! 100k objects in ≤ 2 s, no slower than kubectl's list, ≤ 64 MiB; one
//! namespace ≤ 0.1 s whatever the cluster size. Figures only, no
//! assertion on them.
#![allow(unsafe_code)] // wait4: the kernel's peak RSS of the doctor's process.

use std::{
    path::{Path, PathBuf},
    process::Command,
    time::Instant,
};

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
    let kubectl = cluster.binaries().kubectl();
    // `UNSTUCK_BENCH_DOCTOR_BEFORE=PATH`: another build of `unstuck` (say,
    // main's) measured in the same run, for a before/after on one machine.
    let mut doctors = vec![("this build", PathBuf::from(env!("CARGO_BIN_EXE_unstuck")))];
    if let Some(p) = std::env::var_os("UNSTUCK_BENCH_DOCTOR_BEFORE") {
        doctors.push(("before", p.into()));
    }
    println!(
        "doctor at scale (unstuck doctor and kubectl, each its own process, same run; median of {ROUNDS}):"
    );
    println!(
        "  {:>8} {:<14} {:<10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>6}",
        "objects", "scope", "doctor", "scan", "its wall", "peak RSS", "kubectl", "its RSS", "ratio"
    );
    let mut have = 0;
    for per_ns in [200, 1000] {
        let t = Instant::now();
        populate(&client, &nss, have, per_ns).await;
        println!(
            "  (populated to {} ConfigMaps in {:.1} s; load average {})",
            per_ns * NAMESPACES,
            t.elapsed().as_secs_f64(),
            load_average()
        );
        have = per_ns;
        for (label, scope) in [("whole cluster", None), ("one namespace", Some(&nss[0]))] {
            let scope = scope.map(String::as_str);
            // Alternated, so every program sees the same machine.
            let mut docs: Vec<Vec<(f64, Measured, u64)>> =
                doctors.iter().map(|_| Vec::new()).collect();
            let mut kubes = Vec::new();
            for _ in 0..ROUNDS {
                for ((_, bin), runs) in doctors.iter().zip(&mut docs) {
                    runs.push(doctor(bin, &cluster.kubeconfig(), scope));
                }
                kubes.push(kubectl_list(&kubectl, &cluster.kubeconfig(), scope));
            }
            kubes.sort_by(|a, b| a.wall.total_cmp(&b.wall));
            let k = &kubes[ROUNDS / 2];
            for ((name, _), mut runs) in doctors.iter().zip(docs) {
                runs.sort_by(|a, b| a.0.total_cmp(&b.0));
                let (scan, d, seen) = &runs[ROUNDS / 2];
                println!(
                    "  {:>8} {label:<14} {name:<10} {:>7.3} s {:>7.3} s {:>5.1} MiB {:>7.3} s {:>5.1} MiB {:>6.2}   (doctor: {seen} objects listed, {:.2} s CPU; kubectl: {} names, {:.2} s CPU)",
                    per_ns * NAMESPACES,
                    scan,
                    d.wall,
                    d.rss_mib(),
                    k.wall,
                    k.rss_mib(),
                    scan / k.wall,
                    d.cpu,
                    k.lines,
                    k.cpu,
                );
            }
        }
    }
    println!(
        "  (scan: the doctor's own collect time; doctor, kubectl: each process's wall time; ratio: scan / kubectl)"
    );
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

/// One child process's figures: wall time, peak RSS (from the kernel's
/// rusage of the child), CPU seconds (user + system: what is not CPU is
/// waiting on the API server), and its stdout.
struct Measured {
    wall: f64,
    rss_kib: u64,
    cpu: f64,
    lines: usize,
    out: Vec<u8>,
}

impl Measured {
    fn rss_mib(&self) -> f64 {
        self.rss_kib as f64 / 1024.0
    }
}

fn measure(mut cmd: Command) -> Measured {
    cmd.stdout(std::process::Stdio::piped());
    let t = Instant::now();
    // Reaped by wait4 below, which also returns the child's rusage.
    #[allow(clippy::zombie_processes)]
    let child = cmd.spawn().expect("child runs");
    let pid = child.id() as libc::pid_t;
    let mut stdout = child.stdout.expect("stdout");
    let mut out = Vec::new();
    std::io::Read::read_to_end(&mut stdout, &mut out).expect("child's output");
    let mut status = 0;
    // SAFETY: rusage is plain data, filled by the kernel for our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let wall = t.elapsed().as_secs_f64();
    assert_eq!(r, pid, "wait4 on the child");
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{cmd:?} failed: status {status}"
    );
    Measured {
        wall,
        rss_kib: usage.ru_maxrss as u64,
        cpu: tv(usage.ru_utime) + tv(usage.ru_stime),
        lines: out.iter().filter(|b| **b == b'\n').count(),
        out,
    }
}

/// One `unstuck doctor -o json` run: its scan time, the process's
/// figures, and the objects it listed.
fn doctor(bin: &Path, kubeconfig: &Path, namespace: Option<&str>) -> (f64, Measured, u64) {
    let mut cmd = Command::new(bin);
    cmd.args(["doctor", "-o", "json", "--kubeconfig"])
        .arg(kubeconfig)
        .env("UNSTUCK_LOG", "warn");
    if let Some(ns) = namespace {
        cmd.args(["-n", ns]);
    }
    let m = measure(cmd);
    let report: serde_json::Value = serde_json::from_slice(&m.out).expect("JSON report");
    let scan = report["scan"]["seconds"].as_f64().expect("scan seconds");
    let seen = report["scan"]["objectsSeen"].as_u64().unwrap_or(0);
    (scan, m, seen)
}

/// kubectl's own list of the ConfigMaps (paged, 500 a page, as kubectl
/// does by default), names only.
fn kubectl_list(kubectl: &Path, kubeconfig: &Path, namespace: Option<&str>) -> Measured {
    let mut cmd = Command::new(kubectl);
    cmd.args(["get", "configmaps", "-o", "name", "--kubeconfig"])
        .arg(kubeconfig);
    match namespace {
        Some(ns) => cmd.args(["-n", ns]),
        None => cmd.arg("-A"),
    };
    measure(cmd)
}

/// The 1-, 5- and 15-minute load averages: the machine is shared.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

fn tv(t: libc::timeval) -> f64 {
    t.tv_sec as f64 + t.tv_usec as f64 / 1e6
}
