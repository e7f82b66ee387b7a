//! `unstuck doctor --local-cluster NAME --apply --yes` on the node is
//! consented like an API write (issue 26, item 3): the node of a local
//! cluster is the person's own machine. A pod that became stuck after the
//! plan was printed is said and left, untouched; the pod that was shown is
//! healed with the rungs shown. Against a real kubelet and containerd,
//! with real busy mounts; needs root and the components ci/setup.sh builds.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api, Client,
    api::{DeleteParams, ListParams},
};
use unstuck::{
    cluster::local::{self, LocalNode},
    doctor::node::{HealOptions, HealOutcome, gather, heal_pod},
    faults::{
        Placed,
        busy_mount::{self, BusyKind, BusyMount, BusyMountOptions},
    },
    node::Node,
};
use unstuck_core::doctor::node::{DiagnoseNodeOptions, NodeCause, diagnose_pod};

mod common;

/// A running pod of `name` whose `data` volume a process of the node
/// holds (a nested mount), so that once deleted it stays Terminating.
async fn held_pod(client: &Client, node: &LocalNode, name: &str) -> BusyMount {
    common::running_pod_with_volumes(client, name).await;
    let busy = busy_mount::inject(
        client,
        node,
        "default",
        name,
        &BusyMountOptions {
            kind: BusyKind::NestedMount,
            holder: true,
            ..Default::default()
        },
    )
    .await
    .expect("inject busy mount");
    eprintln!("{}", busy.describe());
    busy
}

async fn delete(client: &Client, name: &str) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.delete(name, &DeleteParams::default()).await.unwrap();
}

/// Waits until the kubelet fails on the pod's busy volume past its grace,
/// and its next retry is at least `retry_in` away: a heal then waits that
/// long for the kubelet, which is when the test deletes a second pod.
async fn wait_stuck_on_volume(client: &Client, node: &LocalNode, name: &str, retry_in: Duration) {
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let facts = gather(client, node, "default", name, 16 << 20)
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("pod {name} left before it was stuck"));
        let f = diagnose_pod(
            &facts,
            &DiagnoseNodeOptions {
                stuck_after: Duration::from_secs(1),
            },
        );
        let far = f.next_kubelet_retry.is_some_and(|t| {
            t.duration_since(k8s_openapi::jiff::Timestamp::now())
                .as_secs_f64()
                >= retry_in.as_secs_f64()
        });
        if f.stuck && f.causes.contains(&NodeCause::BusyVolume) && !f.holders.is_empty() && far {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{name} never stuck on its volume: {f:#?}"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

async fn pod_uid(client: &Client, name: &str) -> Option<String> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.get_opt(name)
        .await
        .unwrap()
        .and_then(|p| p.metadata.uid)
}

#[tokio::test(flavor = "current_thread")]
async fn apply_yes_heals_only_the_pod_shown_and_says_what_it_left_on_the_node() {
    let name = common::cluster_name("it-node-consent");
    let cluster = common::up(&name).await;
    let client = cluster.client();
    let node = LocalNode::of(&cluster);

    let shown = held_pod(&client, &node, "shown").await;
    let later = held_pod(&client, &node, "later").await;
    let later_holder = later.holder.clone().expect("holder of later");
    let later_uid = pod_uid(&client, "later").await.expect("later exists");
    delete(&client, "shown").await;
    wait_stuck_on_volume(&client, &node, "shown", Duration::from_secs(15)).await;

    // The plan is printed with "Applying to ..." before anything is done;
    // only then does `later` get deleted, so the plan cannot hold it.
    let (mut child, rx) = common::spawn_unstuck(
        &[
            "doctor",
            "--local-cluster",
            &name,
            "--stuck-after",
            "1s",
            "--apply",
            "--yes",
        ],
        &[],
    );
    let mut lines = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    while !lines.iter().any(|l: &String| l.contains("Applying to")) {
        assert!(Instant::now() < deadline, "no plan printed: {lines:#?}");
        if let Ok(l) = rx.recv_timeout(Duration::from_secs(1)) {
            lines.push(l);
        }
    }
    // The plan is one write to stderr: what arrives with it is all of it.
    std::thread::sleep(Duration::from_millis(300));
    lines.extend(rx.try_iter());
    let plan_text = lines
        .iter()
        .skip_while(|l| !l.contains("Applying to"))
        .cloned()
        .collect::<Vec<_>>()
        .join("\n");
    delete(&client, "later").await;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < deadline + Duration::from_secs(480),
            "the doctor did not end: {lines:#?}"
        );
        while let Ok(l) = rx.try_recv() {
            lines.push(l);
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    std::thread::sleep(Duration::from_millis(300));
    lines.extend(rx.try_iter());
    let text = lines.join("\n");

    // What --yes covered was printed: the shown pod's ladder, and not the
    // pod deleted after it.
    assert!(
        plan_text.contains("pod default/shown") && plan_text.contains("ReleaseHolder"),
        "the node plan was not printed before applying:\n{plan_text}"
    );
    assert!(!plan_text.contains("default/later"), "{plan_text}");

    // Shown and healed; later: found, said, untouched; exit 6 (left).
    assert!(
        text.contains("pod default/shown -> Recovered"),
        "shown not healed:\n{text}"
    );
    assert!(
        text.contains("pod default/later -> NotShown"),
        "later not said as left:\n{text}"
    );
    assert!(
        text.contains("1 pod(s) on a node left"),
        "the closing line does not say a pod was left:\n{text}"
    );
    assert_eq!(status.code(), Some(6), "{text}");
    let procs = node.processes().await.unwrap();
    assert!(
        later_holder.find(&procs).is_some(),
        "a node step touched later's holder {}:\n{text}",
        later_holder.pid
    );
    assert_eq!(
        pod_uid(&client, "later").await.as_deref(),
        Some(later_uid.as_str()),
        "later is still there, stuck"
    );
    assert!(pod_uid(&client, "shown").await.is_none());

    // Its own heal, then nothing left.
    let healed = heal_pod(
        &client,
        &node,
        "default",
        "later",
        &HealOptions {
            apply: true,
            stuck_after: Duration::from_secs(1),
            ..Default::default()
        },
    )
    .await
    .expect("heal later");
    assert_eq!(healed.outcome, HealOutcome::Recovered, "{healed:#?}");
    for busy in [shown, later] {
        let undone = busy.revert(&node).await.expect("revert");
        assert!(undone.is_empty(), "revert found work left: {undone:?}");
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    assert!(
        pods.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    let layout = cluster.layout().clone();
    let report = cluster.down().await;
    assert!(report.errors.is_empty(), "teardown problems: {report}");
    let left = local::leftovers(&layout);
    assert!(left.is_empty(), "left behind: {left:#?}");
}
