//! Installed but not serving (issue 27), replayed on the snapshots the
//! runner saved from real v1.34.4 local clusters on 2026-11-29: scenario
//! 50's aggregated adapter whose pod crash-loops (exit 3, a termination
//! message), and scenario 51's namespace policy webhook whose only pod
//! never starts (ErrImageNeverPull) in front of a dead namespace finalizer.
//! The doctor follows each backend to the pod and the component's own
//! words, deletes nothing, fails nothing open, and never plans a write the
//! webhook would fail.

mod doctor_support;

use std::time::Duration;

use doctor_support::load_snapshot;
use unstuck_core::doctor::{
    Action, ApiServiceFacts, BlockerGraph, DiagnoseOptions, FindingDetail, FindingKind, diagnose,
    plan,
};

fn opts() -> DiagnoseOptions {
    DiagnoseOptions {
        stuck_after: Duration::from_secs(3),
        ..Default::default()
    }
}

#[test]
fn an_apiservice_whose_backend_crash_loops_is_followed_to_the_crash() {
    let s = load_snapshot("real-v1.34.4/apiservice-backend-crash-loops");
    let findings = diagnose(&s, &opts());
    let api = findings
        .iter()
        .find(|f| f.kind() == FindingKind::ApiServiceUnavailable)
        .expect("the APIService is unavailable, not dead");
    assert!(
        !findings
            .iter()
            .any(|f| f.kind() == FindingKind::DeadApiService),
        "{findings:#?}"
    );
    let evidence = api.evidence.join("\n");
    for words in [
        "pod metrics-adapter-0 restarted recently",
        "container adapter last terminated (Error, exit code 3",
        "adapter: cannot load /etc/adapter/config.yaml: no such file or directory",
    ] {
        assert!(evidence.contains(words), "{words:?} not in\n{evidence}");
    }
    let p = plan(&findings, &s);
    let refusal = p
        .steps
        .iter()
        .find_map(|st| match &st.action {
            Action::Refuse { reason, .. } if reason.contains("APIService") => Some(reason.clone()),
            _ => None,
        })
        .expect("the APIService step is a refusal");
    assert!(
        refusal.contains("does not serve: pod metrics-adapter-0: container adapter last terminated (Error, exit code 3"),
        "{refusal}"
    );
    assert_eq!(p.mutating_steps().count(), 0, "{p:#?}");
    // The graph's root is the backend's cause, not "unknown".
    let graph = BlockerGraph::build(&findings, &p, &s);
    let service = graph
        .nodes
        .iter()
        .find(|n| n.id.starts_with("service:"))
        .expect("the Service is in the graph");
    let detail = service.detail.as_deref().unwrap_or_default();
    assert!(
        detail.starts_with("not serving, not proven gone: pod metrics-adapter-0:")
            && detail.contains("exit code 3"),
        "{detail}"
    );
}

#[test]
fn a_namespace_webhook_whose_backend_never_starts_blocks_the_finalizer_patch() {
    let s = load_snapshot("real-v1.34.4/webhook-backend-not-serving");
    let findings = diagnose(&s, &opts());
    let webhook = findings
        .iter()
        .find(|f| f.kind() == FindingKind::WebhookBackendFailing)
        .expect("the webhook is named as the blocker");
    let FindingDetail::WebhookBackendFailing {
        verdict,
        quote,
        rejects,
        ..
    } = &webhook.detail
    else {
        panic!("{webhook:#?}")
    };
    assert_eq!(verdict, "not serving");
    assert_eq!(
        quote,
        "no endpoints available for service \"policy-webhook\""
    );
    assert_eq!(rejects.len(), 1, "{rejects:#?}");
    assert_eq!(rejects[0].resource, "namespaces");
    let evidence = webhook.evidence.join("\n");
    for words in [
        "its backend does not serve: pod policy-webhook-0: container webhook waiting (ErrImageNeverPull)",
        "is not present with pull policy of Never",
        "not failed open",
    ] {
        assert!(evidence.contains(words), "{words:?} not in\n{evidence}");
    }
    // The finalizer's finding says which webhook stands in its way.
    let finalizer = findings
        .iter()
        .find(|f| f.kind() == FindingKind::NamespaceOrphanMetadataFinalizer)
        .expect("the dead finalizer");
    assert!(
        finalizer
            .evidence
            .iter()
            .any(|e| e.contains("which webhook \"validate.namespaces.policy.example.com\"")),
        "{finalizer:#?}"
    );
    // The finalizer patch is held back behind the webhook (the apply
    // leaves it, saying why), and the webhook is not failed open.
    let p = plan(&findings, &s);
    assert_eq!(p.blocked.len(), 1, "{p:#?}");
    assert_eq!(
        p.blocked[0].webhook,
        "validate.namespaces.policy.example.com"
    );
    assert_eq!(p.blocked[0].failing.as_deref(), Some("not serving"));
    assert!(
        p.steps.iter().any(|st| matches!(st.action, Action::RemoveFinalizers(_))
            && st.rationale.contains("with --allow-webhook-changes the doctor opens that one webhook (failurePolicy Ignore) for this write only")),
        "{p:#?}"
    );
    assert!(
        !p.steps
            .iter()
            .any(|st| matches!(st.action, Action::SetWebhookFailurePolicy(_))),
        "{p:#?}"
    );
}

#[test]
fn a_not_serving_webhook_that_holds_nothing_is_not_reported() {
    // The same cluster without the stuck namespace: the webhook's
    // backend still does not serve, but nothing waits on it.
    let mut s = load_snapshot("real-v1.34.4/webhook-backend-not-serving");
    s.namespaces
        .retain(|n| n.metadata.deletion_timestamp.is_none());
    s.terminating.retain(|r| r.kind != "Namespace");
    let findings = diagnose(&s, &opts());
    assert!(
        !findings
            .iter()
            .any(|f| f.kind() == FindingKind::WebhookBackendFailing),
        "{findings:#?}"
    );
}

#[test]
fn an_apiservice_whose_service_is_proven_gone_is_a_leftover_not_an_installed_owner() {
    use unstuck_core::doctor::{
        OwnerVerdict,
        owner::{OwnerQuery, owner_verdict},
        snapshot::ObjectRecord,
    };
    // Scenario 50's cluster after its product was uninstalled by deleting
    // its namespace: the APIService stays, its Service is gone (the
    // collector's GET returned 404), and an object still carries the
    // product's finalizer.
    let mut s = load_snapshot("real-v1.34.4/apiservice-backend-crash-loops");
    let group = s.api_services.iter().find_map(|a| {
        let spec = a.spec.as_ref()?;
        spec.service.as_ref()?;
        spec.group.clone()
    });
    let group = group.expect("the recorded aggregated APIService");
    for l in &mut s.api_service_backends {
        l.exists = false;
        l.ready_endpoints = None;
        l.reads.clear();
        l.pods = None;
    }
    let key = format!("{group}/cleanup");
    let mut meta = s.namespaces[0].metadata.clone();
    meta.name = Some("leftover-settings".into());
    meta.namespace = Some("default".into());
    meta.finalizers = Some(vec![key.clone()]);
    meta.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        s.taken_at - k8s_openapi::jiff::SignedDuration::from_secs(600),
    ));
    meta.managed_fields = None;
    let record = ObjectRecord {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        resource: "configmaps".into(),
        namespaced: true,
        metadata: meta,
    };
    let v = owner_verdict(
        &OwnerQuery {
            finalizer: &key,
            kind: "ConfigMap",
            record: Some(&record),
            assume_dead: &[],
        },
        &s,
    )
    .verdict;
    let text = v.evidence().join("\n");
    assert!(v.is_dead(), "{text}");
    assert!(
        text.contains("left behind: APIService") && text.contains("proven gone (ServiceNotFound)"),
        "{text}"
    );
    assert!(!matches!(v, OwnerVerdict::Unknown { .. }));
}

/// Scenario 50's snapshot judged against a bound: the outage it records
/// (the adapter crash-looping since its APIService was made).
fn outage_opts(bound: Duration, allowed: &[&str]) -> DiagnoseOptions {
    DiagnoseOptions {
        stuck_after: Duration::from_secs(3),
        apiservice_outage_after: bound,
        allow_apiservice_removal: allowed.iter().map(|n| n.to_string()).collect(),
        ..Default::default()
    }
}

/// The adapter's registration as recorded (the runner renamed the group
/// after the run's `metrics` namespace).
const ADAPTER: &str = "v1beta1.custom-metrics-00zbqx.example.com";

fn apiservice_step(p: &unstuck_core::doctor::Plan) -> &unstuck_core::doctor::PlannedStep {
    p.steps
        .iter()
        .find(|st| match &st.action {
            Action::Refuse { reason, .. } => reason.contains(ADAPTER),
            Action::DeleteApiService(d) => d.name == ADAPTER,
            _ => false,
        })
        .unwrap_or_else(|| panic!("no step for {ADAPTER}: {p:#?}"))
}

#[test]
fn an_apiservice_outage_is_measured_on_the_servers_clock_and_kept_under_its_bound() {
    let s = load_snapshot("real-v1.34.4/apiservice-backend-crash-loops");
    let findings = diagnose(&s, &outage_opts(Duration::from_secs(3600), &[ADAPTER]));
    let api = findings
        .iter()
        .find(|f| f.kind() == FindingKind::ApiServiceUnavailable)
        .expect("the APIService is unavailable");
    let Some(ApiServiceFacts {
        outage: Some(o), ..
    }) = api.detail.api_service()
    else {
        panic!("no outage recorded: {:#?}", api.detail);
    };
    // Measured from the condition's lastTransitionTime to the snapshot's
    // own time, never this machine's clock: a replay days later sees the
    // same figure.
    assert!(o.lasted_secs > 3 && o.lasted_secs < 600, "{o:?}");
    assert!(o.cause.contains("exit code 3"), "{o:?}");
    assert!(o.removal_allowed && !o.sustained(), "{o:?}");
    let p = plan(&findings, &s);
    let step = apiservice_step(&p);
    assert!(
        matches!(&step.action, Action::Refuse { reason, .. } if reason.contains("under the --apiservice-outage-after bound of 1h0m0s")),
        "named but under the bound: {step:#?}"
    );
    assert_eq!(p.mutating_steps().count(), 0, "{p:#?}");
}

#[test]
fn a_sustained_apiservice_outage_names_the_flag_and_removes_nothing_unnamed() {
    let s = load_snapshot("real-v1.34.4/apiservice-backend-crash-loops");
    let findings = diagnose(&s, &outage_opts(Duration::from_secs(3), &[]));
    let p = plan(&findings, &s);
    let step = apiservice_step(&p);
    let Action::Refuse { reason, .. } = &step.action else {
        panic!("not named, yet {step:#?}");
    };
    for words in [
        "past the --apiservice-outage-after bound of 3s",
        "blocks deletion of namespace(s)",
        "--allow-apiservice-removal=v1beta1.custom-metrics-00zbqx.example.com",
        "exit code 3",
    ] {
        assert!(reason.contains(words), "{words:?} not in {reason}");
    }
    assert_eq!(p.mutating_steps().count(), 0, "{p:#?}");
    // Another APIService named is no consent for this one.
    let other = diagnose(
        &s,
        &outage_opts(Duration::from_secs(3), &["v1beta1.metrics.k8s.io"]),
    );
    assert_eq!(plan(&other, &s).mutating_steps().count(), 0);
}

#[test]
fn a_named_apiservice_past_its_outage_bound_is_deleted_with_preconditions() {
    let s = load_snapshot("real-v1.34.4/apiservice-backend-crash-loops");
    let findings = diagnose(&s, &outage_opts(Duration::from_secs(3), &[ADAPTER]));
    let p = plan(&findings, &s);
    let Action::DeleteApiService(d) = &apiservice_step(&p).action else {
        panic!("named and past the bound, yet {p:#?}");
    };
    let api = s.api_service(ADAPTER).expect("in the snapshot");
    assert_eq!(Some(&d.uid), api.metadata.uid.as_ref());
    assert_eq!(
        Some(&d.resource_version),
        api.metadata.resource_version.as_ref()
    );
    assert!(d.reason.contains("exit code 3"), "{d:?}");
    let mutating: Vec<&str> = p.mutating_steps().map(|s| s.action.name()).collect();
    assert_eq!(mutating, ["DeleteApiService"], "{p:#?}");
}

/// Scenario 52 recorded (2026-12-07, local v1.34.4), 9 s after namespace
/// `app-67yfse` was deleted with its last pod draining for 60 s: past the
/// harness's 3 s stuck-after, and normal. Ordered namespace deletion has
/// left its ConfigMap, ServiceAccount and Events for after the pod.
#[test]
fn a_namespace_whose_last_pod_drains_its_grace_period_is_normal_not_blamed() {
    let s = load_snapshot("real-v1.34.4/pod-in-grace-period");
    let findings = diagnose(&s, &opts());
    assert!(
        !findings.iter().any(|f| matches!(
            f.kind(),
            FindingKind::NamespaceNotProgressing | FindingKind::PodStuckTerminating
        )),
        "{findings:#?}"
    );
    let normal = unstuck_core::doctor::normal::normal_so_far(&s, Duration::from_secs(3), &findings);
    let lines: Vec<String> = normal.iter().map(|n| n.line()).collect();
    let ns = lines
        .iter()
        .find(|l| l.starts_with("namespace app-67yfse: terminating, normal so far"))
        .unwrap_or_else(|| panic!("{lines:#?}"));
    for words in [
        "Pod app-67yfse/slow-stop: terminating inside its grace period, which ends at 2026-12-07T05:44:14Z",
        "ConfigMap app-67yfse/kube-root-ca.crt: not deleted yet (pods go first)",
        "(until 2026-12-07T05:44:14Z)",
    ] {
        assert!(ns.contains(words), "{words:?} not in {ns}");
    }
    assert!(
        lines.iter().any(|l| l.starts_with(
            "Pod app-67yfse/slow-stop: terminating, normal so far: inside its grace period (60 s;"
        )),
        "{lines:#?}"
    );
}

/// Scenario 53 recorded (2026-12-07, local v1.34.4): a product uninstalled
/// by deleting its namespace left its APIService (Service 404) and its
/// cleanup finalizer on a ConfigMap in `app-fi4ym4`. The registration is
/// a leftover for the finalizer's owner verdict too: one plan deletes it
/// and removes the dead key.
#[test]
fn a_product_uninstalled_by_its_namespace_leaves_leftovers_one_plan_removes() {
    let s = load_snapshot("real-v1.34.4/product-uninstalled-by-namespace");
    let findings = diagnose(&s, &opts());
    let kinds: Vec<FindingKind> = findings.iter().map(|f| f.kind()).collect();
    assert!(kinds.contains(&FindingKind::DeadApiService), "{kinds:?}");
    let orphan = findings
        .iter()
        .find(|f| f.kind() == FindingKind::OrphanFinalizer && f.subject.name == "product-state")
        .unwrap_or_else(|| panic!("{findings:#?}"));
    let evidence = orphan.evidence.join("\n");
    assert!(
        evidence.contains("v1alpha1.storage-fi4ym4.product.example.com"),
        "the leftover registration is named: {evidence}"
    );
    let p = plan(&findings, &s);
    let mut mutating: Vec<&str> = p.mutating_steps().map(|st| st.action.name()).collect();
    mutating.sort();
    assert_eq!(mutating, ["DeleteApiService", "RemoveFinalizers"], "{p:#?}");
}
