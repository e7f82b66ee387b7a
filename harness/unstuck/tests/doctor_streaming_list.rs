//! The doctor's streaming list on real components: a namespace of more
//! ConfigMaps than the doctor pages through (past 20,000 after the first
//! page), one of them held by a dead finalizer. The doctor must read the
//! type as one streaming list (its debug log says so), count every object
//! exactly once (not the first page twice), and find the held one. A user
//! who may list but not watch gets the same count, paged: the refused
//! stream is no blind spot.
//! Needs root and the components built by ci/setup.sh (CI runs both).

use std::{path::Path, process::Output, time::Duration};

use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api,
    api::{ListParams, PostParams},
};
use unstuck::wait::{self, Poll};

mod common;

const NS: &str = "it-stream";
/// Past the doctor's threshold (20,000 left after a first page of 500).
const MANY: usize = 20_600;
const CM: &str = "held";
const KEY: &str = "gadgets.acme-orphan.dev/cleanup";

const SA: &str = "doctor-no-watch";

fn doctor(kubeconfig: &Path) -> Output {
    let kubeconfig = kubeconfig.to_str().expect("a UTF-8 kubeconfig path");
    common::doctor_env(
        &[
            "-o",
            "json",
            "-n",
            NS,
            "--stuck-after",
            "1s",
            "--kubeconfig",
            kubeconfig,
        ],
        &[("UNSTUCK_LOG", "warn,unstuck::doctor::pages=debug")],
    )
}

fn text(o: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}\n--- stderr (tail)\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout)
            .chars()
            .take(4000)
            .collect::<String>(),
        String::from_utf8_lossy(&o.stderr)
            .lines()
            .rev()
            .take(40)
            .collect::<Vec<_>>()
            .join("\n")
    )
}

/// The log's text without its terminal colours.
fn plain(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // ESC [ ... m
            for c in chars.by_ref() {
                if c == 'm' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_type_past_the_threshold_is_streamed_counted_once_and_its_stuck_object_found() {
    let cluster = common::up(&common::cluster_name("it-stream-list")).await;
    let client = cluster.client();

    common::create_namespace(&client, NS).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    stream::iter(0..MANY)
        .for_each_concurrent(64, |i| {
            let cms = cms.clone();
            async move {
                let cm: ConfigMap = common::from_json(
                    serde_json::json!({"metadata": {"name": format!("cm-{i:05}")}, "data": {"k": "v"}}),
                );
                cms.create(&PostParams::default(), &cm)
                    .await
                    .expect("create configmap");
            }
        })
        .await;
    common::held_configmap(&client, NS, CM, KEY).await;
    // What the API server says is there (kube-root-ca.crt included).
    let mut expected = 0;
    let mut lp = ListParams::default().limit(5000);
    loop {
        let page = cms.list_metadata(&lp).await.expect("list configmaps");
        expected += page.items.len();
        match page.metadata.continue_ {
            Some(c) if !c.is_empty() => lp = lp.continue_token(&c),
            _ => break,
        }
    }
    assert!(expected > MANY, "{expected} ConfigMaps");

    let kc = cluster.kubeconfig();
    let (o, r) = wait::until(
        "the doctor to find the held ConfigMap",
        Duration::from_secs(120),
        Duration::from_secs(2),
        || {
            let o = doctor(&kc);
            async move {
                let Ok(r) = serde_json::from_slice::<serde_json::Value>(&o.stdout) else {
                    return Poll::Pending(text(&o));
                };
                let found = r["findings"].as_array().is_some_and(|fs| {
                    fs.iter().any(|f| {
                        f["subject"]
                            .as_str()
                            .is_some_and(|s| s.contains(&format!("{NS}/{CM}")))
                    })
                });
                if found {
                    Poll::Ready((o, r))
                } else {
                    Poll::Pending(text(&o))
                }
            }
        },
    )
    .await
    .expect("the held ConfigMap found");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let stderr = plain(&String::from_utf8_lossy(&o.stderr));
    let streamed: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("streamed list") && l.contains("configmaps"))
        .collect();
    assert_eq!(streamed.len(), 1, "configmaps not streamed:\n{}", text(&o));
    assert!(
        streamed[0].contains(&format!("objects={expected}")),
        "the stream counted other than the {expected} ConfigMaps listed: {}",
        streamed[0]
    );
    // Every other type in the namespace is small: the scan's count is the
    // ConfigMaps once, plus a handful (its ServiceAccount, ...).
    let seen = r["scan"]["objectsSeen"].as_u64().expect("objectsSeen") as usize;
    assert!(
        seen >= expected && seen < expected + 20,
        "objectsSeen {seen} for {expected} ConfigMaps"
    );
    assert!(
        r["blindSpots"].as_array().is_some_and(|b| b.is_empty()),
        "{}",
        text(&o)
    );

    // May list, may not watch: the stream is refused (403), paging
    // resumes after the first page, and the count is the same.
    let dir = common::Scratch::dir("unstuck-stream");
    let sa_kc = dir.join("sa.kubeconfig");
    common::service_account_kubeconfig(
        &client,
        &kc,
        NS,
        SA,
        serde_json::json!([{"apiGroups": [""], "verbs": ["get", "list"], "resources": ["configmaps", "namespaces"]}]),
        &sa_kc,
    )
    .await;
    let o = doctor(&sa_kc);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let stderr = plain(&String::from_utf8_lossy(&o.stderr));
    let configmaps: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("configmaps"))
        .collect();
    assert!(
        configmaps
            .iter()
            .any(|l| l.contains("streaming list refused; paging"))
            && !configmaps.iter().any(|l| l.contains("streamed list")),
        "the stream was not refused and paged:\n{}",
        text(&o)
    );
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON report");
    let held = r["findings"].as_array().is_some_and(|fs| {
        fs.iter().any(|f| {
            f["subject"]
                .as_str()
                .is_some_and(|s| s.contains(&format!("{NS}/{CM}")))
        })
    });
    assert!(held, "the held ConfigMap not found, paged:\n{}", text(&o));
    let spots = r["blindSpots"].to_string();
    assert!(
        !spots.contains("configmaps"),
        "configmaps a blind spot: {spots}"
    );
    let seen_paged = r["scan"]["objectsSeen"].as_u64().expect("objectsSeen") as usize;
    assert!(
        seen_paged >= expected && seen_paged <= seen,
        "paged objectsSeen {seen_paged}, streamed {seen}, {expected} ConfigMaps"
    );

    let down = cluster.down().await;
    assert!(down.errors.is_empty(), "{down}");
}
