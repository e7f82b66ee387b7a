//! A run killed on a cluster unstuck did not create (issue 26, item 7):
//! `unstuck run --kubeconfig` writes down what a scenario is about to add
//! before it adds it, so that after a SIGKILL `unstuck cluster gc
//! --kubeconfig` removes it: here scenario 03's dead APIService, which
//! blocks every namespace deletion in the cluster for as long as it is
//! there, and the scenario's namespace behind it. The cluster is a real
//! local one made to count as someone else's. Needs root and
//! ci/setup.sh's components.

use std::time::{Duration, Instant};

use k8s_openapi::{
    api::{core::v1::Namespace, rbac::v1::ClusterRole},
    kube_aggregator::pkg::apis::apiregistration::v1::APIService,
};
use kube::{
    Api, Client,
    api::{DeleteParams, ListParams, PostParams},
};
use unstuck::{
    node::ProcRef,
    runner::{
        Created,
        journal::{ClusterRef, Record},
    },
};

mod common;

const SCENARIO: &str = "dead-metrics-apiservice";
const RUN_LABEL: &str = "unstuck.dev/run";

/// Names of the run-labelled objects of `api`, with whether each is
/// deleting.
async fn labelled<K>(api: &Api<K>) -> Vec<String>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.list(&ListParams::default().labels(RUN_LABEL))
        .await
        .expect("list")
        .items
        .into_iter()
        .map(|o| o.meta().name.clone().unwrap_or_default())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_gc_removes_what_a_killed_run_added_to_an_existing_cluster() {
    let cluster = common::up(&common::cluster_name("it-killed-existing")).await;
    let client: Client = cluster.client();
    let kubeconfig = cluster.kubeconfig();
    let context = common::make_it_someone_elses(&client, &kubeconfig).await;
    let journals = common::Scratch::path("unstuck-journals");
    let out = common::Scratch::path("unstuck-killed-existing");
    let env = [("UNSTUCK_JOURNAL_DIR", journals.as_os_str())];
    let kc = kubeconfig.to_string_lossy().into_owned();
    let allow = format!("--allow-existing-cluster={context}");
    let out_arg = out.to_string_lossy().into_owned();
    let scenarios = common::repo_root().join("scenarios");
    let fixtures = common::repo_root().join("fixtures");
    let (scenarios, fixtures) = (
        scenarios.to_string_lossy().into_owned(),
        fixtures.to_string_lossy().into_owned(),
    );
    let run_args = |extra: &[&str]| -> Vec<String> {
        [
            "run",
            "--kubeconfig",
            &kc,
            &allow,
            "--filter",
            SCENARIO,
            "--scenarios",
            &scenarios,
            "--fixtures",
            &fixtures,
            "--out",
            &out_arg,
        ]
        .iter()
        .chain(extra)
        .map(|s| s.to_string())
        .collect()
    };

    // Not named: refused, saying what it would add and how to allow it.
    let args = run_args(&[]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = common::unstuck_env(&args, &env);
    let text = common::output_text(&o);
    assert!(!o.status.success(), "{text}");
    assert!(
        text.contains(&format!("--allow-cluster-wide={SCENARIO}"))
            && text.contains("APIService v1beta1.metrics.k8s.io"),
        "{text}"
    );
    let typo = run_args(&["--allow-cluster-wide=dead-metrics"]);
    let typo: Vec<&str> = typo.iter().map(String::as_str).collect();
    let o = common::unstuck_env(&typo, &env);
    assert!(
        !o.status.success()
            && common::output_text(&o).contains("--allow-cluster-wide names no scenario"),
        "{}",
        common::output_text(&o)
    );
    assert!(
        labelled(&Api::<APIService>::all(client.clone()))
            .await
            .is_empty()
    );

    // Named: it runs; killed once its APIService is there.
    let named = run_args(&[&format!("--allow-cluster-wide={SCENARIO}")]);
    let named: Vec<&str> = named.iter().map(String::as_str).collect();
    let (mut child, _rx) = common::spawn_unstuck(&named, &env);
    let apiservices = Api::<APIService>::all(client.clone());
    let deadline = Instant::now() + Duration::from_secs(180);
    while labelled(&apiservices).await.is_empty() {
        assert!(
            Instant::now() < deadline,
            "the scenario never created its APIService"
        );
        assert!(child.try_wait().unwrap().is_none(), "the run ended early");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    child.kill().expect("SIGKILL");
    child.wait().expect("reaped");
    let namespaces = Api::<Namespace>::all(client.clone());
    let left_apiservices = labelled(&apiservices).await;
    assert!(
        left_apiservices.iter().any(|n| n.contains(".metrics-")),
        "{left_apiservices:?}"
    );
    assert!(
        !labelled(&namespaces).await.is_empty(),
        "no namespace of the run"
    );
    let written: Vec<_> = std::fs::read_dir(&journals)
        .expect("a journal was written")
        .flatten()
        .collect();
    assert_eq!(written.len(), 1, "{written:?}");

    // gc: everything the run added goes, and says so.
    let o = common::unstuck_env(&["cluster", "gc", "--kubeconfig", &kc], &env);
    let text = common::output_text(&o);
    assert!(o.status.success(), "{text}");
    assert!(
        text.contains(&format!("(scenario {SCENARIO})"))
            && text.contains("APIService v1beta1.metrics-"),
        "gc did not say what it removed:\n{text}"
    );
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let (a, n) = (labelled(&apiservices).await, labelled(&namespaces).await);
        if a.is_empty() && n.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "left after gc: APIServices {a:?}, namespaces {n:?}\n{text}"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    assert_eq!(
        std::fs::read_dir(&journals).unwrap().count(),
        0,
        "the journal outlived a clean gc"
    );
    // A second gc has nothing to do.
    let o = common::unstuck_env(&["cluster", "gc", "--kubeconfig", &kc], &env);
    assert!(
        o.status.success() && common::output_text(&o).contains("nothing left by killed runs"),
        "{}",
        common::output_text(&o)
    );

    pending_entries_are_taken_by_label_and_an_unreadable_one_keeps_the_record(
        &client, &kc, &journals,
    )
    .await;

    let layout = cluster.layout().clone();
    let report = cluster.down().await;
    assert!(report.errors.is_empty(), "{report}");
    assert!(unstuck::cluster::local::leftovers(&layout).is_empty());
}

/// A journal whose run was killed after writing down its next creates and
/// before they returned (no UID recorded): gc takes an object of that name
/// only when it carries the run's label, names one without it as not the
/// run's and leaves it, and when it cannot read one at all (its API group
/// does not answer) keeps the record for the next gc instead of taking
/// "unreadable" for "gone".
async fn pending_entries_are_taken_by_label_and_an_unreadable_one_keeps_the_record(
    client: &Client,
    kc: &str,
    journals: &std::path::Path,
) {
    let run = format!("pending-{}", std::process::id());
    let roles = Api::<ClusterRole>::all(client.clone());
    let role = |name: &str, labelled: bool| -> ClusterRole {
        common::from_json(serde_json::json!({
            "metadata": {
                "name": name,
                "labels": if labelled { serde_json::json!({ RUN_LABEL: run }) } else { serde_json::json!({}) },
            },
            "rules": [],
        }))
    };
    let pp = PostParams::default();
    roles
        .create(&pp, &role("unstuck-pending-ours", true))
        .await
        .expect("ours");
    roles
        .create(&pp, &role("unstuck-pending-theirs", false))
        .await
        .expect("theirs");
    // An aggregated API with no backend: its group answers 503.
    let apiservices = Api::<APIService>::all(client.clone());
    let broken: APIService = common::from_json(serde_json::json!({
        "metadata": { "name": "v1.broken.unstuck.dev" },
        "spec": {
            "group": "broken.unstuck.dev", "version": "v1",
            "service": { "namespace": "default", "name": "nothing-serves-this", "port": 443 },
            "insecureSkipTLSVerify": true, "groupPriorityMinimum": 1000, "versionPriority": 15,
        },
    }));
    apiservices
        .create(&pp, &broken)
        .await
        .expect("the broken APIService");
    let kube_system_uid = Api::<Namespace>::all(client.clone())
        .get("kube-system")
        .await
        .expect("kube-system")
        .metadata
        .uid
        .expect("a UID");
    let pending = |api_version: &str, kind: &str, name: &str| Created {
        api_version: api_version.into(),
        kind: kind.into(),
        namespace: None,
        name: name.into(),
        uid: String::new(),
        keys: Default::default(),
    };
    // An owner that is gone: this process's PID with a start time it
    // never had.
    let mut owner = ProcRef::of_pid(std::process::id() as i32).expect("this process");
    owner.start_time += 1;
    let record = Record {
        owner,
        cluster: ClusterRef {
            kube_system_uid,
            server: "https://127.0.0.1".into(),
            context: "test".into(),
        },
        run: run.clone(),
        scenario: "pending-entries".into(),
        created: vec![
            pending(
                "rbac.authorization.k8s.io/v1",
                "ClusterRole",
                "unstuck-pending-ours",
            ),
            pending(
                "rbac.authorization.k8s.io/v1",
                "ClusterRole",
                "unstuck-pending-theirs",
            ),
            pending("broken.unstuck.dev/v1", "Widget", "w1"),
        ],
    };
    std::fs::create_dir_all(journals).expect("journal dir");
    let file = journals.join(format!("{run}-pending-entries.json"));
    std::fs::write(&file, serde_json::to_vec(&record).expect("json")).expect("the record");
    let env = [("UNSTUCK_JOURNAL_DIR", journals.as_os_str())];

    let o = common::unstuck_env(&["cluster", "gc", "--kubeconfig", kc], &env);
    let text = common::output_text(&o);
    assert!(
        !o.status.success(),
        "an unreadable entry is no clean gc:\n{text}"
    );
    assert!(
        text.contains("left alone") && text.contains("ClusterRole unstuck-pending-theirs"),
        "{text}"
    );
    assert!(
        text.contains("not readable now") && text.contains("Widget w1"),
        "{text}"
    );
    assert!(
        file.exists(),
        "the record went although an entry was not read"
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    while roles
        .get_opt("unstuck-pending-ours")
        .await
        .expect("get")
        .is_some()
    {
        assert!(
            Instant::now() < deadline,
            "the run's labelled ClusterRole is left:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(
        roles
            .get_opt("unstuck-pending-theirs")
            .await
            .expect("get")
            .is_some(),
        "gc deleted an object without the run's label"
    );

    // The group gone (no longer served): the entry is known gone, the
    // record goes.
    apiservices
        .delete("v1.broken.unstuck.dev", &DeleteParams::default())
        .await
        .expect("delete the broken APIService");
    let deadline = Instant::now() + Duration::from_secs(60);
    let text = loop {
        let o = common::unstuck_env(&["cluster", "gc", "--kubeconfig", kc], &env);
        let text = common::output_text(&o);
        if o.status.success() {
            break text;
        }
        assert!(Instant::now() < deadline, "gc never came clean:\n{text}");
        tokio::time::sleep(Duration::from_secs(2)).await;
    };
    assert!(!file.exists(), "the record outlived a clean gc:\n{text}");
    assert!(
        roles
            .get_opt("unstuck-pending-theirs")
            .await
            .expect("get")
            .is_some()
    );
    roles
        .delete("unstuck-pending-theirs", &DeleteParams::default())
        .await
        .expect("clean up");
}
