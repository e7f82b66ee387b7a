//! A wedged namespace controller is reported, not "nothing found": on a
//! real local cluster, kube-controller-manager is stopped (SIGSTOP, so its
//! port still accepts connections and never answers), a namespace with a
//! ConfigMap is deleted, and the doctor must report NamespaceNotProgressing
//! quoting the stale leader lease and the unreadable metrics, and plan no
//! change. Then kube-controller-manager is resumed (on every path, panics
//! included) and the namespace must go away by itself.
//! Needs root and the components built by ci/setup.sh (CI runs both).

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::{
    Api,
    api::{DeleteParams, PostParams},
};
use unstuck::{
    cluster::local::{kcm_metrics, state::ClusterState},
    doctor::{self, DoctorOptions, Scope},
    wait::{self, Poll},
};
use unstuck_core::doctor::{
    Action, DiagnoseOptions, Finding, FindingDetail, FindingKind, namespace_stall::StallCause,
};

mod common;

const NS: &str = "it-ns-stall";

/// Sends a signal to a process by pid with kill(1) (the workspace denies
/// unsafe code, so no libc::kill here).
fn signal(pid: i32, sig: &str) -> std::io::Result<()> {
    let status = std::process::Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status()?;
    if status.success() {
        Ok(())
    } else {
        Err(std::io::Error::other(format!(
            "kill -{sig} {pid}: {status}"
        )))
    }
}

/// Resumes the stopped process when dropped, so a failing assertion never
/// leaves kube-controller-manager stopped (teardown could not stop it
/// gracefully either).
struct Resume(i32);

impl Drop for Resume {
    fn drop(&mut self) {
        if let Err(e) = signal(self.0, "CONT") {
            eprintln!("resuming kube-controller-manager (pid {}): {e}", self.0);
        }
    }
}

fn stall_of(findings: &[Finding]) -> Option<&Finding> {
    findings
        .iter()
        .find(|f| f.kind() == FindingKind::NamespaceNotProgressing && f.subject.name == NS)
}

#[tokio::test(flavor = "current_thread")]
async fn a_stopped_controller_manager_is_reported_and_the_namespace_goes_once_it_resumes() {
    let name = common::cluster_name("it-ns-stall");
    let cluster = common::up(&name).await;
    let client = cluster.client();

    // The reading path works against a live kube-controller-manager: its
    // namespace workqueue is there (once its controllers have started).
    let layout = cluster.layout().clone();
    let live = wait::until(
        "kube-controller-manager's namespace workqueue metrics",
        Duration::from_secs(180),
        Duration::from_secs(2),
        || {
            let layout = layout.clone();
            async move {
                match kcm_metrics::fetch_text(
                    &layout.admin_kubeconfig(),
                    layout.controller_manager_port(),
                )
                .await
                {
                    Ok(text)
                        if unstuck_core::doctor::namespace_stall::parse_namespace_queue(&text)
                            .is_some() =>
                    {
                        Poll::Ready(text)
                    }
                    Ok(_) => Poll::Pending("no namespace workqueue yet".into()),
                    Err(e) => Poll::Pending(e.to_string()),
                }
            }
        },
    )
    .await
    .expect("metrics readable with the admin client certificate");
    if let Ok(path) = std::env::var("UNSTUCK_RECORD_METRICS") {
        let workqueue: Vec<&str> = live.lines().filter(|l| l.contains("workqueue_")).collect();
        std::fs::write(path, workqueue.join("\n") + "\n").unwrap();
    }

    common::create_namespace(&client, NS).await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    cms.create(
        &PostParams::default(),
        &common::from_json(
            serde_json::json!({"metadata": {"name": "settings"}, "data": {"mode": "on"}}),
        ),
    )
    .await
    .unwrap();

    let state = ClusterState::load(&layout.dir)
        .expect("state readable")
        .expect("state exists");
    let kcm = state
        .components
        .iter()
        .find(|c| c.name == "kube-controller-manager")
        .expect("kube-controller-manager in the cluster state")
        .process
        .clone();
    assert!(
        kcm.is_alive(),
        "kube-controller-manager runs before the stop"
    );
    signal(kcm.pid, "STOP").expect("SIGSTOP kube-controller-manager");
    let resume = Resume(kcm.pid);

    namespaces
        .delete(NS, &DeleteParams::default())
        .await
        .expect("delete the namespace");

    let doctor_opts = DoctorOptions {
        scope: Scope::Namespaces(vec![NS.into()]),
        diagnose: DiagnoseOptions {
            stuck_after: Duration::from_secs(5),
            ..DiagnoseOptions::default()
        },
        // The node is what offers the controller-manager's metrics.
        node: Some(unstuck::cluster::provider::ProvidedCluster::node(&cluster)),
        ..DoctorOptions::dry_run(std::env::temp_dir())
    };
    // The lease goes stale leaseDurationSeconds (15 s) after its last
    // renewal; look until the doctor says so.
    let report = wait::until(
        "the doctor to report the namespace controller as not leading",
        Duration::from_secs(300),
        Duration::from_secs(3),
        || {
            let client = client.clone();
            let doctor_opts = doctor_opts.clone();
            async move {
                let report = match doctor::run(&client, &doctor_opts).await {
                    Ok(r) => r,
                    Err(e) => return Poll::Pending(e.to_string()),
                };
                match stall_of(report.initial_findings()).map(|f| &f.detail) {
                    Some(FindingDetail::NamespaceNotProgressing(s))
                        if s.cause == StallCause::ControllerManagerNotLeading =>
                    {
                        Poll::Ready(report)
                    }
                    _ => Poll::Pending(format!("{:?}", report.summary_lines())),
                }
            }
        },
    )
    .await
    .expect("NamespaceNotProgressing reported");

    let f = stall_of(report.initial_findings()).unwrap();
    eprintln!("{}: {}", f.kind(), f.summary);
    for e in &f.evidence {
        eprintln!("    {e}");
    }
    let quoted = |needle: &str| f.evidence.iter().any(|e| e.contains(needle));
    assert!(
        quoted("lease kube-system/kube-controller-manager is stale"),
        "the stale lease is quoted: {:#?}",
        f.evidence
    );
    assert!(
        quoted("metrics at https://127.0.0.1:") && quoted("are unreadable"),
        "the metrics are said to be unreadable: {:#?}",
        f.evidence
    );
    assert!(
        quoted("has written no status condition"),
        "{:#?}",
        f.evidence
    );
    let round = report.rounds.first().unwrap();
    assert!(
        round
            .plan
            .steps
            .iter()
            .all(|s| matches!(s.action, Action::Refuse { .. } | Action::Wait { .. })),
        "no change is planned while the controller is stopped: {:#?}",
        round.plan
    );
    assert!(
        round
            .plan
            .steps
            .iter()
            .any(|s| matches!(s.action, Action::Refuse { .. })
                && round.findings[s.finding_index].kind() == FindingKind::NamespaceNotProgressing),
        "the finding gets its refusal: {:#?}",
        round.plan
    );

    drop(resume);
    wait::until(
        "the namespace to go once kube-controller-manager resumes",
        Duration::from_secs(300),
        Duration::from_secs(2),
        || {
            let namespaces = namespaces.clone();
            let kcm = kcm.clone();
            async move {
                match namespaces.get_opt(NS).await {
                    Ok(None) => Poll::Ready(()),
                    Ok(Some(ns)) => Poll::Pending(format!(
                        "still there, conditions {:?}; kube-controller-manager alive: {}",
                        ns.status.and_then(|s| s.conditions),
                        kcm.is_alive()
                    )),
                    Err(e) => Poll::Pending(e.to_string()),
                }
            }
        },
    )
    .await
    .expect("the namespace deleted by the resumed controller");

    let report = cluster.down().await;
    assert!(report.errors.is_empty(), "teardown problems: {report}");
}
