//! The node-level faults against a real kubelet and containerd: each test
//! brings up its own local cluster, injects the fault into a running pod,
//! deletes the pod, sees the real symptom (pod kept past its grace period,
//! the kubelet's own error lines), lets the node doctor heal it, and
//! checks that the pod left through the kubelet (no force delete) and that
//! no mount, holder or stopped process is left. Needs root and the
//! components built by ci/setup.sh.
//!
//! With `UNSTUCK_RECORD_NODE_FIXTURES=<dir>`, the gathered facts of the
//! stuck pod and the heal report are written to `<dir>/<case>/` (how the
//! fixtures under unstuck-core's `tests/recorded/node/` were made).

use std::time::{Duration, Instant};

use k8s_openapi::api::{
    coordination::v1::Lease,
    core::v1::{Event, Node as K8sNode, NodeCondition, Pod},
};
use kube::{
    Api, Client,
    api::{DeleteParams, ListParams},
};
use unstuck::{
    cluster::local::{self, LocalCluster, LocalNode},
    doctor::node::{HealOptions, HealOutcome, gather, heal_pod, stuck_pods},
    faults::{
        Placed, busy_mount, stop_kubelet,
        wedge_shim::{self, WedgedShim},
    },
    node::Node,
    wait::{self, Poll},
};
use unstuck_core::doctor::{
    PodStuckHint,
    node::{DiagnoseNodeOptions, NodeCause, NodeFacts, NodeFinding, diagnose_pod},
};

mod common;

async fn delete(client: &Client, name: &str) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.delete(name, &DeleteParams::default()).await.unwrap();
}

/// Waits until the node doctor's diagnosis satisfies `done`; returns the
/// facts and finding then.
async fn wait_symptom(
    client: &Client,
    node: &LocalNode,
    name: &str,
    what: &str,
    timeout: Duration,
    done: impl Fn(&NodeFacts, &NodeFinding) -> bool,
) -> (NodeFacts, NodeFinding) {
    let deadline = Instant::now() + timeout;
    loop {
        let facts = gather(client, node, "default", name, 16 << 20)
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("pod {name} vanished while waiting for {what}"));
        let finding = diagnose_pod(&facts, &DiagnoseNodeOptions::default());
        if done(&facts, &finding) {
            return (facts, finding);
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}; last finding: {finding:#?}"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

fn record(case: &str, facts: &NodeFacts, report: &impl serde::Serialize) {
    let Some(dir) = std::env::var_os("UNSTUCK_RECORD_NODE_FIXTURES") else {
        return;
    };
    let dir = std::path::PathBuf::from(dir).join(case);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("facts.json"),
        serde_json::to_string_pretty(facts).unwrap(),
    )
    .unwrap();
    std::fs::write(
        dir.join("report.json"),
        serde_json::to_string_pretty(report).unwrap(),
    )
    .unwrap();
}

async fn assert_down_clean(cluster: LocalCluster) {
    let layout = cluster.layout().clone();
    let report = cluster.down().await;
    assert!(report.errors.is_empty(), "teardown problems: {report}");
    let left = local::leftovers(&layout);
    assert!(left.is_empty(), "left behind: {left:#?}");
}

#[tokio::test(flavor = "current_thread")]
async fn a_busy_mount_keeps_a_pod_terminating_until_the_doctor_releases_it() {
    busy_case(
        "it-node-busy",
        busy_mount::BusyKind::NestedMount,
        "data",
        &[
            "UnmountVolume.TearDown failed for volume \"data\"",
            "device or resource busy",
        ],
    )
    .await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_held_subpath_mount_keeps_a_pod_terminating_until_the_doctor_releases_it() {
    busy_case(
        "it-node-subpath",
        busy_mount::BusyKind::HeldSubPath,
        "cfg",
        &[
            "error cleaning subPath mounts for volume \"cfg\"",
            "target is busy",
        ],
    )
    .await;
}

/// Inject a busy mount of `kind`, delete the pod, see the kubelet fail on
/// `volume` with a line containing `line_parts`, heal, check nothing is left.
async fn busy_case(
    cluster_name: &str,
    kind: busy_mount::BusyKind,
    volume: &str,
    line_parts: &[&str],
) {
    let cluster = common::up(&common::cluster_name(cluster_name)).await;
    let client = cluster.client();
    let node = LocalNode::of(&cluster);
    let pod = common::running_pod_with_volumes(&client, "busy").await;
    let uid = pod.metadata.uid.clone().unwrap();

    let busy = busy_mount::inject(
        &client,
        &node,
        "default",
        "busy",
        &busy_mount::BusyMountOptions {
            kind,
            holder: true,
            ..Default::default()
        },
    )
    .await
    .expect("inject busy mount");
    let holder = busy.holder.clone().expect("holder started");
    eprintln!("{}", busy.describe());

    let deleted = Instant::now();
    delete(&client, "busy").await;
    // The real symptom: the kubelet's TearDown fails with EBUSY, and the
    // pod stays past its grace period.
    let (facts, finding) = wait_symptom(
        &client,
        &node,
        "busy",
        "the pod to be stuck on a busy volume",
        Duration::from_secs(90),
        |_, f| f.stuck && f.causes.contains(&NodeCause::BusyVolume) && !f.busy_volumes.is_empty(),
    )
    .await;
    let symptom_after = deleted.elapsed();
    let v = &finding.busy_volumes[0];
    assert_eq!(v.volume, volume);
    assert!(v.busy, "not an EBUSY error: {}", v.error);
    for part in line_parts {
        assert!(v.line.contains(part), "{part:?} not in {}", v.line);
    }
    if let Some(m) = &busy.mount_point {
        assert!(
            finding.stray_mounts().any(|s| s.mount.mount_point == *m),
            "{finding:#?}"
        );
    }
    assert!(
        finding.holders.iter().any(|h| h.pid == holder.pid),
        "{finding:#?}"
    );
    let listed = stuck_pods(&client, node.name(), Duration::from_secs(10))
        .await
        .unwrap();
    assert!(listed.iter().any(|p| p.uid == uid), "{listed:?}");
    eprintln!(
        "symptom after {symptom_after:.1?}:\n  {}",
        finding.evidence.join("\n  ")
    );

    let report = heal_pod(
        &client,
        &node,
        "default",
        "busy",
        &HealOptions {
            apply: true,
            ..Default::default()
        },
    )
    .await
    .expect("heal");
    record(cluster_name, &facts, &report);
    eprintln!("{}", serde_json::to_string_pretty(&report).unwrap());
    assert_eq!(report.outcome, HealOutcome::Recovered, "{report:#?}");
    assert!(!report.force_used);
    assert_eq!(report.steps[0].step.remedy.name(), "ReleaseHolder");
    assert!(report.steps.iter().all(|s| !s.step.force));

    // Nothing left: no mount, no holder, and revert has nothing to undo.
    let procs = node.processes().await.unwrap();
    assert!(
        holder.find(&procs).is_none(),
        "holder {} still runs",
        holder.pid
    );
    let pod_dir = node.kubelet_dir().join("pods").join(&uid);
    assert!(
        !node
            .mounts()
            .await
            .unwrap()
            .iter()
            .any(|m| m.mount_point.starts_with(&pod_dir))
    );
    let undone = busy.revert(&node).await.expect("revert after heal");
    assert!(undone.is_empty(), "revert found work left: {undone:?}");
    eprintln!(
        "timings: symptom after {symptom_after:.1?}, heal {} ms (pod gone after {:?} ms)",
        report.timings.total_ms, report.timings.pod_gone_ms
    );
    assert_down_clean(cluster).await;
}

/// Wedges pod `name`'s shim, and returns the fault.
async fn wedge(client: &Client, node: &LocalNode, name: &str) -> (WedgedShim, String) {
    let pod = common::running_pod_with_volumes(client, name).await;
    let injected = wedge_shim::inject(client, node, "default", name)
        .await
        .expect("inject wedged shim");
    eprintln!("{}", injected.describe());
    (injected, pod.metadata.uid.unwrap())
}

/// Waits for the real symptom of a wedged shim: the kubelet's kill runs
/// into its deadline twice (container, then sandbox) and it records
/// FailedKillPod; the runtime lists the tasks as UNKNOWN.
async fn wedged_symptom(
    client: &Client,
    node: &LocalNode,
    name: &str,
    wedged: &WedgedShim,
) -> (NodeFacts, NodeFinding) {
    let (facts, finding) = wait_symptom(
        client,
        node,
        name,
        "a FailedKillPod event",
        Duration::from_secs(150),
        |facts, f| {
            f.stuck
                && facts
                    .pod_events
                    .iter()
                    .any(|e| e.reason.as_deref() == Some("FailedKillPod"))
        },
    )
    .await;
    assert_eq!(
        finding.causes.first(),
        Some(&NodeCause::WedgedRuntime),
        "{finding:#?}"
    );
    assert!(finding.tasks.iter().any(|t| t.is_unknown()), "{finding:#?}");
    assert!(
        finding
            .wedged_shims
            .iter()
            .any(|s| s.is_stopped() && s.pid == wedged.shims[0].pid),
        "{finding:#?}"
    );
    assert!(
        finding
            .kill_failures
            .iter()
            .any(|k| k.contains("KillContainerError") && ran_into_its_deadline(k)),
        "{:#?}",
        finding.kill_failures
    );
    (facts, finding)
}

/// The kubelet's kill ran into `runtimeRequestTimeout`: in the kubelet's
/// own words (`code = DeadlineExceeded`), or in containerd's when its
/// inherited deadline expired first (`context deadline exceeded: unknown`).
fn ran_into_its_deadline(failure: &str) -> bool {
    failure.contains("code = DeadlineExceeded") || failure.contains("context deadline exceeded")
}

#[tokio::test(flavor = "current_thread")]
async fn a_wedged_shim_keeps_a_pod_terminating_until_the_doctor_kills_it_or_restarts_the_runtime() {
    let cluster = common::up(&common::cluster_name("it-node-wedge")).await;
    let client = cluster.client();
    let node = LocalNode::of(&cluster);
    // Two pods: one healed by the first rung (kill the shim), one by the
    // second (restart containerd, as seed 000 restarted docker).
    let (killed, _) = wedge(&client, &node, "wedge").await;
    let (restarted, restarted_uid) = wedge(&client, &node, "wedge-restart").await;

    let deleted = Instant::now();
    delete(&client, "wedge").await;
    delete(&client, "wedge-restart").await;
    let (facts, finding) = wedged_symptom(&client, &node, "wedge", &killed).await;
    let symptom_after = deleted.elapsed();
    wedged_symptom(&client, &node, "wedge-restart", &restarted).await;
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    let kill = events
        .list(&ListParams::default().fields(&format!(
            "involvedObject.uid={},reason=FailedKillPod",
            finding.pod.uid.clone().unwrap()
        )))
        .await
        .unwrap();
    eprintln!(
        "symptom after {symptom_after:.1?}: event {:?}\n  {}",
        kill.items.first().and_then(|e| e.message.clone()),
        finding.evidence.join("\n  ")
    );

    // Rung 1: SIGKILL the stopped shim.
    let report = heal_pod(
        &client,
        &node,
        "default",
        "wedge",
        &HealOptions {
            apply: true,
            ..Default::default()
        },
    )
    .await
    .expect("heal");
    record("it-node-wedge", &facts, &report);
    eprintln!("{}", serde_json::to_string_pretty(&report).unwrap());
    assert_eq!(report.outcome, HealOutcome::Recovered, "{report:#?}");
    assert!(!report.force_used);
    assert_eq!(report.steps[0].step.remedy.name(), "KillShim");
    eprintln!(
        "timings (kill shim): symptom after {symptom_after:.1?}, heal {} ms (pod gone after {:?} ms)",
        report.timings.total_ms, report.timings.pod_gone_ms
    );

    // Rung 2, with the first one ruled out: restart containerd. It cleans
    // the tasks up and the kubelet finishes the pod; the shim it orphans
    // (still stopped) is reaped by the doctor's proof step.
    let before = std::fs::read_to_string(cluster.layout().state_file()).unwrap();
    let report = heal_pod(
        &client,
        &node,
        "default",
        "wedge-restart",
        &HealOptions {
            apply: true,
            skip: vec!["KillShim".into()],
            ..Default::default()
        },
    )
    .await
    .expect("heal");
    eprintln!("{}", serde_json::to_string_pretty(&report).unwrap());
    assert_eq!(report.outcome, HealOutcome::Recovered, "{report:#?}");
    assert!(!report.force_used);
    assert_eq!(report.steps[0].step.remedy.name(), "RestartRuntime");
    assert!(report.steps[0].ok, "{report:#?}");
    eprintln!(
        "timings (restart runtime): heal {} ms (pod gone after {:?} ms)",
        report.timings.total_ms, report.timings.pod_gone_ms
    );
    let after = std::fs::read_to_string(cluster.layout().state_file()).unwrap();
    assert_ne!(before, after, "state.json records the new containerd");
    let pod_dir = node.kubelet_dir().join("pods").join(&restarted_uid);
    assert!(
        !node
            .mounts()
            .await
            .unwrap()
            .iter()
            .any(|m| m.mount_point.starts_with(&pod_dir))
    );

    // No stopped process left, and revert has nothing to undo.
    let procs = node.processes().await.unwrap();
    let dir = cluster.layout().dir.display().to_string();
    for w in [&killed, &restarted] {
        for s in &w.shims {
            assert!(s.find(&procs).is_none(), "shim {} still there", s.pid);
        }
        let undone = w.revert(&node).await.expect("revert after heal");
        assert!(undone.is_empty(), "revert found work left: {undone:?}");
    }
    assert!(
        !procs
            .iter()
            .any(|p| p.state == 'T' && p.command_line().contains(&dir))
    );

    // The restarted runtime runs and stops pods, and `down` still finds it.
    run_and_delete(&client, "after-restart").await;
    assert_down_clean(cluster).await;
}

/// Runs pod `name`, deletes it, and waits until the kubelet has finished
/// it: the node works.
async fn run_and_delete(client: &Client, name: &str) {
    common::running_pod_with_volumes(client, name).await;
    delete(client, name).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    wait::until(
        format!("pod {name} to be deleted by the kubelet"),
        Duration::from_secs(60),
        Duration::from_millis(500),
        || {
            let pods = pods.clone();
            async move {
                match pods.get_opt(name).await {
                    Ok(None) => Poll::Ready(()),
                    other => Poll::Pending(format!("{:?}", other.map(|p| p.is_some()))),
                }
            }
        },
    )
    .await
    .unwrap();
}

/// Waits until the node's `Ready` condition has `status`; returns it.
async fn node_ready_condition(
    client: &Client,
    node: &str,
    status: &str,
    timeout: Duration,
) -> NodeCondition {
    let nodes: Api<K8sNode> = Api::all(client.clone());
    wait::until(
        format!("node {node} to be Ready={status}"),
        timeout,
        Duration::from_millis(500),
        || {
            let nodes = nodes.clone();
            async move {
                let ready = nodes.get(node).await.map(|n| {
                    n.status
                        .and_then(|s| s.conditions)
                        .and_then(|cs| cs.into_iter().find(|c| c.type_ == "Ready"))
                });
                match ready {
                    Ok(Some(c)) if c.status == status => Poll::Ready(c),
                    other => Poll::Pending(format!("{other:?}")),
                }
            }
        },
    )
    .await
    .unwrap()
}

/// The lines `path` gained since it was `from` bytes long that contain
/// one of `needles`.
fn log_lines_since(path: &std::path::Path, from: u64, needles: &[&str]) -> Vec<String> {
    let text = std::fs::read(path).unwrap_or_default();
    let start = (from as usize).min(text.len());
    String::from_utf8_lossy(&text[start..])
        .lines()
        .filter(|l| needles.iter().any(|n| l.contains(n)))
        .map(str::to_owned)
        .collect()
}

fn file_len(path: &std::path::Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

#[tokio::test(flavor = "current_thread")]
async fn a_stopped_kubelet_keeps_a_pod_terminating_until_the_doctor_starts_it_again() {
    let cluster = common::up(&common::cluster_name("it-node-kubelet")).await;
    let client = cluster.client();
    let node = LocalNode::of(&cluster);
    let pod = common::running_pod_with_volumes(&client, "lost").await;
    let uid = pod.metadata.uid.clone().unwrap();
    let kubelet_log = cluster.layout().log_file("kubelet");
    let kcm_log = cluster.layout().log_file("kube-controller-manager");
    let (kubelet_from, kcm_from) = (file_len(&kubelet_log), file_len(&kcm_log));
    assert!(node.kubelet_running().await.unwrap());
    // A node that has run a while holds a Lease; a fresh kubelet creates
    // it only on its lease controller's second round (the first one runs
    // before the Node is registered), 10 s after start.
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    wait::until(
        format!("lease kube-node-lease/{}", node.name()),
        Duration::from_secs(30),
        Duration::from_millis(500),
        || {
            let leases = leases.clone();
            let name = node.name().to_owned();
            async move {
                match leases.get_opt(&name).await {
                    Ok(Some(_)) => Poll::Ready(()),
                    other => Poll::Pending(format!("{:?}", other.map(|l| l.is_some()))),
                }
            }
        },
    )
    .await
    .unwrap();

    let lost = stop_kubelet::inject(&client, &node, "default", "lost")
        .await
        .expect("inject stopped kubelet");
    let stopped = Instant::now();
    eprintln!("{}", lost.describe());
    assert!(!node.kubelet_running().await.unwrap());
    assert!(lost.kubelet.command.contains("kubelet"), "{lost:?}");
    delete(&client, "lost").await;

    // The real symptom: once the node-monitor grace period has passed
    // without a status from the kubelet, the node lifecycle controller
    // turns the node's Ready condition Unknown; the pod stays.
    let ready =
        node_ready_condition(&client, node.name(), "Unknown", Duration::from_secs(150)).await;
    let unknown_after = stopped.elapsed();
    eprintln!("node Ready after {unknown_after:.1?}: {ready:?}");
    assert_eq!(ready.reason.as_deref(), Some("NodeStatusUnknown"));
    assert_eq!(
        ready.message.as_deref(),
        Some("Kubelet stopped posting node status.")
    );
    let (facts, finding) = wait_symptom(
        &client,
        &node,
        "lost",
        "the pod to be stuck on a lost node",
        Duration::from_secs(60),
        |facts, f| {
            f.stuck
                && facts
                    .node_ready
                    .as_ref()
                    .is_some_and(|c| c.status == "Unknown")
        },
    )
    .await;
    assert_eq!(finding.causes, vec![NodeCause::KubeletDown], "{finding:#?}");
    assert_eq!(finding.hint(), PodStuckHint::NodeLost);
    assert_eq!(facts.kubelet_running, Some(false));
    assert_eq!(facts.pod.metadata.deletion_grace_period_seconds, Some(1));
    // Nothing stopped the containers: the runtime still runs them.
    assert!(
        finding.tasks.iter().any(|t| t.status == "RUNNING"),
        "{finding:#?}"
    );
    for quoted in [
        "no kubelet process runs on node",
        "Ready=Unknown (NodeStatusUnknown): \"Kubelet stopped posting node status.\"",
        "the kubelet last renewed its Lease kube-node-lease/",
    ] {
        assert!(
            finding.evidence.iter().any(|e| e.contains(quoted)),
            "{quoted:?} not in {:#?} (lease renewed {:?})",
            finding.evidence,
            facts.node_lease_renewed
        );
    }
    let listed = stuck_pods(&client, node.name(), Duration::from_secs(10))
        .await
        .unwrap();
    assert!(listed.iter().any(|p| p.uid == uid), "{listed:?}");
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    let pod_events: Vec<String> = events
        .list(&ListParams::default().fields(&format!("involvedObject.uid={uid}")))
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|e| {
            format!(
                "{} {} (x{}): {}",
                e.type_.unwrap_or_default(),
                e.reason.unwrap_or_default(),
                e.count.unwrap_or(1),
                e.message.unwrap_or_default()
            )
        })
        .collect();
    eprintln!(
        "symptom after {:.1?}:\n  {}\npod events:\n  {}\nkubelet log since the stop:\n  {}\nkube-controller-manager log:\n  {}",
        stopped.elapsed(),
        finding.evidence.join("\n  "),
        pod_events.join("\n  "),
        log_lines_since(&kubelet_log, kubelet_from, &[""]).join("\n  "),
        log_lines_since(
            &kcm_log,
            kcm_from,
            &[node.name(), "isruption", "NotReady", "lost"]
        )
        .join("\n  ")
    );

    // Rung 1: start the kubelet again; it finishes the pod by itself.
    let report = heal_pod(
        &client,
        &node,
        "default",
        "lost",
        &HealOptions {
            apply: true,
            ..Default::default()
        },
    )
    .await
    .expect("heal");
    record("kubelet-down", &facts, &report);
    eprintln!("{}", serde_json::to_string_pretty(&report).unwrap());
    assert_eq!(report.outcome, HealOutcome::Recovered, "{report:#?}");
    assert!(!report.force_used);
    let initial = report.initial.as_ref().unwrap();
    assert_eq!(initial.causes.first(), Some(&NodeCause::KubeletDown));
    assert_eq!(report.plan[0].remedy.name(), "RestartKubelet");
    assert_eq!(report.steps[0].step.remedy.name(), "RestartKubelet");
    assert!(
        report.steps[0].ok && report.steps[0].pod_gone,
        "{report:#?}"
    );
    assert!(report.steps.iter().all(|s| !s.step.force));
    let ready = node_ready_condition(&client, node.name(), "True", Duration::from_secs(60)).await;
    eprintln!(
        "timings: Ready=Unknown {unknown_after:.1?} after the stop; restart -> pod gone {:?} ms (restart step {} ms); node Ready again: {ready:?}",
        report
            .timings
            .pod_gone_ms
            .map(|g| g - report.steps[0].started_at_ms),
        report.steps[0].took_ms,
    );
    eprintln!(
        "kubelet log about the pod after the restart:\n  {}",
        log_lines_since(
            &kubelet_log,
            kubelet_from,
            &["\"default/lost\"", &format!("podUID=\"{uid}\"")]
        )
        .join("\n  ")
    );

    // The restarted kubelet is recorded, revert has nothing to undo, and
    // it runs and stops pods.
    assert!(node.kubelet_running().await.unwrap());
    let state = std::fs::read_to_string(cluster.layout().state_file()).unwrap();
    assert!(
        !state.contains(&format!("\"pid\": {},", lost.kubelet.pid)),
        "state.json still records the stopped kubelet: {state}"
    );
    let undone = lost.revert(&node).await.expect("revert after heal");
    assert!(undone.is_empty(), "revert found work left: {undone:?}");
    run_and_delete(&client, "after-restart").await;
    assert_down_clean(cluster).await;
}
