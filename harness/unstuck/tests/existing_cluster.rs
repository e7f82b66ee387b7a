//! `unstuck run` on a cluster it did not create leaves that cluster's own
//! objects alone. A local cluster (its unstuck marker given another
//! cluster's kube-system UID, so it counts as someone else's) gets "production" objects that share names
//! with what the scenarios create:
//! - the APIService `v1beta1.metrics.k8s.io`, Available=True, served by a
//!   live HTTPS backend in this test process (Service + Endpoints on the
//!   node address; the local provider routes aggregated APIs to endpoint
//!   addresses);
//! - the CRD `kialis.kiali.io` and a Kiali `istio/kiali` carrying
//!   `kiali.io/finalizer`, with a live controller (in this process) that
//!   holds a Lease and would finish that finalizer;
//! - namespaces and objects named as the scenarios name theirs: the
//!   PersistentVolume `unstuck-pvc-protection`, the webhook configuration
//!   `policy-guard`, ConfigMaps `app/mymap` and `app/slow-cleanup`;
//! - a ClusterRole stuck Terminating on a finalizer with no live owner,
//!   which the scenarios' doctor steps must leave alone (cluster-scoped
//!   and not the run's).
//!
//! The guard must refuse the cluster without the opt-in and with a wrong
//! context; with `--allow-existing-cluster=<context>` the whole API-level
//! suite must pass, and every production object must come out
//! byte-identical (its full JSON, resourceVersion included). The suite
//! runs in two halves (`--shard 1/2`, `--shard 2/2`), each on a cluster
//! of its own with every production object: one run of the whole suite
//! took 8-9 minutes, the slowest binary of CI, and ci/run-tests.sh runs
//! the two halves as two jobs side by side.
//!
//! A second test (`foreign_finalizer`) lets another controller (the test
//! itself) add its finalizer to a run's namespace and to an object in it
//! while the scenario runs: cleanup removes only the scenario's own keys
//! and leaves that one, reported as left.
//! Real local clusters; need root and ci/setup.sh's components.

use std::{
    net::Ipv4Addr,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use k8s_openapi::{
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    kube_aggregator::pkg::apis::apiregistration::v1::APIService,
};
use kube::{
    Api, Client,
    api::{ApiResource, DynamicObject, ListParams},
};

#[path = "existing_cluster/backend.rs"]
mod backend;
mod common;
#[path = "existing_cluster/foreign_finalizer.rs"]
mod foreign_finalizer;
#[path = "existing_cluster/production.rs"]
mod production;

use backend::start_backend;
use production::{
    apiservice_available, create_all, production, snapshot, start_kiali_controller, wait_until,
};

/// The whole suite on a loaded 2-core machine: generous.
const SUITE_TIMEOUT: Duration = Duration::from_secs(45 * 60);

use common::repo_root as repo;

fn unstuck_run(kubeconfig: &Path, out: &Path, extra: &[&str]) -> tokio::process::Command {
    let r = repo();
    unstuck_run_with(
        kubeconfig,
        &r.join("scenarios"),
        &r.join("fixtures"),
        out,
        extra,
    )
}

/// `unstuck run --kubeconfig` with scenarios and fixtures from elsewhere.
fn unstuck_run_with(
    kubeconfig: &Path,
    scenarios: &Path,
    fixtures: &Path,
    out: &Path,
    extra: &[&str],
) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_unstuck"));
    cmd.arg("run")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--scenarios")
        .arg(scenarios)
        .arg("--fixtures")
        .arg(fixtures)
        .arg("--out")
        .arg(out)
        .args(extra)
        .kill_on_drop(true);
    cmd
}

async fn refused(cmd: &mut tokio::process::Command) -> String {
    let o = tokio::time::timeout(Duration::from_secs(300), cmd.output())
        .await
        .expect("the guard answers")
        .expect("unstuck runs");
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(!o.status.success(), "the guard let it run:\n{err}");
    err
}

/// The first half of the suite, and the guard's refusals.
/// (ci/run-tests.sh runs this test, by the `shard_1_of_2` in its name,
/// as a job of its own beside the rest of this binary.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_suite_leaves_an_existing_clusters_objects_byte_identical_shard_1_of_2() {
    suite_on_an_existing_cluster(1).await;
}

/// The second half of the suite, and the apply step's rules against a
/// production object.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_suite_leaves_an_existing_clusters_objects_byte_identical_shard_2_of_2() {
    suite_on_an_existing_cluster(2).await;
}

/// Half `shard` of 2 of the API-level suite on a cluster of its own.
async fn suite_on_an_existing_cluster(shard: u8) {
    let cluster = common::up(&common::cluster_name(&format!("it-existing-{shard}"))).await;
    let started = Instant::now();
    let out = common::Scratch::path(&format!("unstuck-existing-{shard}"));
    let result = tokio::spawn(exercise(
        cluster.client(),
        cluster.kubeconfig(),
        cluster.layout().node_ip(),
        out.to_path_buf(),
        shard,
    ))
    .await;
    let down = cluster.down().await;
    eprintln!(
        "cluster down: {down}; test body took {:.0} s",
        started.elapsed().as_secs_f64()
    );
    if let Err(e) = result {
        std::panic::resume_unwind(e.into_panic());
    }
}

async fn exercise(client: Client, kubeconfig: PathBuf, node_ip: Ipv4Addr, out: PathBuf, shard: u8) {
    // `cluster up` marked the cluster as unstuck's own; now it is
    // someone else's.
    let context = common::make_it_someone_elses(&client, &kubeconfig).await;

    let port = start_backend(node_ip).await;
    let docs = production(node_ip, port);
    create_all(&client, &docs).await;
    let _controller = AbortOnDrop(start_kiali_controller(client.clone()));
    wait_until("v1beta1.metrics.k8s.io Available=True", || {
        apiservice_available(&client)
    })
    .await;
    let pvs: Api<k8s_openapi::api::core::v1::PersistentVolume> = Api::all(client.clone());
    wait_until("the production PV Available", || async {
        let pv = pvs
            .get("unstuck-pvc-protection")
            .await
            .map_err(|e| e.to_string())?;
        match pv.status.and_then(|s| s.phase).as_deref() {
            Some("Available") => Ok(()),
            other => Err(format!("phase {other:?}")),
        }
    })
    .await;
    let roles: Api<k8s_openapi::api::rbac::v1::ClusterRole> = Api::all(client.clone());
    roles
        .delete("prod-audit-reader", &Default::default())
        .await
        .expect("deleting the stuck production ClusterRole");
    wait_until("the production ClusterRole Terminating", || async {
        let r = roles
            .get("prod-audit-reader")
            .await
            .map_err(|e| e.to_string())?;
        r.metadata
            .deletion_timestamp
            .map(|_| ())
            .ok_or_else(|| "no deletionTimestamp yet".to_string())
    })
    .await;
    let before = snapshot(&client, &docs).await;

    // The control: a doctor on the whole cluster does call the production
    // ClusterRole's finalizer orphaned (dry run: it changes nothing).
    wait_until(
        "a whole-cluster doctor to see the stuck ClusterRole",
        || async {
            let o = tokio::process::Command::new(env!("CARGO_BIN_EXE_unstuck"))
                .arg("doctor")
                .arg("--kubeconfig")
                .arg(&kubeconfig)
                .args(["--stuck-after", "1s"])
                .output()
                .await
                .map_err(|e| e.to_string())?;
            let stdout = String::from_utf8_lossy(&o.stdout);
            if stdout.contains("prod-audit-reader") && stdout.contains("OrphanFinalizer") {
                Ok(())
            } else {
                Err(format!("doctor said:\n{stdout}"))
            }
        },
    )
    .await;

    let allow = format!("--allow-existing-cluster={context}");
    if shard == 1 {
        the_guard_refuses(&kubeconfig, &out, &context).await;
    }

    // This half of the API-level suite. Its scenarios that register
    // something cluster-wide are refused until they are named; the
    // refusal gives the flag that names them.
    let shard_arg = format!("{shard}/2");
    let base = [
        allow.as_str(),
        "--without-node-scenarios",
        "--shard",
        &shard_arg,
    ];
    let err = refused(&mut unstuck_run(&kubeconfig, &out, &base)).await;
    let opt_in = err
        .split_whitespace()
        .find(|w| w.starts_with("--allow-cluster-wide="))
        .unwrap_or_else(|| panic!("no --allow-cluster-wide in the refusal:\n{err}"))
        .to_owned();
    assert!(
        err.contains("APIService") || err.contains("WebhookConfiguration"),
        "the refusal does not say what they add:\n{err}"
    );
    let t = Instant::now();
    let mut with_opt_in = base.to_vec();
    with_opt_in.push(&opt_in);
    let mut run = unstuck_run(&kubeconfig, &out, &with_opt_in);
    let o = tokio::time::timeout(SUITE_TIMEOUT, run.output())
        .await
        .expect("the suite finishes in time")
        .expect("unstuck runs");
    let suite_time = t.elapsed();
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    eprintln!(
        "suite shard {shard_arg} took {:.0} s\n{stdout}\n{stderr}",
        suite_time.as_secs_f64()
    );
    assert!(
        stderr.contains(&format!("shard {shard_arg}: ")),
        "the run said which half it runs:\n{stderr}"
    );
    assert!(
        stderr.contains(&format!("context '{context}'")) && stderr.contains("kube-system UID"),
        "the target was printed first:\n{stderr}"
    );
    let failed = match o.status.success() {
        true => String::new(),
        false => common::run_failure(&out, &format!("existing-cluster-shard-{shard}")),
    };
    assert!(
        o.status.success(),
        "the suite (shard {shard_arg}) failed on the existing cluster:\n{failed}"
    );

    if shard == 2 {
        create_never_overwrites(&client, &out).await;
    }

    // Production is untouched, byte for byte.
    wait_until("v1beta1.metrics.k8s.io still Available", || {
        apiservice_available(&client)
    })
    .await;
    let after = snapshot(&client, &docs).await;
    let changed: Vec<String> = before
        .iter()
        .filter(|(k, v)| after.get(*k) != Some(v))
        .map(|(k, v)| {
            format!(
                "{k}\n--- before\n{v}\n--- after\n{}",
                after.get(k).map(String::as_str).unwrap_or("(missing)")
            )
        })
        .collect();
    assert!(
        changed.is_empty(),
        "production objects changed:\n{}",
        changed.join("\n")
    );
    assert_eq!(before.len(), docs.len());

    // And nothing of the run is left beside them.
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd_names: Vec<String> = crds
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect();
    assert_eq!(crd_names, vec!["kialis.kiali.io".to_string()], "CRDs left");
    let apis: Api<APIService> = Api::all(client.clone());
    let left: Vec<String> = apis
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|a| a.metadata.name)
        // The run's marked groups; `v1alpha1.kiali.io` is production's.
        .filter(|n| n.contains(".metrics-") || n.contains(".kiali-"))
        .collect();
    assert!(left.is_empty(), "APIServices of the run left: {left:?}");
    let pv_names: Vec<String> = pvs
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    assert_eq!(
        pv_names,
        vec!["unstuck-pvc-protection".to_string()],
        "PVs left"
    );
}

/// The guard: no opt-in, a wrong context, the flag without a context;
/// and node scenarios refused by name on a --kubeconfig cluster.
async fn the_guard_refuses(kubeconfig: &Path, out: &Path, context: &str) {
    let err = refused(&mut unstuck_run(
        kubeconfig,
        out,
        &["--without-node-scenarios"],
    ))
    .await;
    assert!(
        err.contains(&format!("--allow-existing-cluster={context}"))
            && err.contains("kube-system UID"),
        "{err}"
    );
    let wrong = format!("--allow-existing-cluster=not-{context}");
    let err = refused(&mut unstuck_run(
        kubeconfig,
        out,
        &[&wrong, "--without-node-scenarios"],
    ))
    .await;
    assert!(err.contains("does not name the current context"), "{err}");
    let err = refused(&mut unstuck_run(
        kubeconfig,
        out,
        &["--without-node-scenarios", "--allow-existing-cluster"],
    ))
    .await;
    assert!(
        err.contains(&format!("current context is '{context}'")),
        "{err}"
    );
    let allow = format!("--allow-existing-cluster={context}");
    let err = refused(&mut unstuck_run(kubeconfig, out, &[&allow])).await;
    assert!(
        err.contains("busy-volume-mount") && err.contains("--without-node-scenarios"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cleanup_leaves_a_finalizer_another_controller_added() {
    let cluster = common::up(&common::cluster_name("it-foreign-fin")).await;
    let out = common::Scratch::path("unstuck-foreign-fin");
    let result = tokio::spawn(foreign_finalizer::exercise(
        cluster.client(),
        cluster.kubeconfig(),
        out.to_path_buf(),
    ))
    .await;
    let down = cluster.down().await;
    eprintln!("cluster down: {down}");
    if let Err(e) = result {
        std::panic::resume_unwind(e.into_panic());
    }
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The apply step's rules, against production's own `app/mymap`: a taken
/// name is an error naming the object, a "replace" of an object whose UID
/// is not the run's is refused; and a scenario may apply its own object
/// again (releasing a finalizer that way).
async fn create_never_overwrites(client: &Client, out: &Path) {
    use unstuck::runner::{Outcome, RunContext, create::create_or_replace_ours, run_scenario};
    let cms: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "app",
        &ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&()),
    );
    let doc = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "mymap", "namespace": "app"}, "data": {"owner": "a scenario"}});
    let err = create_or_replace_ours(&cms, &doc, "mymap", "ConfigMap app/mymap", None)
        .await
        .err()
        .expect("a taken name is refused")
        .to_string();
    assert!(err.contains("ConfigMap app/mymap already exists"), "{err}");
    let err = create_or_replace_ours(
        &cms,
        &doc,
        "mymap",
        "ConfigMap app/mymap",
        Some("not-its-uid"),
    )
    .await
    .err()
    .expect("another object's UID is refused")
    .to_string();
    assert!(
        err.contains("is no longer the object this run created"),
        "{err}"
    );

    let fixtures = out.join("fixtures");
    std::fs::create_dir_all(&fixtures).unwrap();
    std::fs::write(
        fixtures.join("held.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: mymap\n  finalizers: [example.com/hold]\ndata: {k: v}\n",
    )
    .unwrap();
    std::fs::write(
        fixtures.join("released.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: mymap\ndata: {k: v}\n",
    )
    .unwrap();
    let scenario = unstuck_core::scenario::load_str(
        "name: reapply-own
description: a scenario releases its own object's finalizer by applying it again
namespaces: [app]
timeout: 3m
steps:
  - apply: {file: held.yaml, namespace: app}
  - delete: {kind: ConfigMap, name: mymap, namespace: app}
  - expect: {phase: symptom, timeout: 60s, that: [{terminating: {kind: ConfigMap, name: mymap, namespace: app}}]}
  - apply: {file: released.yaml, namespace: app}
  - expect: {phase: symptom, timeout: 60s, that: [{gone: {kind: ConfigMap, name: mymap, namespace: app}}]}
",
        Path::new("reapply-own.yaml"),
    )
    .expect("scenario loads");
    let ctx = RunContext {
        client: client.clone(),
        fixtures_dir: fixtures,
        out_dir: out.join("reapply-own"),
        node: None,
        cluster_exits: Default::default(),
        journal: None,
    };
    let report = run_scenario(&ctx, &scenario).await;
    assert_eq!(report.outcome, Outcome::Passed, "{:#?}", report.steps);
    assert!(
        report.steps[3]
            .evidence
            .iter()
            .any(|e| e.contains("replaced this run's ConfigMap")),
        "{:?}",
        report.steps[3].evidence
    );
    assert!(report.cleanup.is_clean(), "{:?}", report.cleanup);
}
