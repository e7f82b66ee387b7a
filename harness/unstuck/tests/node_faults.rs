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

use k8s_openapi::api::core::v1::{Event, Pod};
use kube::{
    Api, Client,
    api::{DeleteParams, ListParams, PostParams},
};
use unstuck::{
    cluster::local::{self, LocalCluster, UpOptions},
    doctor::node::{HealOptions, HealOutcome, gather, heal_pod, stuck_pods},
    faults::{Injected, busy_mount, wedge_shim},
    node::{LocalNode, Node},
    wait::{self, Poll},
};
use unstuck_core::doctor::node::{
    DiagnoseNodeOptions, NodeCause, NodeFacts, NodeFinding, diagnose_pod,
};

fn from_json<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
    serde_json::from_value(v).expect("valid object")
}

async fn up(name: &str) -> LocalCluster {
    let mut opts = UpOptions::new(name);
    opts.reaper = Some(env!("CARGO_BIN_EXE_unstuck").into());
    LocalCluster::up(opts).await.expect("cluster up")
}

/// Creates `default/<name>` (an emptyDir at /data) and waits until it runs.
async fn running_pod(client: &Client, name: &str) -> Pod {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod: Pod = from_json(serde_json::json!({
        "metadata": {"name": name},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "c", "image": local::config::TEST_IMAGE, "imagePullPolicy": "Never",
                            "command": ["sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1; done"],
                            "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
            "volumes": [{"name": "data", "emptyDir": {}}]
        }
    }));
    pods.create(&PostParams::default(), &pod).await.unwrap();
    wait::until(
        format!("pod default/{name} to be Running"),
        Duration::from_secs(90),
        Duration::from_millis(500),
        || {
            let pods = pods.clone();
            async move {
                match pods.get(name).await {
                    Ok(p)
                        if p.status.as_ref().and_then(|s| s.phase.as_deref())
                            == Some("Running") =>
                    {
                        Poll::Ready(p)
                    }
                    other => Poll::Pending(format!(
                        "{:?}",
                        other.map(|p| p.status.and_then(|s| s.phase))
                    )),
                }
            }
        },
    )
    .await
    .unwrap()
}

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
    let cluster = up("it-node-busy").await;
    let client = cluster.client();
    let node = LocalNode::of(&cluster);
    let pod = running_pod(&client, "busy").await;
    let uid = pod.metadata.uid.clone().unwrap();

    let injected = busy_mount::inject(
        &client,
        &node,
        "default",
        "busy",
        &busy_mount::BusyMountOptions {
            holder: true,
            ..Default::default()
        },
    )
    .await
    .expect("inject busy mount");
    let Injected::BusyMount(busy) = &injected else {
        panic!("wrong fault: {injected:?}")
    };
    let holder = busy.holder.clone().expect("holder started");
    eprintln!("{}", injected.describe());

    let deleted = Instant::now();
    delete(&client, "busy").await;
    // The real symptom: the kubelet's TearDown fails with EBUSY on our
    // nested mount, and the pod stays past its grace period.
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
    assert_eq!(v.volume, "data");
    assert!(v.busy, "not an EBUSY error: {}", v.error);
    assert!(
        v.line
            .contains("UnmountVolume.TearDown failed for volume \"data\"")
            && v.line.contains("device or resource busy"),
        "{}",
        v.line
    );
    assert!(
        finding
            .stray_mounts()
            .any(|m| m.mount.mount_point == busy.mount_point),
        "{finding:#?}"
    );
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
    record("busy-mount", &facts, &report);
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
    let undone = injected.revert(&node).await.expect("revert after heal");
    assert!(undone.is_empty(), "revert found work left: {undone:?}");
    eprintln!(
        "timings: symptom after {symptom_after:.1?}, heal {} ms (pod gone after {:?} ms)",
        report.timings.total_ms, report.timings.pod_gone_ms
    );
    assert_down_clean(cluster).await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_wedged_shim_keeps_a_pod_terminating_until_the_doctor_kills_it() {
    let cluster = up("it-node-wedge").await;
    let client = cluster.client();
    let node = LocalNode::of(&cluster);
    let pod = running_pod(&client, "wedge").await;
    let uid = pod.metadata.uid.clone().unwrap();

    let injected = wedge_shim::inject(&client, &node, "default", "wedge")
        .await
        .expect("inject wedged shim");
    let Injected::WedgedShim(wedged) = &injected else {
        panic!("wrong fault: {injected:?}")
    };
    eprintln!("{}", injected.describe());

    let deleted = Instant::now();
    delete(&client, "wedge").await;
    // The real symptom: the kubelet's kill runs into its deadline twice
    // (container, then sandbox) and it records FailedKillPod; the runtime
    // lists the tasks as UNKNOWN.
    let (facts, finding) = wait_symptom(
        &client,
        &node,
        "wedge",
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
    let symptom_after = deleted.elapsed();
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
            .any(|k| k.contains("KillContainerError") && k.contains("DeadlineExceeded")),
        "{:#?}",
        finding.kill_failures
    );
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    let kill = events
        .list(
            &ListParams::default()
                .fields(&format!("involvedObject.uid={uid},reason=FailedKillPod")),
        )
        .await
        .unwrap();
    eprintln!(
        "symptom after {symptom_after:.1?}: event {:?}\n  {}",
        kill.items.first().and_then(|e| e.message.clone()),
        finding.evidence.join("\n  ")
    );

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
    record("wedged-shim", &facts, &report);
    eprintln!("{}", serde_json::to_string_pretty(&report).unwrap());
    assert_eq!(report.outcome, HealOutcome::Recovered, "{report:#?}");
    assert!(!report.force_used);
    assert_eq!(report.steps[0].step.remedy.name(), "KillShim");

    // No stopped process left, and revert has nothing to undo.
    let procs = node.processes().await.unwrap();
    for s in &wedged.shims {
        assert!(s.find(&procs).is_none(), "shim {} still there", s.pid);
    }
    assert!(!procs.iter().any(|p| {
        p.state == 'T'
            && p.command_line()
                .contains(&cluster.layout().dir.display().to_string())
    }));
    let undone = injected.revert(&node).await.expect("revert after heal");
    assert!(undone.is_empty(), "revert found work left: {undone:?}");
    eprintln!(
        "timings: symptom after {symptom_after:.1?}, heal {} ms (pod gone after {:?} ms)",
        report.timings.total_ms, report.timings.pod_gone_ms
    );

    // The runtime restart rung works on this node too, and `down` still
    // finds the restarted (detached) containerd.
    let before = std::fs::read_to_string(cluster.layout().state_file()).unwrap();
    let restart = node.restart_runtime().await.expect("restart containerd");
    let after = std::fs::read_to_string(cluster.layout().state_file()).unwrap();
    assert_ne!(before, after, "state.json not updated");
    assert!(
        after.contains(&format!("\"pid\": {}", restart.new_pid)),
        "{after}"
    );
    // ... and the restarted runtime runs and stops pods.
    running_pod(&client, "after-restart").await;
    delete(&client, "after-restart").await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    wait::until(
        "pod after-restart to be deleted by the kubelet",
        Duration::from_secs(60),
        Duration::from_millis(500),
        || {
            let pods = pods.clone();
            async move {
                match pods.get_opt("after-restart").await {
                    Ok(None) => Poll::Ready(()),
                    other => Poll::Pending(format!("{:?}", other.map(|p| p.is_some()))),
                }
            }
        },
    )
    .await
    .unwrap();
    assert_down_clean(cluster).await;
}
