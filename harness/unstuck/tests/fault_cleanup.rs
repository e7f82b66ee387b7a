//! After a run that failed or was interrupted with a node fault in place,
//! nothing of the fault is left: no injected mount, no stopped process, no
//! stopped kubelet, no test pod. Real local cluster; needs root and
//! ci/setup.sh's components.

use std::{path::Path, sync::Arc, time::Duration};

use unstuck::{
    cluster::local::LocalNode,
    host,
    node::{AnyNode, Node},
    runner::{Outcome, RunContext, run_scenario, run_scenario_until},
};
use unstuck_core::scenario::load_str;

mod common;

fn scenario(name: &str, fault: &str, last_step: &str) -> unstuck_core::scenario::Scenario {
    let text = format!(
        "name: {name}
description: a node fault, then a step that cannot pass
namespaces: [app]
timeout: 4m
steps:
  - apply: {{file: node/web-pod.yaml, namespace: app}}
  - expect: {{phase: symptom, timeout: 90s, that: [{{running: {{kind: Pod, name: web, namespace: app}}}}]}}
  - fault: {{{fault}: {{pod: web, namespace: app}}}}
  - delete: {{kind: Pod, name: web, namespace: app}}
{last_step}
"
    );
    load_str(&text, Path::new(&format!("{name}.yaml"))).expect("test scenario loads")
}

/// What a fault could leave behind on the node of `cluster_dir`.
fn fault_leftovers(cluster_dir: &Path) -> Vec<String> {
    let mut left: Vec<String> = host::mounts_under(&cluster_dir.join("kubelet/pods"))
        .into_iter()
        .filter(|m| {
            m.mount_point.to_string_lossy().contains("unstuck-busy")
                || m.source.contains("unstuck-busy")
        })
        .map(|m| format!("mount {}", m.mount_point.display()))
        .collect();
    let dir = cluster_dir.display().to_string();
    left.extend(
        host::processes()
            .into_iter()
            .filter(|p| p.state == 'T' && p.cmdline.iter().any(|a| a.contains(&dir)))
            .map(|p| format!("stopped process {} ({})", p.pid, p.command_line())),
    );
    left
}

fn assert_clean(report: &unstuck::runner::ScenarioReport, cluster_dir: &Path) {
    assert!(
        !report.cleanup.reverted.is_empty(),
        "the fault was reverted: {:?}",
        report.cleanup
    );
    assert!(
        report.cleanup.leaked.is_empty(),
        "cleanup leaked {:?}",
        report.cleanup.leaked
    );
    let left = fault_leftovers(cluster_dir);
    assert!(left.is_empty(), "left on the node: {left:?}");
}

#[tokio::test(flavor = "current_thread")]
async fn failed_and_interrupted_runs_leave_no_fault_on_the_node() {
    let cluster = common::up(&common::cluster_name("it-fault-cleanup")).await;
    let dir = cluster.layout().dir.clone();
    let fixtures = common::repo_root().join("fixtures");
    let out = common::Scratch::path("unstuck-fault-cleanup");
    let ctx = |name: &str| RunContext {
        client: cluster.client(),
        fixtures_dir: fixtures.clone(),
        out_dir: out.join(name),
        node: Some(Arc::new(LocalNode::of(&cluster)) as Arc<AnyNode>),
        cluster_exits: cluster.component_exits(),
        journal: None,
    };
    // The busy mount keeps the pod, so this gate fails.
    let cannot_pass = "  - expect: {phase: symptom, timeout: 5s, that: [{gone: {kind: Pod, name: web, namespace: app}}]}";

    let failed_mount = run_scenario(
        &ctx("mount"),
        &scenario("busy-then-fail", "busyMount", cannot_pass),
    )
    .await;
    assert!(
        matches!(failed_mount.outcome, Outcome::Failed { step: 5, .. }),
        "{:?}",
        failed_mount.outcome
    );
    assert_clean(&failed_mount, &dir);

    let failed_shim = run_scenario(
        &ctx("shim"),
        &scenario("wedge-then-fail", "wedgeShim", cannot_pass),
    )
    .await;
    assert!(
        matches!(failed_shim.outcome, Outcome::Failed { step: 5, .. }),
        "{:?}",
        failed_shim.outcome
    );
    assert_clean(&failed_shim, &dir);

    // Interrupted (Ctrl-C of a run) while waiting with a stopped shim in place.
    let waits = "  - expect: {phase: symptom, timeout: 3m, that: [{gone: {kind: Pod, name: web, namespace: app}}]}";
    let (cancel, cancelled) = tokio::sync::watch::channel(false);
    let interrupter = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(20)).await;
        let _ = cancel.send(true);
    });
    let interrupted = run_scenario_until(
        &ctx("interrupted"),
        &scenario("wedge-interrupted", "wedgeShim", waits),
        cancelled,
    )
    .await;
    interrupter.await.unwrap();
    assert!(
        matches!(&interrupted.outcome, Outcome::Interrupted { reason, .. } if reason.contains("interrupted")),
        "{:?}",
        interrupted.outcome
    );
    assert_clean(&interrupted, &dir);

    // A stopped kubelet: revert starts it again, and it finishes the pod
    // (cleanup's own deletes need it too).
    let node = LocalNode::of(&cluster);
    let failed_kubelet = run_scenario(
        &ctx("kubelet"),
        &scenario("kubelet-then-fail", "stopKubelet", cannot_pass),
    )
    .await;
    assert!(
        matches!(failed_kubelet.outcome, Outcome::Failed { step: 5, .. }),
        "{:?}",
        failed_kubelet.outcome
    );
    assert_clean(&failed_kubelet, &dir);
    assert!(
        failed_kubelet
            .cleanup
            .reverted
            .iter()
            .any(|r| r.starts_with("started the kubelet")),
        "{:?}",
        failed_kubelet.cleanup
    );
    assert!(node.kubelet_running().await.unwrap(), "no kubelet runs");

    // A failed namespace-finalizer scenario: the doctor never ran, so the
    // finalizer its own manifest put on the namespace is still there.
    // Cleanup takes it off (the namespace is the run's, by UID) and the
    // namespace goes.
    let ns_finalizer = load_str(
        "name: ns-finalizer-then-fail
description: a namespace held by an orphan metadata finalizer, then a step that cannot pass
namespaces: [app]
timeout: 2m
steps:
  - apply: namespace-metadata-finalizer/namespace.yaml
  - apply: {file: namespace-metadata-finalizer/configmap.yaml, namespace: app}
  - delete: {kind: Namespace, name: app}
  - expect: {phase: symptom, timeout: 5s, that: [{gone: {kind: Namespace, name: app}}]}
",
        Path::new("ns-finalizer-then-fail.yaml"),
    )
    .expect("test scenario loads");
    let failed_ns = run_scenario(&ctx("namespace"), &ns_finalizer).await;
    assert!(
        matches!(failed_ns.outcome, Outcome::Failed { step: 4, .. }),
        "{:?}",
        failed_ns.outcome
    );
    assert!(
        failed_ns.cleanup.leaked.is_empty(),
        "cleanup leaked {:?}",
        failed_ns.cleanup.leaked
    );
    assert!(
        failed_ns
            .cleanup
            .forced
            .iter()
            .any(|f| f.starts_with("Namespace")),
        "the namespace's own finalizer was what cleanup had to take off: {:?}",
        failed_ns.cleanup
    );

    let report = cluster.down().await;
    assert!(report.errors.is_empty(), "{report}");
}
