//! Planning on recorded snapshots: least force first, never touch what is
//! alive, in use or healthy, exact API calls.

mod doctor_support;

use doctor_support::{diagnose_and_plan, load_snapshot, with_missing_backend};
use serde_json::json;
use unstuck_core::doctor::backend::EndpointRead;
use unstuck_core::doctor::plan::{FORCE_DELETE_REGISTRATION, FORCE_FINALIZE, FORCE_OBSERVE};
use unstuck_core::doctor::{
    Action, FinalizeError, FinalizeNamespace, FindingKind, ObjectTarget, Plan, RemoveFinalizers,
    ServiceKey, ServiceLookup, plan,
};

fn s(x: &str) -> String {
    x.to_owned()
}

fn removals(plan: &Plan) -> Vec<&RemoveFinalizers> {
    plan.steps
        .iter()
        .filter_map(|s| match &s.action {
            Action::RemoveFinalizers(r) => Some(r),
            _ => None,
        })
        .collect()
}

fn assert_least_force_first(plan: &Plan) {
    let levels: Vec<u8> = plan.steps.iter().map(|s| s.force_level).collect();
    let mut sorted = levels.clone();
    sorted.sort();
    assert_eq!(levels, sorted, "steps must be ordered by force level");
}

#[test]
fn orphan_configmap_plan_removes_only_dead_keys() {
    let snap = load_snapshot("orphan-configmap");
    let (findings, plan) = diagnose_and_plan(&snap);
    assert_eq!(plan.steps.len(), findings.len());
    assert_least_force_first(&plan);

    // The live controller's finding is a Wait, first (force 0).
    assert!(matches!(plan.steps[0].action, Action::Wait { .. }));
    assert_eq!(plan.steps[0].force_level, FORCE_OBSERVE);
    assert_eq!(
        findings[plan.steps[0].finding_index].kind(),
        FindingKind::WaitingOnLiveController
    );

    let rs = removals(&plan);
    assert_eq!(rs.len(), 3);
    let mymap = rs.iter().find(|r| r.target.name == "mymap").unwrap();
    assert_eq!(mymap.current, vec![s("example.com/never-removed")]);
    assert_eq!(mymap.remove, vec![s("example.com/never-removed")]);
    assert_eq!(
        mymap.target.api_path(),
        "/api/v1/namespaces/orphan-cm/configmaps/mymap"
    );
    assert_eq!(mymap.target.resource_version.as_deref(), Some("50201"));

    // Mixed with a served key: only the dead key goes, the served one stays.
    let mixed = rs.iter().find(|r| r.target.name == "mixed").unwrap();
    assert_eq!(
        mixed.current,
        vec![s("widgets.acme.io/cleanup"), s("example.com/never-removed")]
    );
    assert_eq!(mixed.remove, vec![s("example.com/never-removed")]);
    assert_eq!(mixed.kept(), vec![s("widgets.acme.io/cleanup")]);
    assert_eq!(
        mixed.json_patch(),
        json!([
            {"op": "test", "path": "/metadata/uid", "value": "d2e1f0a9-4b5c-4d6e-9f0a-1b2c3d4e5f60"},
            {"op": "test", "path": "/metadata/resourceVersion", "value": "50207"},
            {"op": "test", "path": "/metadata/finalizers", "value": ["widgets.acme.io/cleanup", "example.com/never-removed"]},
            {"op": "replace", "path": "/metadata/finalizers", "value": ["widgets.acme.io/cleanup"]},
        ])
    );
    // Nothing ever removes the served key.
    for r in &rs {
        assert!(!r.remove.contains(&s("widgets.acme.io/cleanup")));
    }
}

#[test]
fn json_patch_exact_shape_when_all_keys_removed() {
    let r = RemoveFinalizers {
        target: ObjectTarget {
            api_version: s("v1"),
            kind: s("ConfigMap"),
            resource: s("configmaps"),
            namespace: Some(s("x")),
            name: s("mymap"),
            uid: s("c1f0e7d2-3a4b-4c5d-8e9f-0a1b2c3d4e5f"),
            resource_version: Some(s("50201")),
        },
        current: vec![s("example.com/never-removed")],
        remove: vec![s("example.com/never-removed")],
    };
    // `[]`, never `null`.
    assert_eq!(
        serde_json::to_string(&r.json_patch()).unwrap(),
        r#"[{"op":"test","path":"/metadata/uid","value":"c1f0e7d2-3a4b-4c5d-8e9f-0a1b2c3d4e5f"},{"op":"test","path":"/metadata/resourceVersion","value":"50201"},{"op":"test","path":"/metadata/finalizers","value":["example.com/never-removed"]},{"op":"replace","path":"/metadata/finalizers","value":[]}]"#
    );
    // Without a known resourceVersion only the uid and the list are tested.
    let mut unread = r.clone();
    unread.target.resource_version = None;
    assert_eq!(
        serde_json::to_string(&unread.json_patch()).unwrap(),
        r#"[{"op":"test","path":"/metadata/uid","value":"c1f0e7d2-3a4b-4c5d-8e9f-0a1b2c3d4e5f"},{"op":"test","path":"/metadata/finalizers","value":["example.com/never-removed"]},{"op":"replace","path":"/metadata/finalizers","value":[]}]"#
    );
}

#[test]
fn api_paths_for_core_group_and_cluster_scoped() {
    let mut t = ObjectTarget {
        api_version: s("example.com/v1"),
        kind: s("Widget"),
        resource: s("widgets"),
        namespace: Some(s("crd-ns")),
        name: s("w1"),
        uid: s("u"),
        resource_version: None,
    };
    assert_eq!(
        t.api_path(),
        "/apis/example.com/v1/namespaces/crd-ns/widgets/w1"
    );
    t.namespace = None;
    assert_eq!(t.api_path(), "/apis/example.com/v1/widgets/w1");
    let ns = ObjectTarget {
        api_version: s("v1"),
        kind: s("Namespace"),
        resource: s("namespaces"),
        namespace: None,
        name: s("kubesphere-ns"),
        uid: s("u"),
        resource_version: None,
    };
    assert_eq!(ns.api_path(), "/api/v1/namespaces/kubesphere-ns");
}

#[test]
fn cr_in_terminating_namespace_plan_patches_cr_and_waits_for_namespace() {
    let snap = load_snapshot("crd-namespace");
    let (findings, plan) = diagnose_and_plan(&snap);
    assert_least_force_first(&plan);
    assert_eq!(plan.steps.len(), 2);
    assert!(matches!(plan.steps[0].action, Action::Wait { .. }));
    assert_eq!(
        findings[plan.steps[0].finding_index].kind(),
        FindingKind::NamespaceBlockedByContent
    );
    assert!(
        plan.steps[0].rationale.contains("#1 OrphanFinalizer"),
        "{}",
        plan.steps[0].rationale
    );
    let Action::RemoveFinalizers(r) = &plan.steps[1].action else {
        panic!("{:?}", plan.steps[1].action)
    };
    assert_eq!(
        r.target.api_path(),
        "/apis/example.com/v1/namespaces/crd-ns/widgets/w1"
    );
    assert_eq!(r.kept(), Vec::<String>::new());
    // The plan never finalizes a namespace that still has content.
    assert!(
        plan.steps
            .iter()
            .all(|s| !matches!(s.action, Action::FinalizeNamespace(_)))
    );
}

#[test]
fn dead_apiservice_deleted_with_preconditions_healthy_untouched() {
    let snap = with_missing_backend(load_snapshot("dead-apiservice"), "v1beta1.metrics.k8s.io");
    let (findings, plan) = diagnose_and_plan(&snap);
    assert_least_force_first(&plan);
    let deletes: Vec<_> = plan
        .steps
        .iter()
        .filter_map(|s| match &s.action {
            Action::DeleteApiService(d) => Some((s, d)),
            _ => None,
        })
        .collect();
    assert_eq!(deletes.len(), 1);
    let (step, d) = deletes[0];
    assert_eq!(step.force_level, FORCE_DELETE_REGISTRATION);
    assert_eq!(d.name, "v1beta1.metrics.k8s.io");
    assert_eq!(d.uid, "91a2b3c4-d5e6-4f70-8192-a3b4c5d6e7f8");
    assert_eq!(d.resource_version, "50210");
    assert_eq!(
        d.api_path(),
        "/apis/apiregistration.k8s.io/v1/apiservices/v1beta1.metrics.k8s.io"
    );
    assert_eq!(
        d.delete_options(),
        json!({"apiVersion": "v1", "kind": "DeleteOptions",
               "preconditions": {"uid": "91a2b3c4-d5e6-4f70-8192-a3b4c5d6e7f8", "resourceVersion": "50210"}})
    );
    // The namespace waits; it is not finalized while discovery fails.
    let ns_step = plan
        .steps
        .iter()
        .find(|s| findings[s.finding_index].kind() == FindingKind::NamespaceBlockedByDiscovery)
        .unwrap();
    assert!(matches!(ns_step.action, Action::Wait { .. }));
    // No step at all for the healthy or local APIService.
    let text = plan.render_dry_run();
    assert!(!text.contains("wardle"));
    assert!(!text.contains("v1.apps"));
}

#[test]
fn dead_apiservice_not_blocking_and_service_present_is_refused() {
    let mut snap = load_snapshot("dead-apiservice");
    // No namespace blocked, and the Service exists but has had no ready
    // endpoint at two reads six seconds apart, with no pod to restart.
    let read = |at: &str| EndpointRead {
        at: at.parse().unwrap(),
        slices: 1,
        ready: 0,
        not_ready: 0,
    };
    snap.api_service_backends.push(ServiceLookup {
        service: ServiceKey {
            namespace: s("monitoring"),
            name: s("prometheus-adapter"),
        },
        exists: true,
        ready_endpoints: Some(0),
        service_type: Some(s("ClusterIP")),
        has_selector: Some(true),
        reads: vec![read("2025-06-01T11:59:00Z"), read("2025-06-01T11:59:06Z")],
        pods: Some(vec![]),
        ..Default::default()
    });
    snap.namespaces
        .retain(|n| n.metadata.name.as_deref() != Some("apisvc-ns"));
    let api = snap
        .api_services
        .iter_mut()
        .find(|a| a.metadata.name.as_deref() == Some("v1beta1.metrics.k8s.io"))
        .unwrap();
    let cond = &mut api.status.as_mut().unwrap().conditions.as_mut().unwrap()[0];
    cond.reason = Some(s("MissingEndpoints"));
    cond.message = Some(s(
        "endpoints for service/prometheus-adapter in \"monitoring\" have no addresses with port name \"https\"",
    ));
    let (findings, plan) = diagnose_and_plan(&snap);
    assert_eq!(findings.len(), 1);
    assert_eq!(findings[0].kind(), FindingKind::DeadApiService);
    assert_eq!(plan.steps.len(), 1);
    let Action::Refuse { reason, .. } = &plan.steps[0].action else {
        panic!("{:?}", plan.steps[0].action)
    };
    assert!(reason.contains("restore the backend"), "{reason}");
}

#[test]
fn plan_never_deletes_an_apiservice_that_is_healthy_in_the_snapshot() {
    let snap = with_missing_backend(load_snapshot("dead-apiservice"), "v1beta1.metrics.k8s.io");
    let (findings, _) = diagnose_and_plan(&snap);
    // The APIService recovered after diagnosis: the plan re-checks.
    let mut healed = snap.clone();
    let api = healed
        .api_services
        .iter_mut()
        .find(|a| a.metadata.name.as_deref() == Some("v1beta1.metrics.k8s.io"))
        .unwrap();
    let cond = &mut api.status.as_mut().unwrap().conditions.as_mut().unwrap()[0];
    cond.status = s("True");
    cond.reason = Some(s("Passed"));
    let plan = plan(&findings, &healed);
    assert!(
        plan.steps
            .iter()
            .all(|s| !matches!(s.action, Action::DeleteApiService(_)))
    );
}

#[test]
fn safety_live_controller_finalizer_is_never_removed() {
    let snap = load_snapshot("live-controller");
    let (findings, plan) = diagnose_and_plan(&snap);
    for r in removals(&plan) {
        assert_ne!(r.target.name, "guarded");
        assert!(!r.remove.contains(&s("example.com/widget-cleanup")));
    }
    let guarded = plan
        .steps
        .iter()
        .find(|s| findings[s.finding_index].subject.name == "guarded")
        .unwrap();
    assert!(matches!(guarded.action, Action::Wait { .. }));

    // Even a hand-made OrphanFinalizer finding for the live key is refused
    // on re-check.
    let mut forged = findings
        .iter()
        .find(|f| f.subject.name == "abandoned")
        .unwrap()
        .clone();
    forged.subject = findings
        .iter()
        .find(|f| f.subject.name == "guarded")
        .unwrap()
        .subject
        .clone();
    if let unstuck_core::doctor::FindingDetail::OrphanFinalizer(rem) = &mut forged.detail {
        rem.orphan = vec![s("example.com/widget-cleanup")];
        rem.finalizers = vec![s("example.com/widget-cleanup")];
    }
    let p = plan_for(&[forged], &snap);
    assert!(matches!(p.steps[0].action, Action::Refuse { .. }), "{p:?}");
}

fn plan_for(
    findings: &[unstuck_core::doctor::Finding],
    snap: &unstuck_core::doctor::Snapshot,
) -> Plan {
    plan(findings, snap)
}

#[test]
fn safety_pvc_protection_in_use_is_never_removed() {
    let snap = load_snapshot("pvc-protection");
    let (findings, plan) = diagnose_and_plan(&snap);
    assert!(removals(&plan).is_empty());
    assert!(plan.mutating_steps().next().is_none());
    for step in &plan.steps {
        if findings[step.finding_index].kind() == FindingKind::ProtectedFinalizerInUse {
            assert!(matches!(step.action, Action::Wait { .. }));
        }
    }
}

#[test]
fn namespace_metadata_finalizer_removed_by_patch() {
    let snap = load_snapshot("namespace-metadata-finalizer");
    let (_, plan) = diagnose_and_plan(&snap);
    let rs = removals(&plan);
    assert_eq!(rs.len(), 1);
    let r = rs[0];
    assert_eq!(r.target.api_path(), "/api/v1/namespaces/kubesphere-ns");
    assert_eq!(
        r.json_patch(),
        json!([
            {"op": "test", "path": "/metadata/uid", "value": "a2b3c4d5-e6f7-4089-9a1b-3b4c5d6e7f80"},
            {"op": "test", "path": "/metadata/resourceVersion", "value": "49876"},
            {"op": "test", "path": "/metadata/finalizers", "value": ["finalizers.kubesphere.io/namespaces"]},
            {"op": "replace", "path": "/metadata/finalizers", "value": []},
        ])
    );
}

#[test]
fn finalize_refused_with_content_allowed_without() {
    let snap = load_snapshot("namespace-spec-finalizer");
    let (findings, plan) = diagnose_and_plan(&snap);
    assert_least_force_first(&plan);
    let step_for = |ns: &str| {
        plan.steps
            .iter()
            .find(|s| {
                let f = &findings[s.finding_index];
                f.kind() == FindingKind::NamespaceSpecFinalizerStuck && f.subject.name == ns
            })
            .unwrap()
    };

    let refused = step_for("spec-content");
    let Action::Refuse { reason, .. } = &refused.action else {
        panic!("{:?}", refused.action)
    };
    assert!(reason.contains("content remains"), "{reason}");
    assert!(reason.contains("Widget left-behind"), "{reason}");

    let allowed = step_for("spec-empty");
    assert_eq!(allowed.force_level, FORCE_FINALIZE);
    let Action::FinalizeNamespace(f) = &allowed.action else {
        panic!("{:?}", allowed.action)
    };
    assert_eq!(f.name, "spec-empty");
    assert_eq!(f.remove_tokens, vec![s("example.com/spec-token")]);
    assert_eq!(f.kept(), Vec::<String>::new());
    assert_eq!(f.api_path(), "/api/v1/namespaces/spec-empty/finalize");
    // /finalize comes last: after the CR patch (force 1).
    assert_eq!(plan.steps.last().unwrap().action, allowed.action);

    // Once the CR is gone from the snapshot, spec-content may be finalized
    // too (of its stuck token only).
    let mut emptied = snap.clone();
    emptied.namespace_content.clear();
    emptied.terminating.clear();
    let p = unstuck_core::doctor::plan(&findings, &emptied);
    let finals: Vec<&FinalizeNamespace> = p
        .steps
        .iter()
        .filter_map(|s| match &s.action {
            Action::FinalizeNamespace(f) => Some(f),
            _ => None,
        })
        .collect();
    assert_eq!(finals.len(), 2);
    let content = finals.iter().find(|f| f.name == "spec-content").unwrap();
    assert_eq!(content.remove_tokens, vec![s("example.com/spec-token")]);
    assert_eq!(content.kept(), vec![s("kubernetes")]);
}

#[test]
fn finalize_refused_while_discovery_fails() {
    let mut snap = load_snapshot("namespace-spec-finalizer");
    snap.discovery_failures
        .push(unstuck_core::doctor::DiscoveryFailure {
            group_version: s("metrics.k8s.io/v1beta1"),
            message: s("stale GroupVersion discovery: metrics.k8s.io/v1beta1"),
        });
    let (findings, plan) = diagnose_and_plan(&snap);
    assert!(
        plan.steps
            .iter()
            .all(|s| !matches!(s.action, Action::FinalizeNamespace(_)))
    );
    let step = plan
        .steps
        .iter()
        .find(|s| findings[s.finding_index].subject.name == "spec-empty")
        .unwrap();
    let Action::Refuse { reason, kind } = &step.action else {
        panic!()
    };
    assert!(
        reason.contains("discovery failed for metrics.k8s.io/v1beta1"),
        "{reason}"
    );
    // Typed, so that the doctor asks again once discovery answers.
    assert_eq!(
        *kind,
        unstuck_core::doctor::plan::RefusalKind::DiscoveryFailed
    );
    // Every other refusal is final.
    assert!(plan.steps.iter().all(|s| match &s.action {
        Action::Refuse { kind, .. } => std::ptr::eq(s, step) || kind.is_final(),
        _ => true,
    }));
}

#[test]
fn finalize_body_changes_only_spec_finalizers() {
    let snap = load_snapshot("namespace-spec-finalizer");
    let ns = snap
        .namespaces
        .iter()
        .find(|n| n.metadata.name.as_deref() == Some("spec-content"))
        .unwrap();
    let f = FinalizeNamespace {
        name: s("spec-content"),
        uid: ns.metadata.uid.clone().unwrap(),
        resource_version: ns.metadata.resource_version.clone(),
        current: vec![s("kubernetes"), s("example.com/spec-token")],
        remove_tokens: vec![s("example.com/spec-token")],
    };
    let body = f.body(ns).unwrap();
    assert_eq!(
        body.spec.as_ref().unwrap().finalizers,
        Some(vec![s("kubernetes")])
    );
    assert_eq!(body.metadata, ns.metadata);
    assert_eq!(body.status, ns.status);

    let mut other = ns.clone();
    other.metadata.uid = Some(s("another"));
    assert!(matches!(
        f.body(&other),
        Err(FinalizeError::UidChanged { .. })
    ));
    // Changed since the read the plan was argued on: not written.
    assert!(f.resource_version.is_some());
    let mut moved = ns.clone();
    moved.metadata.resource_version = Some(s("999999"));
    assert!(matches!(
        f.body(&moved),
        Err(FinalizeError::ResourceVersionChanged { .. })
    ));
    let mut done = ns.clone();
    done.spec.as_mut().unwrap().finalizers = Some(vec![s("kubernetes")]);
    assert!(matches!(
        f.body(&done),
        Err(FinalizeError::NothingToRemove { .. })
    ));
}

#[test]
fn dry_run_lists_exact_api_calls() {
    let snap = load_snapshot("orphan-configmap");
    let (_, plan) = diagnose_and_plan(&snap);
    let text = plan.render_dry_run();
    assert!(text.contains(
        r#"PATCH /api/v1/namespaces/orphan-cm/configmaps/mymap (application/json-patch+json) [{"op":"test","path":"/metadata/uid","value":"c1f0e7d2-3a4b-4c5d-8e9f-0a1b2c3d4e5f"},{"op":"test","path":"/metadata/resourceVersion","value":"50201"},{"op":"test","path":"/metadata/finalizers","value":["example.com/never-removed"]},{"op":"replace","path":"/metadata/finalizers","value":[]}]"#
    ), "{text}");
    assert!(
        text.contains(
            "GET /api/v1/namespaces/orphan-cm/configmaps/mymap (save the manifest first)"
        )
    );

    let snap = with_missing_backend(load_snapshot("dead-apiservice"), "v1beta1.metrics.k8s.io");
    let (_, plan) = diagnose_and_plan(&snap);
    let text = plan.render_dry_run();
    assert!(text.contains(
        "DELETE /apis/apiregistration.k8s.io/v1/apiservices/v1beta1.metrics.k8s.io (precondition uid=91a2b3c4-d5e6-4f70-8192-a3b4c5d6e7f8, resourceVersion=50210)"
    ), "{text}");

    let snap = load_snapshot("namespace-spec-finalizer");
    let (_, plan) = diagnose_and_plan(&snap);
    let text = plan.render_dry_run();
    assert!(
        text.contains("PUT /api/v1/namespaces/spec-empty/finalize"),
        "{text}"
    );
    assert!(
        text.contains("refused: refusing /finalize on namespace spec-content"),
        "{text}"
    );
}

#[test]
fn plan_round_trips_through_json() {
    for name in [
        "orphan-configmap",
        "dead-apiservice",
        "namespace-spec-finalizer",
    ] {
        let snap = load_snapshot(name);
        let (findings, plan) = diagnose_and_plan(&snap);
        let text = serde_json::to_string(&plan).unwrap();
        let back: Plan = serde_json::from_str(&text).unwrap();
        assert_eq!(back, plan);
        let text = serde_json::to_string(&findings).unwrap();
        let back: Vec<unstuck_core::doctor::Finding> = serde_json::from_str(&text).unwrap();
        assert_eq!(back, findings);
    }
    let snap = load_snapshot("orphan-configmap");
    let (_, plan) = diagnose_and_plan(&snap);
    let v = serde_json::to_value(&plan.steps[1]).unwrap();
    assert_eq!(v["action"]["type"], "RemoveFinalizers");
    assert_eq!(v["forceLevel"], 1);
    assert!(v["action"]["target"]["uid"].is_string());
}

#[test]
fn unknown_owner_is_refused_not_removed() {
    let mut snap = load_snapshot("pvc-protection");
    // No way to tell whether kube-controller-manager runs.
    snap.leases
        .retain(|l| l.metadata.name.as_deref() != Some("kube-controller-manager"));
    let (findings, plan) = diagnose_and_plan(&snap);
    let unknown: Vec<_> = findings
        .iter()
        .enumerate()
        .filter(|(_, f)| f.kind() == FindingKind::UnknownFinalizerOwner)
        .collect();
    assert_eq!(unknown.len(), 1);
    assert_eq!(unknown[0].1.subject.name, "unused");
    let step = plan
        .steps
        .iter()
        .find(|s| s.finding_index == unknown[0].0)
        .unwrap();
    let Action::Refuse { reason, .. } = &step.action else {
        panic!("{:?}", step.action)
    };
    assert!(reason.contains("could not be argued dead"), "{reason}");
    assert!(plan.mutating_steps().next().is_none());
}
