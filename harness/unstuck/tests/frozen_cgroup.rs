//! Frozen cgroups against a real kubelet, containerd and runc (cgroup v1,
//! the local provider). Two pods on one cluster:
//!
//! - `own`: only its app container's cgroup is frozen. runc reads that
//!   cgroup as paused and thaws it when it sends SIGKILL, so the pod goes
//!   by itself: a frozen container cgroup is no stuck pod.
//! - `web`: the pod's cgroup is frozen (the `freezeCgroup` fault). runc
//!   reads the containers' cgroups, frozen only through it, as thawed and
//!   thaws nothing; the pod stays Terminating with `FailedKillPod`. The
//!   node doctor must name `CgroupFrozen` (not a kernel stall), prove the
//!   freeze is the pod's own, thaw it, and the kubelet finish the pod: no
//!   force delete, nothing left.
//!
//! With `UNSTUCK_RECORD_NODE_FIXTURES=<dir>` the stuck pod's facts and the
//! heal report are written to `<dir>/frozen-cgroup/` (how unstuck-core's
//! `tests/recorded/node/frozen-cgroup/` was made).

use std::{
    path::PathBuf,
    time::{Duration, Instant},
};

use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api, Client,
    api::{DeleteParams, PostParams},
};
use unstuck::{
    cluster::local::{self, LocalNode},
    doctor::node::{HealOptions, HealOutcome, gather, heal_pod},
    faults::{Placed, freeze_cgroup},
    node::cgroup,
};
use unstuck_core::doctor::node::{
    CgroupVersion, DiagnoseNodeOptions, FreezerState, NodeCause, NodeRemedy, ThawVerdict,
    diagnose_pod, freezer::CgroupRole, plan_node,
};

mod common;

/// Thaws the cgroups it names when dropped, so a failing assertion never
/// leaves frozen processes that no teardown can kill.
struct ThawOnDrop(Vec<PathBuf>);

impl Drop for ThawOnDrop {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = std::fs::write(p.join("freezer.state"), "THAWED");
        }
    }
}

async fn running_pod(client: &Client, name: &str) -> Pod {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod: Pod = common::from_json(serde_json::json!({
        "metadata": {"name": name},
        "spec": {
            "terminationGracePeriodSeconds": 2,
            "containers": [{"name": "app", "image": local::config::TEST_IMAGE, "imagePullPolicy": "Never",
                            "command": ["sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1; done"]}]
        }
    }));
    pods.create(&PostParams::default(), &pod).await.unwrap();
    common::wait_running(&pods, name).await
}

async fn gone(client: &Client, name: &str, within: Duration) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    common::wait_gone(&pods, name, within, Duration::from_millis(500))
        .await
        .unwrap();
}

#[tokio::test(flavor = "current_thread")]
async fn runc_thaws_a_frozen_container_but_a_frozen_pod_cgroup_needs_the_doctor() {
    let cluster = common::up(&common::cluster_name("it-frozen-cgroup")).await;
    let client = cluster.client();
    let node = LocalNode::of(&cluster);
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");

    // `own`: freeze only its app container's cgroup.
    let own = running_pod(&client, "own").await;
    let own_uid = own.metadata.uid.clone().unwrap();
    let app_id = own
        .status
        .as_ref()
        .unwrap()
        .container_statuses
        .as_ref()
        .unwrap()[0]
        .container_id
        .clone()
        .unwrap();
    let app_id = app_id.rsplit("://").next().unwrap().to_owned();
    let app_cgroup = cgroup::pod_cgroups(&node, &own_uid)
        .await
        .unwrap()
        .into_iter()
        .find(|c| {
            c.version == CgroupVersion::V1
                && c.role(&own_uid) == Some(CgroupRole::Container(app_id.clone()))
        })
        .expect("the app container's v1 freezer cgroup");
    let mut guard = ThawOnDrop(vec![app_cgroup.path.clone()]);
    let frozen = cgroup::set_frozen(&node, &app_cgroup.path, CgroupVersion::V1, true)
        .await
        .unwrap();
    assert_eq!(frozen.state(), FreezerState::Frozen, "{frozen:?}");
    assert!(frozen.frozen_here(), "{frozen:?}");
    pods.delete("own", &DeleteParams::default()).await.unwrap();
    // runc's kill thaws it: gone by itself, long before the doctor's
    // threshold would even call it stuck.
    gone(&client, "own", Duration::from_secs(120)).await;

    // `web`: the pod's own cgroup frozen, the way the fault does it.
    let web = running_pod(&client, "web").await;
    let uid = web.metadata.uid.clone().unwrap();
    // Revert undoes the fault (what a failed run's cleanup does), once.
    let first = freeze_cgroup::inject(&client, &node, "default", "web")
        .await
        .expect("freeze the pod's cgroup");
    let f1_path = first.path.clone();
    guard.0.push(f1_path.clone());
    let undone = first.revert(&node).await.expect("revert");
    assert!(
        undone.len() == 1 && undone[0].starts_with("thawed"),
        "{undone:?}"
    );
    let after = cgroup::read_cgroup(&node, &f1_path, CgroupVersion::V1)
        .await
        .unwrap();
    assert_eq!(after.state(), FreezerState::Thawed, "{after:?}");
    assert!(first.revert(&node).await.unwrap().is_empty());
    let f = freeze_cgroup::inject(&client, &node, "default", "web")
        .await
        .expect("freeze the pod's cgroup");
    assert_eq!(f.version, CgroupVersion::V1);
    assert!(f.path.ends_with(format!("pod{uid}")), "{f:?}");
    guard.0.push(f.path.clone());
    eprintln!("{}", f.describe());
    pods.delete("web", &DeleteParams::default()).await.unwrap();

    let deadline = Instant::now() + Duration::from_secs(240);
    let (facts, finding) = loop {
        let facts = gather(&client, &node, "default", "web", 16 << 20)
            .await
            .unwrap()
            .expect("the pod stays while its cgroup is frozen");
        let finding = diagnose_pod(&facts, &DiagnoseNodeOptions::default());
        let killed = facts
            .pod_events
            .iter()
            .any(|e| e.reason.as_deref() == Some("FailedKillPod"));
        if finding.stuck && finding.causes.contains(&NodeCause::CgroupFrozen) && killed {
            break (facts, finding);
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for CgroupFrozen and FailedKillPod; last finding: {finding:#?}"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    assert_eq!(
        finding.causes,
        vec![NodeCause::CgroupFrozen],
        "{finding:#?}"
    );
    assert!(
        finding.kernel_stalls.is_empty(),
        "a frozen task called a kernel stall: {finding:#?}"
    );
    assert!(
        !finding.summary.contains("waits in the kernel"),
        "{}",
        finding.summary
    );
    let z = finding.frozen.as_ref().expect("the freezer's hold");
    assert_eq!(z.own[0].path, f.path);
    assert!(
        !z.frozen_pids.is_empty()
            && facts
                .processes
                .iter()
                .all(|p| z.frozen_pids.contains(&p.pid) && p.state == 'D'),
        "every process of the pod is frozen: {:#?}",
        facts.processes
    );
    assert!(
        matches!(&z.verdict, ThawVerdict::Thaw { targets, .. } if targets.len() == 1 && targets[0].path == f.path),
        "{:#?}",
        z.verdict
    );
    // The runtime still calls every task RUNNING: no pause through it.
    assert!(
        facts.runtime.tasks.iter().all(|t| t.status == "RUNNING"),
        "{:#?}",
        facts.runtime.tasks
    );
    let plan = plan_node(&finding);
    assert!(
        matches!(plan[0].remedy, NodeRemedy::ThawCgroup { .. }),
        "{plan:#?}"
    );
    assert!(
        plan.iter().all(|s| !matches!(
            s.remedy,
            NodeRemedy::RestartRuntime | NodeRemedy::KillShim { .. }
        )),
        "{plan:#?}"
    );

    let report = heal_pod(
        &client,
        &node,
        "default",
        "web",
        &HealOptions {
            apply: true,
            ..Default::default()
        },
    )
    .await
    .expect("heal");
    if let Some(dir) = std::env::var_os("UNSTUCK_RECORD_NODE_FIXTURES") {
        let dir = PathBuf::from(dir).join("frozen-cgroup");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("facts.json"),
            serde_json::to_string_pretty(&facts).unwrap(),
        )
        .unwrap();
        std::fs::write(
            dir.join("report.json"),
            serde_json::to_string_pretty(&report).unwrap(),
        )
        .unwrap();
    }
    eprintln!("{}", serde_json::to_string_pretty(&report).unwrap());
    assert_eq!(report.outcome, HealOutcome::Recovered, "{report:#?}");
    assert!(report.recovered_without_force(), "{report:#?}");
    assert_eq!(report.steps.len(), 1, "{report:#?}");
    assert_eq!(report.steps[0].step.remedy.name(), "ThawCgroup");
    assert!(report.steps[0].ok, "{report:#?}");
    assert!(
        report
            .proof
            .iter()
            .any(|p| p.contains("cgroup") && !p.contains("still frozen")),
        "{:#?}",
        report.proof
    );
    let undone = f.revert(&node).await.expect("revert after heal");
    assert!(undone.is_empty(), "revert found work left: {undone:?}");
    drop(guard);

    let layout = cluster.layout().clone();
    let down = cluster.down().await;
    assert!(down.errors.is_empty(), "teardown problems: {down}");
    let left = local::leftovers(&layout);
    assert!(left.is_empty(), "left behind: {left:#?}");
}
