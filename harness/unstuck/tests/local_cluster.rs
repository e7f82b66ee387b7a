//! The local provider against real components: a cluster comes up, runs a
//! pod, deletes a namespace, computes a real APIService condition, and
//! goes down leaving nothing behind, also when its harness is killed.
//! Needs root and the components built by ci/setup.sh (CI runs both).

use std::{
    io::{BufRead, BufReader},
    process::{Command, Stdio},
    time::Duration,
};

use k8s_openapi::{
    api::core::v1::{Namespace, Pod},
    kube_aggregator::pkg::apis::apiregistration::v1::APIService,
};
use kube::{
    Api,
    api::{DeleteParams, PostParams},
};
use unstuck::{
    cluster::{
        exits::Restart,
        local::{self},
    },
    wait::{self, Poll},
};

mod common;

#[tokio::test(flavor = "current_thread")]
async fn a_local_cluster_runs_a_pod_deletes_a_namespace_reports_apiservices_and_leaves_nothing() {
    let cluster = common::up(&common::cluster_name("it-lifecycle")).await;
    let layout = cluster.layout().clone();
    let client = cluster.client();

    // A busybox pod reaches Running.
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &common::from_json(serde_json::json!({"metadata": {"name": "it-demo"}})),
        )
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "it-demo");
    let pod: Pod = common::from_json(serde_json::json!({
        "metadata": {"name": "bb"},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "c", "image": local::config::TEST_IMAGE, "imagePullPolicy": "Never",
                            "command": ["sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1; done"]}]
        }
    }));
    pods.create(&PostParams::default(), &pod).await.unwrap();
    wait::until(
        "pod it-demo/bb to be Running",
        Duration::from_secs(90),
        Duration::from_millis(500),
        || {
            let pods = pods.clone();
            async move {
                match pods.get("bb").await.map(|p| p.status.and_then(|s| s.phase)) {
                    Ok(Some(phase)) if phase == "Running" => Poll::Ready(()),
                    other => Poll::Pending(format!("{other:?}")),
                }
            }
        },
    )
    .await
    .unwrap();

    // Deleting the namespace removes it (and the pod) for real.
    namespaces
        .delete("it-demo", &DeleteParams::default())
        .await
        .unwrap();
    wait::until(
        "namespace it-demo to be gone",
        Duration::from_secs(120),
        Duration::from_millis(500),
        || {
            let namespaces = namespaces.clone();
            async move {
                match namespaces.get_opt("it-demo").await {
                    Ok(None) => Poll::Ready(()),
                    other => Poll::Pending(format!(
                        "{:?}",
                        other.map(|n| n.and_then(|n| n.status).and_then(|s| s.phase))
                    )),
                }
            }
        },
    )
    .await
    .unwrap();

    // The aggregator computes Available=False (ServiceNotFound) for a registration whose Service is missing.
    let apiservices: Api<APIService> = Api::all(client.clone());
    let svc: APIService = common::from_json(serde_json::json!({
        "metadata": {"name": "v1beta1.metrics.k8s.io"},
        "spec": {"group": "metrics.k8s.io", "version": "v1beta1", "groupPriorityMinimum": 100, "versionPriority": 100,
                 "insecureSkipTLSVerify": true, "service": {"name": "prometheus-adapter", "namespace": "monitoring"}}
    }));
    apiservices
        .create(&PostParams::default(), &svc)
        .await
        .unwrap();
    let (reason, message) = wait::until(
        "APIService v1beta1.metrics.k8s.io Available=False",
        Duration::from_secs(60),
        Duration::from_millis(500),
        || {
            let apiservices = apiservices.clone();
            async move {
                let got = apiservices.get("v1beta1.metrics.k8s.io").await;
                let cond = got
                    .ok()
                    .and_then(|a| a.status)
                    .and_then(|s| s.conditions)
                    .and_then(|c| c.into_iter().find(|c| c.type_ == "Available"));
                match cond {
                    Some(c) if c.status == "False" => {
                        Poll::Ready((c.reason.unwrap_or_default(), c.message.unwrap_or_default()))
                    }
                    other => Poll::Pending(format!("{other:?}")),
                }
            }
        },
    )
    .await
    .unwrap();
    assert_eq!(reason, "ServiceNotFound", "message: {message}");
    assert!(
        message.contains("service/prometheus-adapter in \"monitoring\" is not present"),
        "{message}"
    );

    // Down leaves no process, mount, link, cgroup or directory.
    let report = cluster.down().await;
    assert!(report.errors.is_empty(), "teardown problems: {report}");
    assert!(
        report.stopped.contains(&"kubelet".to_string())
            && report.stopped.contains(&"etcd".to_string()),
        "{report}"
    );
    let left = local::leftovers(&layout);
    assert!(left.is_empty(), "left behind: {left:#?}");
}

#[tokio::test(flavor = "current_thread")]
async fn a_killed_harness_takes_its_cluster_with_it() {
    // `cluster up --hold` owns its cluster the way `unstuck run` does.
    let name = common::cluster_name("it-killed");
    let mut child = Command::new(env!("CARGO_BIN_EXE_unstuck"))
        .args(["cluster", "up", &name, "--hold"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    // Keep reading to the end, so the harness never writes to a closed pipe.
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if line.contains("is up") {
                let _ = tx.send(());
            }
        }
    });
    let up = tokio::task::spawn_blocking(move || rx.recv_timeout(Duration::from_secs(240)).is_ok());
    assert!(
        up.await.unwrap(),
        "the holding harness never reported the cluster up"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        child.try_wait().unwrap().is_none(),
        "the holding harness must still be running when it is killed"
    );
    let layout = local::list()
        .into_iter()
        .find(|c| c.name == name)
        .expect("cluster listed");
    let layout = local::Layout::new(&name, layout.slot.unwrap(), layout.dir.parent().unwrap());
    assert!(
        !local::leftovers(&layout).is_empty(),
        "a running cluster has processes and links"
    );

    child.kill().unwrap(); // SIGKILL: no handler runs in the harness.
    child.wait().unwrap();
    wait::until(
        format!("the reaper to remove everything of {name}"),
        Duration::from_secs(60),
        Duration::from_millis(500),
        || {
            let left = local::leftovers(&layout);
            async move {
                if left.is_empty() {
                    Poll::Ready(())
                } else {
                    Poll::Pending(left.join(", "))
                }
            }
        },
    )
    .await
    .unwrap();
}

/// The pid state.json records for component `name` of the cluster in `dir`.
fn recorded_pid(dir: &std::path::Path, name: &str) -> i32 {
    let state = local::ClusterState::load(dir).unwrap().expect("state.json");
    state
        .components
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("{name} recorded"))
        .process
        .pid
}

fn kill(pid: i32, sig: &str) {
    let status = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status()
        .unwrap();
    assert!(status.success(), "kill -{sig} {pid}: {status}");
}

#[tokio::test(flavor = "current_thread")]
async fn a_control_plane_component_that_exits_is_restarted_and_its_exit_recorded() {
    let cluster = common::up(&common::cluster_name("it-supervised")).await;
    let layout = cluster.layout().clone();
    let client = cluster.client();
    let exits = cluster.component_exits();
    assert!(exits.is_empty(), "{:?}", exits.all());

    // kube-controller-manager dies, as it does when its lease is lost.
    let old = recorded_pid(&layout.dir, "kube-controller-manager");
    kill(old, "KILL");
    let exit = wait::until(
        "the supervisor to restart kube-controller-manager",
        Duration::from_secs(30),
        Duration::from_millis(200),
        || {
            let all = exits.all();
            async move {
                match all.first() {
                    Some(e) if e.restart != Restart::Pending => Poll::Ready(e.clone()),
                    other => Poll::Pending(format!("{other:?}")),
                }
            }
        },
    )
    .await
    .unwrap();
    assert_eq!(exit.component, "kube-controller-manager");
    assert!(exit.status.contains("signal: 9"), "{exit}");
    let Restart::Supervisor { pid: new } = exit.restart else {
        panic!("restarted by the supervisor: {exit}");
    };
    assert_ne!(new, old);
    assert_eq!(
        recorded_pid(&layout.dir, "kube-controller-manager"),
        new,
        "state.json names the new process, so down and the reaper stop it"
    );
    assert!(
        std::path::Path::new(&format!("/proc/{new}")).exists(),
        "the restarted kube-controller-manager runs"
    );

    // Its controllers work again: a namespace with content is deleted
    // (the namespace controller runs only in a leading controller-manager).
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &common::from_json(serde_json::json!({"metadata": {"name": "it-after-restart"}})),
        )
        .await
        .unwrap();
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(client.clone(), "it-after-restart");
    cms.create(
        &PostParams::default(),
        &common::from_json(serde_json::json!({"metadata": {"name": "content"}})),
    )
    .await
    .unwrap();
    namespaces
        .delete("it-after-restart", &DeleteParams::default())
        .await
        .unwrap();
    wait::until(
        "namespace it-after-restart to be gone",
        Duration::from_secs(120),
        Duration::from_millis(500),
        || {
            let namespaces = namespaces.clone();
            async move {
                match namespaces.get_opt("it-after-restart").await {
                    Ok(None) => Poll::Ready(()),
                    other => {
                        Poll::Pending(format!("{:?}", other.map(|n| n.and_then(|n| n.status))))
                    }
                }
            }
        },
    )
    .await
    .unwrap();

    // Once a teardown has begun (here: marked as `unstuck cluster down`
    // from another process marks it), nothing is restarted.
    local::state::mark_tearing_down(&layout.dir).expect("marking the teardown");
    let scheduler = recorded_pid(&layout.dir, "kube-scheduler");
    kill(scheduler, "KILL");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        recorded_pid(&layout.dir, "kube-scheduler"),
        scheduler,
        "a cluster being torn down gets no restarts: {:?}",
        exits.all()
    );
    assert_eq!(exits.len(), 1, "{:?}", exits.all());

    let report = cluster.down().await;
    assert!(report.errors.is_empty(), "teardown problems: {report}");
    let left = local::leftovers(&layout);
    assert!(left.is_empty(), "left behind: {left:#?}");
}
