//! NamespaceNotProgressing on recorded objects.
//!
//! Base: `recorded/real-v1.34.4/dead-metrics-apiservice.json`, a snapshot of
//! a real v1.34.4 local cluster with a live kube-controller-manager (its
//! `kube-system/kube-controller-manager` Lease fresh) and one namespace,
//! `app-bkevf5`, whose deletion is blocked by a real
//! `NamespaceDeletionDiscoveryFailure` for `metrics.k8s.io/v1beta1`.
//! Each test edits the minimal fields of those real objects, in code,
//! saying which: a copy of `app-bkevf5` renamed `quiet` with its status
//! conditions removed stands for a namespace the controller never got to;
//! the lease's `renewTime` moved back stands for a stopped controller.
//! The metrics text is kube-controller-manager v1.34.4's own `/metrics`
//! (workqueue lines only), recorded by `tests/namespace_stall.rs` in the
//! unstuck crate with `UNSTUCK_RECORD_METRICS`.

mod doctor_support;

use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::SignedDuration;
use unstuck_core::doctor::namespace_stall::{
    ControllerManagerMetrics, StallCause, WorkqueueMetrics, parse_namespace_queue,
};
use unstuck_core::doctor::{
    Action, DiagnoseOptions, Finding, FindingDetail, FindingKind, Snapshot, diagnose, plan,
};

const BLOCKED: &str = "app-bkevf5";
const HOLDER: &str = "vm_048c65ce-e490-49ec-aa3a-6d2c31c1de90";

fn recorded() -> Snapshot {
    doctor_support::recorded("dead-metrics-apiservice")
}

fn opts() -> DiagnoseOptions {
    DiagnoseOptions {
        stuck_after: Duration::from_secs(3),
        ..DiagnoseOptions::default()
    }
}

fn namespace<'a>(s: &'a mut Snapshot, name: &str) -> &'a mut Namespace {
    s.namespaces
        .iter_mut()
        .find(|n| n.metadata.name.as_deref() == Some(name))
        .unwrap()
}

/// Edit: a copy of the blocked namespace, renamed `quiet`, new uid, no
/// status conditions (the controller has not been at it).
fn add_quiet(s: &mut Snapshot) {
    let mut quiet = namespace(s, BLOCKED).clone();
    quiet.metadata.name = Some("quiet".into());
    quiet.metadata.uid = Some("00000000-0000-0000-0000-00000000quie".into());
    quiet.status.as_mut().unwrap().conditions = None;
    s.namespaces.push(quiet);
}

/// Edit: the kcm lease's renewTime moved to `ago` before the snapshot.
fn renewed_ago(s: &mut Snapshot, ago: i64) {
    let taken = s.taken_at;
    let lease = s
        .leases
        .iter_mut()
        .find(|l| l.metadata.name.as_deref() == Some("kube-controller-manager"))
        .unwrap();
    lease.spec.as_mut().unwrap().renew_time =
        Some(MicroTime(taken - SignedDuration::from_secs(ago)));
}

fn stall<'a>(findings: &'a [Finding], name: &str) -> Option<&'a Finding> {
    findings
        .iter()
        .find(|f| f.kind() == FindingKind::NamespaceNotProgressing && f.subject.name == name)
}

fn cause(f: &Finding) -> StallCause {
    match &f.detail {
        FindingDetail::NamespaceNotProgressing(s) => s.cause,
        d => panic!("unexpected detail {d:?}"),
    }
}

fn quotes(f: &Finding, needle: &str) -> bool {
    f.evidence.iter().any(|e| e.contains(needle))
}

fn metrics(queue: Option<WorkqueueMetrics>, error: Option<&str>) -> ControllerManagerMetrics {
    ControllerManagerMetrics {
        endpoint: "https://127.0.0.1:21057/metrics".into(),
        error: error.map(str::to_owned),
        namespace_queue: queue,
    }
}

#[test]
fn a_stale_lease_means_the_controller_manager_is_down_or_not_leading() {
    let mut s = recorded();
    add_quiet(&mut s);
    renewed_ago(&mut s, 60);
    let findings = diagnose(&s, &opts());
    let f = stall(&findings, "quiet").expect("quiet is reported");
    assert_eq!(cause(f), StallCause::ControllerManagerNotLeading);
    assert!(
        quotes(f, "lease kube-system/kube-controller-manager is stale"),
        "{:#?}",
        f.evidence
    );
    assert!(quotes(f, HOLDER), "holder quoted: {:#?}", f.evidence);
    assert!(
        quotes(f, "1m0s before the snapshot") || quotes(f, "60"),
        "{:#?}",
        f.evidence
    );
    assert!(quotes(f, "has written no status condition"));
    assert!(f.summary.contains("down or not leading"), "{}", f.summary);
}

#[test]
fn a_missing_lease_is_said() {
    let mut s = recorded();
    add_quiet(&mut s);
    s.leases
        .retain(|l| l.metadata.name.as_deref() != Some("kube-controller-manager"));
    let findings = diagnose(&s, &opts());
    let f = stall(&findings, "quiet").unwrap();
    assert_eq!(cause(f), StallCause::ControllerManagerNotLeading);
    assert!(quotes(f, "no lease kube-system/kube-controller-manager"));
}

#[test]
fn with_a_fresh_lease_another_namespaces_cluster_wide_failure_is_quoted() {
    let mut s = recorded();
    add_quiet(&mut s);
    let findings = diagnose(&s, &opts());
    let f = stall(&findings, "quiet").unwrap();
    assert_eq!(cause(f), StallCause::ClusterWideBlocker);
    assert!(quotes(
        f,
        "lease kube-system/kube-controller-manager is fresh"
    ));
    assert!(
        quotes(
            f,
            &format!("namespace {BLOCKED}: condition NamespaceDeletionDiscoveryFailure=True")
        ),
        "{:#?}",
        f.evidence
    );
    assert!(quotes(f, "metrics.k8s.io/v1beta1"));
    assert!(quotes(f, "metrics were not read"));
    match &f.detail {
        FindingDetail::NamespaceNotProgressing(d) => {
            assert_eq!(d.blocked_elsewhere, vec![BLOCKED.to_owned()]);
            assert!(!d.has_conditions);
        }
        d => panic!("{d:?}"),
    }
}

#[test]
fn the_namespace_workqueue_says_stuck_idle_or_absent() {
    let busy = WorkqueueMetrics {
        depth: 3.0,
        unfinished_work_seconds: 250.0,
        longest_running_processor_seconds: 240.0,
        adds_total: 12.0,
    };
    let idle = WorkqueueMetrics {
        depth: 0.0,
        unfinished_work_seconds: 0.0,
        longest_running_processor_seconds: 0.0,
        adds_total: 12.0,
    };
    for (m, want, quoted) in [
        (
            metrics(Some(busy), None),
            StallCause::WorkqueueStuck,
            "depth 3, unfinished work 250 s, longest running processor 240 s, adds 12",
        ),
        (
            metrics(Some(idle), None),
            StallCause::WorkqueueIdle,
            "depth 0, unfinished work 0 s",
        ),
        (
            metrics(None, None),
            StallCause::NamespaceControllerMissing,
            "no workqueue named \"namespace\"",
        ),
    ] {
        let mut s = recorded();
        add_quiet(&mut s);
        // Edit: no cluster-wide blocker, so only the queue speaks.
        s.namespaces
            .retain(|n| n.metadata.name.as_deref() != Some(BLOCKED));
        s.controller_manager_metrics = Some(m);
        let findings = diagnose(&s, &opts());
        let f = stall(&findings, "quiet").unwrap();
        assert_eq!(cause(f), want, "{:#?}", f.evidence);
        assert!(quotes(f, quoted), "{quoted:?} in {:#?}", f.evidence);
    }
}

#[test]
fn unreadable_metrics_are_said_and_leave_the_cause_open() {
    let mut s = recorded();
    add_quiet(&mut s);
    s.namespaces
        .retain(|n| n.metadata.name.as_deref() != Some(BLOCKED));
    s.controller_manager_metrics = Some(metrics(None, Some("no answer within 3 s (timed out)")));
    let findings = diagnose(&s, &opts());
    let f = stall(&findings, "quiet").unwrap();
    assert_eq!(cause(f), StallCause::Unknown);
    assert!(quotes(
        f,
        "metrics at https://127.0.0.1:21057/metrics are unreadable: no answer within 3 s (timed out)"
    ));
}

#[test]
fn a_namespace_another_finding_explains_gets_no_stall_finding() {
    let s = recorded();
    let findings = diagnose(&s, &opts());
    assert!(
        findings
            .iter()
            .any(|f| f.kind() == FindingKind::NamespaceBlockedByDiscovery
                && f.subject.name == BLOCKED),
        "{findings:#?}"
    );
    assert!(stall(&findings, BLOCKED).is_none(), "{findings:#?}");
    // Namespaces not being deleted are never reported.
    assert!(
        findings
            .iter()
            .all(|f| f.kind() != FindingKind::NamespaceNotProgressing),
        "{findings:#?}"
    );
}

#[test]
fn conditions_that_explain_nothing_still_get_a_finding() {
    let mut s = recorded();
    // Edit: every condition of the blocked namespace set to False (the
    // controller has been at it and reports no failure), and no
    // discovery failure recorded by the collector.
    for c in namespace(&mut s, BLOCKED)
        .status
        .as_mut()
        .unwrap()
        .conditions
        .as_mut()
        .unwrap()
    {
        c.status = "False".into();
    }
    let findings = diagnose(&s, &opts());
    let f = stall(&findings, BLOCKED).expect("never silent");
    assert!(quotes(f, "no other finding explains"), "{:#?}", f.evidence);
    match &f.detail {
        FindingDetail::NamespaceNotProgressing(d) => assert!(d.has_conditions),
        d => panic!("{d:?}"),
    }
}

#[test]
fn a_namespace_under_the_threshold_is_not_reported() {
    let mut s = recorded();
    add_quiet(&mut s);
    renewed_ago(&mut s, 60);
    let findings = diagnose(
        &s,
        &DiagnoseOptions {
            stuck_after: Duration::from_secs(600),
            ..DiagnoseOptions::default()
        },
    );
    assert!(stall(&findings, "quiet").is_none(), "{findings:#?}");
}

#[test]
fn the_plan_changes_nothing_for_it() {
    let mut s = recorded();
    add_quiet(&mut s);
    renewed_ago(&mut s, 60);
    let findings = diagnose(&s, &opts());
    let p = plan(&findings, &s);
    let i = findings
        .iter()
        .position(|f| f.kind() == FindingKind::NamespaceNotProgressing)
        .unwrap();
    let steps: Vec<_> = p.steps.iter().filter(|st| st.finding_index == i).collect();
    assert_eq!(steps.len(), 1, "{p:#?}");
    assert!(
        matches!(&steps[0].action, Action::Refuse { reason, .. } if reason.contains("kube-controller-manager")),
        "{p:#?}"
    );
}

#[test]
fn the_kind_has_its_name() {
    let k: FindingKind = "NamespaceNotProgressing".parse().unwrap();
    assert_eq!(k, FindingKind::NamespaceNotProgressing);
    assert_eq!(k.to_string(), "NamespaceNotProgressing");
}

#[test]
fn metrics_survive_a_snapshot_file_and_old_files_read_without_them() {
    let mut s = recorded();
    assert!(s.controller_manager_metrics.is_none());
    s.controller_manager_metrics = Some(metrics(None, Some("refused")));
    let back: Snapshot = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
    assert_eq!(back, s);
}

#[test]
fn parses_the_recorded_metrics_of_a_real_controller_manager() {
    let text = doctor_support::recorded_text("real-v1.34.4/kcm-workqueue-metrics.txt");
    let q = parse_namespace_queue(&text).expect("the namespace queue is there");
    assert_eq!(q.depth, 0.0);
    // Recorded on a fresh cluster: no namespace had been deleted yet.
    assert_eq!(q.adds_total, 0.0, "{q:?}");
    // Other queues' series are not taken for the namespace queue.
    let others: String = text
        .lines()
        .filter(|l| !l.contains("name=\"namespace\""))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        others.contains("workqueue_depth{"),
        "the recording has other queues"
    );
    assert_eq!(parse_namespace_queue(&others), None);
}

/// Scenario 31's snapshot (OSM uninstalled, its CRDs' conversion webhook
/// Service gone), with namespace `quiet`'s conditions removed: the moment
/// before the namespace controller wrote any (the issue's "no cause could
/// be shown" 15 s after a deletion). The collector's own list of
/// multiclusterservices failed on the conversion webhook, and says so.
#[test]
fn a_namespace_without_conditions_names_the_conversion_webhook_its_lists_fail_on() {
    let mut s = doctor_support::load_snapshot("real-v1.34.4/crd-conversion-webhook-service-gone");
    namespace(&mut s, "quiet")
        .status
        .as_mut()
        .unwrap()
        .conditions = None;
    let findings = diagnose(&s, &opts());
    let stall = findings
        .iter()
        .find(|f| f.kind() == FindingKind::NamespaceNotProgressing && f.subject.name == "quiet")
        .unwrap_or_else(|| panic!("quiet is not progressing: {findings:#?}"));
    let FindingDetail::NamespaceNotProgressing(detail) = &stall.detail else {
        panic!("{:#?}", stall.detail);
    };
    assert_eq!(
        detail.cause,
        StallCause::ConversionWebhookFailing,
        "{stall:#?}"
    );
    assert_eq!(
        detail.failing_conversions,
        ["multiclusterservices.config.openservicemesh.io"],
        "{detail:?}"
    );
    let evidence = stall.evidence.join("\n");
    assert!(
        evidence.contains("the collector's own list of config.openservicemesh.io/v1alpha2 failed on multiclusterservices.config.openservicemesh.io's conversion webhook"),
        "{evidence}"
    );
    assert!(
        !stall.summary.contains("no cause could be shown"),
        "{}",
        stall.summary
    );
    // The graph leads from the namespace to the CRD, not to the controller.
    let p = plan(&findings, &s);
    let graph = unstuck_core::doctor::BlockerGraph::build(&findings, &p, &s);
    let ns = graph
        .nodes
        .iter()
        .find(|n| n.label.contains("quiet"))
        .expect("quiet is in the graph");
    let crd = graph
        .nodes
        .iter()
        .find(|n| {
            n.label
                .contains("multiclusterservices.config.openservicemesh.io")
        })
        .expect("the CRD is in the graph");
    assert!(
        graph
            .edges
            .iter()
            .any(|e| e.from == ns.id && e.to == crd.id),
        "{graph:#?}"
    );
    assert!(
        !graph
            .edges
            .iter()
            .any(|e| e.from == ns.id && e.to == "controller:namespace"),
        "{graph:#?}"
    );
}
