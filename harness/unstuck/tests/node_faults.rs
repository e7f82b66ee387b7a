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

use k8s_openapi::api::core::v1::{ConfigMap, Event, Pod};
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

mod common;

fn from_json<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
    serde_json::from_value(v).expect("valid object")
}

/// Brings up a cluster named after `base`, unique to this test process.
async fn up(base: &str) -> LocalCluster {
    let mut opts = UpOptions::new(common::cluster_name(base));
    opts.reaper = Some(env!("CARGO_BIN_EXE_unstuck").into());
    LocalCluster::up(opts).await.expect("cluster up")
}

/// Creates `default/<name>` with an emptyDir `data` at /data and a
/// ConfigMap volume `cfg` mounted by subPath, and waits until it runs.
async fn running_pod(client: &Client, name: &str) -> Pod {
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let cm: ConfigMap = from_json(serde_json::json!({
        "metadata": {"name": format!("{name}-cfg")}, "data": {"x": "1"}
    }));
    cms.create(&PostParams::default(), &cm).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod: Pod = from_json(serde_json::json!({
        "metadata": {"name": name},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "c", "image": local::config::TEST_IMAGE, "imagePullPolicy": "Never",
                            "command": ["sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1; done"],
                            "volumeMounts": [{"name": "data", "mountPath": "/data"},
                                             {"name": "cfg", "mountPath": "/etc/cfg/x", "subPath": "x"}]}],
            "volumes": [{"name": "data", "emptyDir": {}},
                        {"name": "cfg", "configMap": {"name": format!("{name}-cfg")}}]
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
    let cluster = up(cluster_name).await;
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
            kind,
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
    let undone = injected.revert(&node).await.expect("revert after heal");
    assert!(undone.is_empty(), "revert found work left: {undone:?}");
    eprintln!(
        "timings: symptom after {symptom_after:.1?}, heal {} ms (pod gone after {:?} ms)",
        report.timings.total_ms, report.timings.pod_gone_ms
    );
    assert_down_clean(cluster).await;
}

/// Wedges pod `name`'s shim, and returns the fault.
async fn wedge(client: &Client, node: &LocalNode, name: &str) -> (Injected, String) {
    let pod = running_pod(client, name).await;
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
    injected: &Injected,
) -> (NodeFacts, NodeFinding) {
    let Injected::WedgedShim(wedged) = injected else {
        panic!("wrong fault: {injected:?}")
    };
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
            .any(|k| k.contains("KillContainerError") && k.contains("DeadlineExceeded")),
        "{:#?}",
        finding.kill_failures
    );
    (facts, finding)
}

#[tokio::test(flavor = "current_thread")]
async fn a_wedged_shim_keeps_a_pod_terminating_until_the_doctor_kills_it_or_restarts_the_runtime() {
    let cluster = up("it-node-wedge").await;
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
    for injected in [&killed, &restarted] {
        let Injected::WedgedShim(w) = injected else {
            unreachable!()
        };
        for s in &w.shims {
            assert!(s.find(&procs).is_none(), "shim {} still there", s.pid);
        }
        let undone = injected.revert(&node).await.expect("revert after heal");
        assert!(undone.is_empty(), "revert found work left: {undone:?}");
    }
    assert!(
        !procs
            .iter()
            .any(|p| p.state == 'T' && p.command_line().contains(&dir))
    );

    // The restarted runtime runs and stops pods, and `down` still finds it.
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
