//! The doctor run by a user with partial rights, on real components: a
//! real ServiceAccount, its token from the TokenRequest API, and a
//! ClusterRole that can read most of what the doctor lists but not
//! events, leases or secrets. Every 403 must be listed as a blind spot
//! at the top of the report (never an abort), the stuck object must still
//! be found, and, since leases went unread, its owner is not called dead.
//! The admin's run of the same cluster is the control: no blind spot, and
//! the owner is dead.
//! Needs root and the components built by ci/setup.sh (CI runs both).

use std::{path::Path, process::Output, time::Duration};

use unstuck::wait::{self, Poll};

mod common;

const NS: &str = "it-rbac";
const CM: &str = "held";
const KEY: &str = "gadgets.acme-orphan.dev/cleanup";
const SA: &str = "doctor-partial";

fn doctor(kubeconfig: &Path, extra: &[&str]) -> Output {
    let kubeconfig = kubeconfig.to_str().expect("a UTF-8 kubeconfig path");
    let mut args = vec!["--kubeconfig", kubeconfig, "--stuck-after", "1s"];
    args.extend_from_slice(extra);
    common::doctor(&args)
}

fn report(o: &Output) -> serde_json::Value {
    assert_eq!(o.status.code(), Some(0), "{}", common::output_text(o));
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("JSON: {e}\n{}", common::output_text(o)))
}

/// The kind of the finding about the held ConfigMap, if any.
fn configmap_finding(r: &serde_json::Value) -> Option<String> {
    r["findings"].as_array()?.iter().find_map(|f| {
        f["subject"]
            .as_str()?
            .contains(&format!("{NS}/{CM}"))
            .then(|| f["kind"].as_str().unwrap().to_string())
    })
}

fn blind_spots(r: &serde_json::Value) -> Vec<String> {
    r["blindSpots"]
        .as_array()
        .expect("blindSpots")
        .iter()
        .map(|b| format!("{}: {}", b["what"], b["why"]))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partial_rights_user_gets_its_blind_spots_listed_and_the_stuck_object_found() {
    let cluster = common::up(&common::cluster_name("it-rbac-blind")).await;
    let client = cluster.client();
    let admin_kc = cluster.kubeconfig();

    common::create_namespace(&client, NS).await;
    common::held_configmap(&client, NS, CM, KEY).await;

    // Reads of what the doctor lists, except events, leases and secrets.
    let dir = common::Scratch::dir("unstuck-rbac");
    let sa_kc = dir.join("sa.kubeconfig");
    common::service_account_kubeconfig(
        &client,
        &admin_kc,
        NS,
        SA,
        serde_json::json!([
            {"apiGroups": [""], "verbs": ["get", "list"], "resources":
                ["namespaces", "pods", "configmaps", "services", "nodes",
                 "persistentvolumes", "persistentvolumeclaims", "serviceaccounts"]},
            {"apiGroups": ["apiregistration.k8s.io"], "verbs": ["get", "list"], "resources": ["apiservices"]},
            {"apiGroups": ["admissionregistration.k8s.io"], "verbs": ["get", "list"], "resources":
                ["validatingwebhookconfigurations", "mutatingwebhookconfigurations"]},
            {"apiGroups": ["discovery.k8s.io"], "verbs": ["get", "list"], "resources": ["endpointslices"]},
            {"apiGroups": ["apps"], "verbs": ["get", "list"], "resources": ["*"]}
        ]),
        &sa_kc,
    )
    .await;

    // The control, as admin: no blind spot, and the owner is dead.
    let admin = wait::until(
        "the admin's doctor to find the held ConfigMap",
        Duration::from_secs(120),
        Duration::from_secs(2),
        || {
            let o = doctor(&admin_kc, &["-o", "json"]);
            async move {
                let r = report(&o);
                match configmap_finding(&r) {
                    Some(_) => Poll::Ready(r),
                    None => Poll::Pending(common::output_text(&o)),
                }
            }
        },
    )
    .await
    .expect("admin findings");
    assert_eq!(blind_spots(&admin), Vec::<String>::new());
    assert_eq!(
        configmap_finding(&admin).as_deref(),
        Some("OrphanFinalizer")
    );

    // The ServiceAccount: runs to the end, lists the 403s, still finds it.
    let o = doctor(&sa_kc, &["-o", "json"]);
    let r = report(&o);
    let spots = blind_spots(&r);
    for resource in ["events", "leases", "secrets"] {
        assert!(
            spots.iter().any(
                |s| s.contains(&format!("\"{resource} (")) && s.contains("403")
                    || s.starts_with(&format!("\"{resource} (")) && s.contains("forbidden")
            ),
            "{resource} not a blind spot: {spots:#?}"
        );
    }
    assert_eq!(
        configmap_finding(&r).as_deref(),
        Some("UnknownFinalizerOwner"),
        "{}",
        common::output_text(&o)
    );
    assert!(
        r["plan"]
            .as_array()
            .unwrap()
            .iter()
            .all(|l| !l.as_str().unwrap().contains("PATCH")),
        "nothing may be stripped on an unread absence: {}",
        common::output_text(&o)
    );
    // In the terminal report the blind spots come first, after the target.
    let term = doctor(&sa_kc, &[]);
    let t = String::from_utf8_lossy(&term.stdout).to_string();
    let (spots_at, found_at) = (
        t.find("BLIND SPOTS").expect("blind spots section"),
        t.find("findings (").expect("findings section"),
    );
    assert!(t.starts_with("target: ") && spots_at < found_at, "{t}");

    let layout = cluster.layout().clone();
    let report = cluster.down().await;
    assert!(report.errors.is_empty(), "{report}");
    assert!(unstuck::cluster::local::leftovers(&layout).is_empty());
}
