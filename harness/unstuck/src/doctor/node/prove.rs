//! Proving recovery after the pod left the API: the kubelet's own final
//! delete (not a force delete), nothing mounted under its directory, and
//! nothing listed by the runtime for it; or the leftovers.

use std::{
    path::Path,
    time::{Duration, Instant},
};

use unstuck_core::doctor::node::{
    KubeletEvent, NodeRemedy, ProcessTarget, RuntimeFacts, ShimFact, SyncLoopOp, parse_kubelet_log,
    pod_dir,
};

use crate::node::{Node, runtime_facts};

use super::act::signal_and_wait;
use super::{HealOptions, NodeDoctorError, NodeDoctorReport, freezer};

/// After the pod left the API: waits for the node to let go of it, then
/// records the proof (or the leftovers).
pub(super) async fn prove(
    node: &dyn Node,
    namespace: &str,
    name: &str,
    ids: &[String],
    opts: &HealOptions,
    report: &mut NodeDoctorReport,
) -> Result<(), NodeDoctorError> {
    let uid = report.uid.clone().unwrap_or_default();
    report.proof.push(if report.force_used {
        format!("pod {namespace}/{name} (uid {uid}) is gone from the API, but by a FORCE delete")
    } else {
        format!(
            "pod {namespace}/{name} (uid {uid}) is gone from the API, and unstuck never force deleted it: only the kubelet's final delete (grace 0) removes a pod"
        )
    });
    let dir = pod_dir(node.kubelet_dir(), &uid);
    let deadline = Instant::now() + opts.proof_timeout;
    let mut reaped_orphans = false;
    loop {
        let Held {
            mut left,
            runtime: rt,
        } = still_held(node, &dir, &uid, ids).await?;
        // Exited containers' records are not running and hold nothing;
        // the kubelet's container garbage collection removes those of a
        // deleted pod, but only once a minute (ContainerGCPeriod, a constant
        // in pkg/kubelet/kubelet.go): waiting for it would double a node
        // case's time. They are named in the proof, not counted as left.
        let records: Vec<String> = rt
            .containers
            .iter()
            .map(|c| format!("{} ({})", c.id, c.kind))
            .collect();
        for e in &rt.errors {
            left.push(format!("runtime query failed: {e}"));
        }
        // A restart of containerd can orphan a stopped shim: its tasks are
        // cleaned up, but the process stays stopped. Reap it, once, loudly.
        let stale: Vec<_> = rt.shims.iter().filter(|s| s.is_stopped()).collect();
        if !stale.is_empty() && !reaped_orphans {
            reaped_orphans = true;
            reap_stopped_shims(node, &stale, report).await?;
            continue;
        }
        for s in &rt.shims {
            left.push(format!("shim {} (-id {}) state {}", s.pid, s.id, s.state));
        }
        if left.is_empty() {
            prove_clean(&dir, ids, &records, report);
            break;
        }
        if Instant::now() >= deadline {
            report.leftovers = left;
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    if report
        .steps
        .iter()
        .any(|s| matches!(s.step.remedy, NodeRemedy::ThawCgroup { .. }))
    {
        match freezer::proof(node, &uid).await {
            freezer::Proof::Thawed(line) => report.proof.push(line),
            freezer::Proof::Left(left) => report.leftovers.extend(left),
        }
    }
    kubelet_finished(node, namespace, name, &uid, opts, report).await
}

/// What the node still holds of the pod, one line each, and the
/// runtime's whole view beside.
struct Held {
    left: Vec<String>,
    runtime: RuntimeFacts,
}

/// What the node still holds of the pod: mounts under its directory,
/// processes holding it, the runtime's tasks.
async fn still_held(
    node: &dyn Node,
    dir: &Path,
    uid: &str,
    ids: &[String],
) -> Result<Held, NodeDoctorError> {
    let mut left = Vec::new();
    for m in node.mounts().await? {
        if m.mount_point.starts_with(dir) {
            left.push(format!(
                "mount {} ({} {})",
                m.mount_point.display(),
                m.fs_type,
                m.source
            ));
        }
    }
    for h in node.holders_of(dir).await? {
        left.push(format!(
            "process {} ({}) holds {}",
            h.pid,
            h.command,
            dir.display()
        ));
    }
    let rt = runtime_facts(node, uid, ids).await;
    for t in &rt.tasks {
        left.push(format!(
            "runtime task {} (pid {}, {})",
            t.id, t.pid, t.status
        ));
    }
    Ok(Held { left, runtime: rt })
}

/// SIGKILL to each stopped shim the runtime left behind, recorded in the
/// proof.
async fn reap_stopped_shims(
    node: &dyn Node,
    stale: &[&ShimFact],
    report: &mut NodeDoctorReport,
) -> Result<(), NodeDoctorError> {
    for s in stale {
        let target = ProcessTarget {
            pid: s.pid,
            start_time: s.start_time,
            command: s.command.clone(),
        };
        let gone = signal_and_wait(node, &target, libc::SIGKILL, Duration::from_secs(5)).await?;
        report.proof.push(format!(
            "cleanup: SIGKILL to stopped shim {} left behind by the runtime ({})",
            s.pid,
            if gone { "gone" } else { "still there" }
        ));
    }
    Ok(())
}

/// The proof that the node let go of the pod.
fn prove_clean(dir: &Path, ids: &[String], records: &[String], report: &mut NodeDoctorReport) {
    report.proof.push(format!(
        "nothing is mounted under {} any more",
        dir.display()
    ));
    report
        .proof
        .push("no process holds the pod's directory".to_owned());
    report.proof.push(format!(
        "the runtime runs no task or shim for the pod (IDs {})",
        if ids.is_empty() {
            "<none known>".to_owned()
        } else {
            ids.join(", ")
        }
    ));
    report.proof.push(if records.is_empty() {
        "the runtime lists no container of the pod".to_owned()
    } else {
        format!(
            "the runtime still lists {} exited container record(s) of the pod, which the kubelet's container garbage collection removes within a minute: {}",
            records.len(),
            records.join(", ")
        )
    });
}

/// The kubelet's own words that it finished the pod.
async fn kubelet_finished(
    node: &dyn Node,
    namespace: &str,
    name: &str,
    uid: &str,
    opts: &HealOptions,
    report: &mut NodeDoctorReport,
) -> Result<(), NodeDoctorError> {
    if let Some(log) = node.kubelet_log_tail(opts.log_tail_bytes).await? {
        let key = format!("{namespace}/{name}");
        let lines: Vec<&str> = log
            .lines()
            .filter(|l| l.contains(&key) || (!uid.is_empty() && l.contains(uid)))
            .collect();
        let remove = parse_kubelet_log(lines.iter().copied()).into_iter().rev().find(|e| {
            matches!(&e.event, KubeletEvent::SyncLoop { op: SyncLoopOp::Remove, pods } if pods.contains(&key))
        });
        if let Some(e) = remove {
            report.proof.push(format!("kubelet log: {}", e.raw));
        }
        let cleaned = parse_kubelet_log(lines.iter().copied()).into_iter().rev().find(|e| {
            matches!(&e.event, KubeletEvent::OrphanVolumesCleaned { pod_uid, .. } if *pod_uid == uid)
        });
        if let Some(e) = cleaned {
            report.proof.push(format!("kubelet log: {}", e.raw));
        }
    }
    Ok(())
}
