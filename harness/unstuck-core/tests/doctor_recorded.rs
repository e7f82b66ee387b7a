//! Diagnosis and planning replayed on snapshots recorded from a real
//! Kubernetes v1.34.4 local cluster while each scenario's failure was in
//! place (the runner saves what its doctor saw as snapshot.json; these are
//! copies). The cluster was shared by scenarios running side by side, so a
//! snapshot may hold other scenarios' stuck objects too: each test looks at
//! the objects its scenario broke, and at what the plan would touch.

mod doctor_support;

use std::time::Duration;

use unstuck_core::doctor::{Action, DiagnoseOptions, Finding, FindingKind, Plan, diagnose, plan};

use doctor_support::recorded;

/// The scenario runner's threshold.
fn opts() -> DiagnoseOptions {
    DiagnoseOptions {
        stuck_after: Duration::from_secs(3),
        ..Default::default()
    }
}

fn run(name: &str) -> (Vec<Finding>, Plan) {
    let s = recorded(name);
    let findings = diagnose(&s, &opts());
    let p = plan(&findings, &s);
    (findings, p)
}

fn finding<'a>(findings: &'a [Finding], kind: FindingKind, name_prefix: &str) -> &'a Finding {
    findings
        .iter()
        .find(|f| f.kind() == kind && f.subject.name.starts_with(name_prefix))
        .unwrap_or_else(|| {
            panic!(
                "no {kind:?} for {name_prefix}*; found {:#?}",
                findings
                    .iter()
                    .map(|f| (f.kind(), &f.subject.name))
                    .collect::<Vec<_>>()
            )
        })
}

fn removals_for<'a>(
    p: &'a Plan,
    name_prefix: &str,
) -> Vec<&'a unstuck_core::doctor::RemoveFinalizers> {
    p.steps
        .iter()
        .filter_map(|s| match &s.action {
            Action::RemoveFinalizers(r) if r.target.name.starts_with(name_prefix) => Some(r),
            _ => None,
        })
        .collect()
}

#[test]
fn orphan_configmap_gets_only_its_dead_key_removed() {
    let (findings, p) = run("orphan-finalizer-configmap");
    let f = finding(&findings, FindingKind::OrphanFinalizer, "mymap");
    assert_eq!(f.subject.kind, "ConfigMap");
    let r = removals_for(&p, "mymap");
    assert_eq!(r.len(), 1, "{}", p.render_dry_run());
    assert_eq!(r[0].remove, vec!["kubernetes".to_string()]);
    let patch = r[0].json_patch();
    let ops = patch.as_array().expect("a JSON patch");
    let test_of = |path: &str| {
        ops.iter()
            .position(|o| o["op"] == "test" && o["path"] == path)
            .unwrap_or_else(|| panic!("the patch tests {path}: {patch}"))
    };
    let replace = ops
        .iter()
        .position(|o| o["op"] == "replace")
        .expect("a replace");
    // The uid, the resourceVersion read and the current list are tested
    // before the list is replaced.
    assert!(test_of("/metadata/uid") < replace);
    assert!(test_of("/metadata/resourceVersion") < replace);
    let list = test_of("/metadata/finalizers");
    assert!(list < replace, "{patch}");
    assert_eq!(ops[list]["value"], serde_json::json!(["kubernetes"]));
}

#[test]
fn uninstalled_crd_controller_frees_the_kiali_resource_not_the_namespace() {
    let (findings, p) = run("uninstalled-crd-controller");
    let cr = finding(&findings, FindingKind::OrphanFinalizer, "kiali");
    assert_eq!(cr.subject.kind, "Kiali");
    let ns = finding(&findings, FindingKind::NamespaceBlockedByContent, "istio-");
    assert!(
        ns.evidence
            .iter()
            .chain([&ns.summary])
            .any(|e| e.contains("kialis.kiali.io")),
        "{ns:#?}"
    );
    let r = removals_for(&p, "kiali");
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].remove, vec!["kiali.io/finalizer".to_string()]);
    assert!(
        !p.steps.iter().any(
            |s| matches!(&s.action, Action::FinalizeNamespace(f) if f.name.starts_with("istio-"))
        ),
        "content remains, so /finalize must not be planned:\n{}",
        p.render_dry_run()
    );
}

#[test]
fn dead_metrics_apiservice_is_deleted_with_preconditions_and_the_namespace_waits() {
    let s = doctor_support::with_missing_backend(
        recorded("dead-metrics-apiservice"),
        "v1beta1.metrics.k8s.io",
    );
    let findings = diagnose(&s, &opts());
    let p = plan(&findings, &s);
    let dead = finding(
        &findings,
        FindingKind::DeadApiService,
        "v1beta1.metrics.k8s.io",
    );
    assert!(
        dead.evidence.iter().any(|e| e.contains("ServiceNotFound")),
        "{dead:#?}"
    );
    finding(&findings, FindingKind::NamespaceBlockedByDiscovery, "app-");
    let deletes: Vec<_> = p
        .steps
        .iter()
        .filter_map(|s| match &s.action {
            Action::DeleteApiService(d) => Some(d),
            _ => None,
        })
        .collect();
    assert_eq!(deletes.len(), 1, "{}", p.render_dry_run());
    assert_eq!(deletes[0].name, "v1beta1.metrics.k8s.io");
    assert!(!deletes[0].uid.is_empty() && !deletes[0].resource_version.is_empty());
    // Healthy local APIServices (v1.apps, ...) are in the snapshot and never touched.
    let s = recorded("dead-metrics-apiservice");
    assert!(s.api_services.len() > 10);
}

#[test]
fn live_controller_finalizer_is_left_alone() {
    let (findings, p) = run("live-controller-finalizer");
    let f = finding(
        &findings,
        FindingKind::WaitingOnLiveController,
        "slow-cleanup",
    );
    assert!(
        f.evidence.iter().any(|e| e.contains("live.unstuck.dev")),
        "{f:#?}"
    );
    assert!(
        removals_for(&p, "slow-cleanup").is_empty(),
        "{}",
        p.render_dry_run()
    );
    assert!(
        !findings
            .iter()
            .any(|f| f.kind() == FindingKind::OrphanFinalizer && f.subject.name == "slow-cleanup")
    );
}

#[test]
fn pvc_protection_on_a_claim_in_use_is_never_stripped() {
    let (findings, p) = run("pvc-protection-in-use");
    let f = finding(&findings, FindingKind::ProtectedFinalizerInUse, "data");
    assert_eq!(f.subject.kind, "PersistentVolumeClaim");
    assert!(
        removals_for(&p, "data").is_empty(),
        "{}",
        p.render_dry_run()
    );
}

#[test]
fn namespace_left_a_removed_products_finalizer_gets_that_key_removed() {
    let (findings, p) = run("namespace-metadata-finalizer");
    let f = finding(
        &findings,
        FindingKind::NamespaceOrphanMetadataFinalizer,
        "app-",
    );
    let r = removals_for(&p, &f.subject.name);
    assert_eq!(r.len(), 1, "{}", p.render_dry_run());
    assert_eq!(r[0].target.kind, "Namespace");
    assert_eq!(
        r[0].remove,
        vec!["finalizers.kubesphere.io/namespaces".to_string()]
    );
}

/// The namespace controller's own messages, from objects read off the
/// cluster with kubectl while the namespaces were stuck.
mod condition_messages {
    use k8s_openapi::api::core::v1::Namespace;
    use unstuck_core::doctor::conditions::{
        parse_content_remaining, parse_discovery_failure, parse_finalizers_remaining,
    };

    fn namespace(file: &str) -> Namespace {
        super::doctor_support::read_recorded(format!("v1.34.4/{file}"))
    }

    fn message(ns: &Namespace, type_: &str) -> String {
        let conds = ns
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .expect("conditions");
        conds
            .iter()
            .find(|c| c.type_ == type_)
            .and_then(|c| c.message.clone())
            .expect("condition message")
    }

    #[test]
    fn content_and_finalizers_remaining_parse_to_resource_and_key_counts() {
        let ns = namespace("namespace-content-remaining.json");
        let content = parse_content_remaining(&message(&ns, "NamespaceContentRemaining"));
        assert_eq!(content.len(), 1);
        assert_eq!(
            (
                content[0].resource.as_str(),
                content[0].group.as_str(),
                content[0].count
            ),
            ("kialis", "kiali.io", 1)
        );
        let fins = parse_finalizers_remaining(&message(&ns, "NamespaceFinalizersRemaining"));
        assert_eq!(fins.len(), 1);
        assert_eq!(
            (fins[0].finalizer.as_str(), fins[0].count),
            ("kiali.io/finalizer", 1)
        );
    }

    #[test]
    fn discovery_failure_names_the_dead_group_version() {
        let ns = namespace("namespace-discovery-failure.json");
        let gvs = parse_discovery_failure(&message(&ns, "NamespaceDeletionDiscoveryFailure"));
        assert_eq!(gvs, vec!["metrics.k8s.io/v1beta1".to_string()]);
    }
}

/// The stuck pod's finding, its hint and the plan's step for it.
fn pod_step(name: &str, pod: &str) -> (Finding, unstuck_core::doctor::PodStuckHint, Action, Plan) {
    let (findings, p) = run(name);
    let (i, f) = findings
        .iter()
        .enumerate()
        .find(|(_, f)| f.kind() == FindingKind::PodStuckTerminating && f.subject.name == pod)
        .unwrap_or_else(|| panic!("{findings:#?}"));
    let unstuck_core::doctor::FindingDetail::PodStuckTerminating { hint, .. } = &f.detail else {
        panic!("{:?}", f.detail)
    };
    let step = p.steps.iter().find(|s| s.finding_index == i).unwrap();
    (f.clone(), *hint, step.action.clone(), p)
}

#[test]
fn a_pod_whose_final_delete_a_dead_webhook_rejects_is_explained_by_it() {
    // kyverno/kyverno#2750: the containers are gone, the kubelet's final
    // DELETE is rejected. Before, this read "most likely a volume".
    let (f, hint, action, p) = pod_step("kyverno-webhook-blocks-final-pod-delete", "kyverno-app");
    assert_eq!(hint, unstuck_core::doctor::PodStuckHint::DeleteRejected);
    assert!(
        f.summary.contains("final DELETE is rejected"),
        "{}",
        f.summary
    );
    assert!(
        f.evidence
            .iter()
            .any(|e| e.contains("validate.kyverno.svc-fail") && e.contains("matches pod DELETE")),
        "{:#?}",
        f.evidence
    );
    // The pod itself waits; the one change is the webhook's fail-open,
    // planned before anything else that changes the cluster.
    assert!(matches!(action, Action::Wait { .. }), "{action:?}");
    let first_change = p
        .steps
        .iter()
        .find(|s| s.action.is_mutating())
        .expect("a change");
    assert!(
        matches!(first_change.action, Action::SetWebhookFailurePolicy(_)),
        "{}",
        p.render_dry_run()
    );
}

#[test]
fn a_pod_held_by_a_failing_network_teardown_is_not_called_a_runtime_or_node_fault() {
    // projectcalico/calico#7958: FailedKillPod quotes the CNI DEL failing;
    // the node is NotReady (network not ready) but its kubelet answers.
    let (f, hint, action, _) = pod_step("calico-cni-teardown-fails", "calico-kube-controllers");
    assert_eq!(hint, unstuck_core::doctor::PodStuckHint::NetworkTeardown);
    assert!(
        f.summary
            .contains("the network plugin fails to tear down its sandbox"),
        "{}",
        f.summary
    );
    let Action::Refuse { reason, .. } = action else {
        panic!("{action:?}")
    };
    assert!(
        reason.contains("repair the network plugin") && reason.contains("does not help"),
        "{reason}"
    );
}

/// A finding's kind is the variant of its facts: written out, `kind` and
/// `detail.type` agree for every finding of every recorded snapshot, and
/// what is read back is the same finding. Between them the recordings
/// raise most kinds; each kind seen is one the doctor can name.
#[test]
fn every_recorded_finding_writes_its_kind_as_its_facts_type_and_reads_back() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/recorded/real-v1.34.4");
    let mut seen = std::collections::BTreeSet::new();
    for entry in std::fs::read_dir(&dir).expect("recorded snapshots") {
        let path = entry.expect("entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let name = path.file_stem().unwrap().to_str().unwrap().to_owned();
        let (findings, _) = run(&name);
        for f in &findings {
            let json = serde_json::to_value(f).expect("a finding serialises");
            assert_eq!(json["kind"], f.kind().as_str(), "{name}");
            assert_eq!(json["detail"]["type"], json["kind"], "{name}: {json:#}");
            let back: Finding = serde_json::from_value(json).expect("reads back");
            assert_eq!(&back, f, "{name}");
            seen.insert(f.kind());
        }
    }
    assert!(
        seen.len() >= 15,
        "the recordings should raise most kinds, saw {seen:?}"
    );
}
