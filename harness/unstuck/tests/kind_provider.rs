//! The kind provider end to end, on kind clusters made from the offline
//! node image (`ci/kind/setup.sh` builds it; nothing is pulled):
//! an API-level and a node-level scenario of scenarios/ pass on one, a run
//! that fails with a node fault in place leaves no fault behind, and after
//! passed, failed, interrupted (Ctrl-C) and killed runs no kind cluster,
//! container, volume, network or record is left.
//! Needs root, Docker and the node image; never skipped.

use std::{
    path::Path,
    process::Command,
    sync::Arc,
    time::{Duration, Instant},
};

use unstuck::{
    cluster::{
        exits::Restart,
        kind::{self, KindCluster, KindOptions},
        provider::{ProvidedCluster, ProviderKind},
    },
    components::DEFAULT_K8S_VERSION,
    docker::Docker,
    node::AnyNode,
    runner::{Outcome, RunContext, run_scenario},
    wait::{self, Poll},
};
use unstuck_core::scenario::{Scenario, load_str};

mod common;

fn suite_scenario(name: &str) -> Scenario {
    unstuck::core::scenario::load_dir(&common::repo_root().join("scenarios"))
        .expect("scenarios load")
        .into_iter()
        .find(|s| s.name.as_str() == name)
        .unwrap_or_else(|| panic!("no scenario {name}"))
}

/// What Docker and the record directory still hold of kind cluster `name`.
async fn leftovers(name: &str, state_root: &Path) -> Vec<String> {
    let mut left = common::kind_leftovers(name).await;
    if state_root.join(name).exists() {
        left.push(format!("record {}", state_root.join(name).display()));
    }
    left
}

/// Waits (polling) until `name` has nothing left, or panics with what is.
async fn assert_gone_within(name: &str, state_root: &Path, limit: Duration) {
    let start = Instant::now();
    loop {
        let left = leftovers(name, state_root).await;
        if left.is_empty() {
            return;
        }
        assert!(
            start.elapsed() < limit,
            "kind cluster {name} left after {limit:?}: {left:?}"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_api_and_a_node_scenario_pass_on_a_kind_cluster_which_leaves_nothing() {
    let name = common::cluster_name("it-kind");
    let mut opts = KindOptions::new(&name, DEFAULT_K8S_VERSION);
    opts.reaper = Some(env!("CARGO_BIN_EXE_unstuck").into());
    let cluster = KindCluster::up(opts).await.expect("kind cluster up");
    assert_eq!(cluster.info().name, ProviderKind::Kind);
    assert_eq!(
        cluster.info().node_image.as_deref(),
        Some(kind::node_image(DEFAULT_K8S_VERSION).as_str())
    );
    let version = cluster.client().apiserver_version().await.expect("version");
    assert_eq!(version.git_version, DEFAULT_K8S_VERSION);

    let node: Arc<AnyNode> = ProvidedCluster::node(&cluster);
    let out = common::Scratch::path("unstuck-kind-test");
    let ctx = |scenario: &str| RunContext {
        client: cluster.client(),
        fixtures_dir: common::repo_root().join("fixtures"),
        out_dir: out.join(scenario),
        node: Some(node.clone()),
        cluster_exits: cluster.component_exits(),
        journal: None,
    };

    // One API-level case and one node-level case, side by side as a run
    // lays them out (the node one would have a cluster of its own there).
    let api = suite_scenario("orphan-finalizer-configmap");
    let on_node = suite_scenario("busy-volume-mount");
    let (api_ctx, node_ctx) = (ctx("api"), ctx("node"));
    let (api_report, node_report) = tokio::join!(
        run_scenario(&api_ctx, &api),
        run_scenario(&node_ctx, &on_node)
    );
    for r in [&api_report, &node_report] {
        // Its folder goes with `out`: kept first when it failed.
        let failed = match r.passed() {
            true => String::new(),
            false => format!(
                "{}\nkept in {} (scenario.json has its steps)",
                common::scenario_failure(r),
                common::keep_evidence(&r.out_dir, &format!("kind-scenario-{}", r.name())).display()
            ),
        };
        assert_eq!(
            r.outcome,
            Outcome::Passed,
            "{} on kind:\n{failed}",
            r.name()
        );
        assert!(r.cleanup.leaked.is_empty(), "{:?}", r.cleanup);
        assert!(!r.remedies.is_empty(), "{} recovered by a remedy", r.name());
    }
    // The kubelet's own words, read from the node's journal.
    assert!(
        node_report
            .symptoms
            .iter()
            .any(|s| s.contains("UnmountVolume.TearDown failed")),
        "{:?}",
        node_report.symptoms
    );

    // A run that fails with the busy mount in place still removes it.
    let failing = load_str(
        "name: kind-busy-then-fail
description: a busy mount, then a gate that cannot pass
namespaces: [app]
timeout: 4m
steps:
  - apply: {file: node/web-pod.yaml, namespace: app}
  - expect: {phase: symptom, timeout: 120s, that: [{running: {kind: Pod, name: web, namespace: app}}]}
  - fault: {busyMount: {pod: web, namespace: app}}
  - delete: {kind: Pod, name: web, namespace: app}
  - expect: {phase: symptom, timeout: 5s, that: [{gone: {kind: Pod, name: web, namespace: app}}]}
",
        Path::new("kind-busy-then-fail.yaml"),
    )
    .expect("test scenario loads");
    let failed = run_scenario(&ctx("failing"), &failing).await;
    assert!(
        matches!(failed.outcome, Outcome::Failed { .. }),
        "{:?}",
        failed.outcome
    );
    assert!(
        !failed.cleanup.reverted.is_empty(),
        "the fault was reverted: {:?}",
        failed.cleanup
    );
    let busy: Vec<_> = node
        .mounts()
        .await
        .expect("node mounts")
        .into_iter()
        .filter(|m| m.source.contains("unstuck-busy"))
        .collect();
    assert!(busy.is_empty(), "busy mounts left: {busy:?}");

    // The node's kubelet restarts a control-plane static pod that exits
    // (kube-controller-manager after "leaderelection lost"); the cluster
    // records the exit, for the reports of the scenarios running then.
    let exits = cluster.component_exits();
    assert!(exits.is_empty(), "{:?}", exits.all());
    let kcm = node
        .processes()
        .await
        .expect("node processes")
        .into_iter()
        .find(|p| {
            p.cmdline
                .first()
                .is_some_and(|a| a.ends_with("kube-controller-manager"))
        })
        .expect("kube-controller-manager runs on the node");
    node.signal(kcm.pid, 9)
        .await
        .expect("SIGKILL kube-controller-manager");
    let exit = wait::until(
        "the restart of kube-controller-manager to be recorded",
        Duration::from_secs(90),
        Duration::from_millis(500),
        || {
            let all = exits.all();
            async move {
                match all.first() {
                    Some(e) => Poll::Ready(e.clone()),
                    None => Poll::Pending("no exit recorded yet".to_string()),
                }
            }
        },
    )
    .await
    .expect("the exit is recorded");
    eprintln!("recorded: {exit}");
    assert_eq!(exit.component, "kube-controller-manager", "{exit}");
    assert!(
        matches!(exit.restart, Restart::Kubelet { restart_count: 1 }),
        "{exit}"
    );
    assert!(
        exit.status.contains("137"),
        "SIGKILL is exit code 137: {exit}"
    );

    let logs = out.join("cluster-logs");
    ProvidedCluster::export_logs(&cluster, &logs)
        .await
        .expect("kind export logs");
    assert!(
        std::fs::read_dir(&logs).expect("logs dir").count() > 0,
        "kind export logs wrote nothing to {}",
        logs.display()
    );

    let teardown = ProvidedCluster::delete(Box::new(cluster)).await;
    assert!(teardown.problems.is_empty(), "{teardown}");
    assert_gone_within(&name, &kind::kind_root(), Duration::from_secs(1)).await;
}

/// Starts `unstuck ARGS` with its own kind record directory; returns the
/// child and a channel of its output lines.
fn unstuck(
    args: &[&str],
    state_root: &Path,
) -> (std::process::Child, std::sync::mpsc::Receiver<String>) {
    common::spawn_unstuck(args, &[("UNSTUCK_KIND_STATE_DIR", state_root.as_os_str())])
}

fn wait_exit(child: &mut std::process::Child, limit: Duration) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return status;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("unstuck did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The one kind cluster record a child made under `state_root`.
fn recorded_cluster(state_root: &Path) -> String {
    let names: Vec<String> = std::fs::read_dir(state_root)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        names.len(),
        1,
        "records under {}: {names:?}",
        state_root.display()
    );
    names[0].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupted_and_killed_kind_runs_leave_nothing() {
    let state_root = common::Scratch::path("unstuck-kind-records");
    let out = state_root.sibling("runs");
    let root = common::repo_root();

    // Ctrl-C while a scenario runs: it cleans up, the cluster is deleted.
    let interrupted = state_root.join("interrupted");
    let (mut run, lines) = unstuck(
        &[
            "run",
            "--provider",
            "kind",
            "--filter",
            "orphan-finalizer-configmap",
            "--clusters",
            "0",
            "--scenarios",
            root.join("scenarios").to_str().unwrap(),
            "--fixtures",
            root.join("fixtures").to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
        &interrupted,
    );
    common::wait_for_line(&lines, "[unstuck] start  ", Duration::from_secs(400));
    let name = recorded_cluster(&interrupted);
    let _ = Command::new("kill")
        .args(["-INT", &run.id().to_string()])
        .status();
    let status = wait_exit(&mut run, Duration::from_secs(240));
    assert!(!status.success(), "an interrupted run does not pass");
    assert_gone_within(&name, &interrupted, Duration::from_secs(5)).await;

    // A harness killed outright: its reaper deletes the cluster.
    let killed = state_root.join("killed");
    let held = common::cluster_name("it-kind-held");
    let (mut up, lines) = unstuck(
        &["cluster", "up", "--provider", "kind", "--hold", &held],
        &killed,
    );
    common::wait_for_line(&lines, "is up", Duration::from_secs(400));
    assert!(!leftovers(&held, &killed).await.is_empty(), "it is up");
    up.kill().expect("SIGKILL the harness");
    let _ = up.wait();
    assert_gone_within(&held, &killed, Duration::from_secs(240)).await;
}

/// Every scenario of scenarios/ on kind, as `unstuck run --provider kind`
/// lays them out (the ones that must run alone each on a kind cluster of
/// its own), in the same report format as the local provider; afterwards
/// no kind cluster of the run is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_whole_suite_passes_on_kind() {
    let state_root = common::Scratch::path("unstuck-kind-suite");
    let out = state_root.sibling("runs");
    let root = common::repo_root();
    let (mut run, _lines) = unstuck(
        &[
            "run",
            "--provider",
            "kind",
            // Three kind clusters at once at most beside the shared one:
            // each is a whole control plane on this 2-core machine.
            "--clusters",
            "3",
            "--scenarios",
            root.join("scenarios").to_str().unwrap(),
            "--fixtures",
            root.join("fixtures").to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
        &state_root,
    );
    let status = wait_exit(&mut run, Duration::from_secs(1500));
    let folder = std::fs::read_dir(&out)
        .expect("run folder")
        .flatten()
        .map(|e| e.path())
        .find(|p| p.join("report.json").exists())
        .expect("a report");
    let report: unstuck::report::RunReport =
        serde_json::from_str(&std::fs::read_to_string(folder.join("report.json")).unwrap())
            .expect("report.json parses");
    // The run's folder goes with `out`: kept first when a scenario failed.
    let failed = match report.all_passed() {
        true => String::new(),
        false => common::run_failure(&out, "kind-suite"),
    };
    assert!(report.all_passed(), "failed on kind:\n{failed}");
    assert!(status.success(), "unstuck run exited {status}");
    let all = unstuck::core::scenario::load_dir(&root.join("scenarios")).unwrap();
    assert_eq!(report.scenarios.len(), all.len());
    assert_eq!(report.provider.name, ProviderKind::Kind);
    assert!(
        std::fs::read_to_string(folder.join("junit.xml"))
            .unwrap()
            .contains("provider kind (node image unstuck.local/kind-node:"),
        "the JUnit suite names the provider and image"
    );
    let leaked: Vec<String> = report
        .scenarios
        .iter()
        .flat_map(|s| s.cleanup.leaked.clone())
        .collect();
    assert!(leaked.is_empty(), "{leaked:?}");
    let records: Vec<_> = std::fs::read_dir(&state_root)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(records.is_empty(), "kind records left: {records:?}");
    let docker = Docker::default();
    for s in &report.scenarios {
        if let Some(c) = &s.isolated {
            assert!(
                docker
                    .containers_labelled(kind::CLUSTER_LABEL, &c.name)
                    .await
                    .unwrap()
                    .is_empty(),
                "{} left",
                c.name
            );
        }
    }
}
