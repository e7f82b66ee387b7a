//! Diagnosis on recorded snapshots: what is found, and what is not.

mod doctor_support;

use std::time::Duration;

use doctor_support::{diagnose_default, kinds, load_snapshot, of_kind, with_missing_backend};
use unstuck_core::doctor::owner::controller_manager_alive;
use unstuck_core::doctor::{
    ApiServiceFacts, DiagnoseOptions, FinalizerFacts, FindingDetail, FindingKind, ObjectRecord,
    OwnerVerdict, Snapshot, diagnose, finalizer_owner,
};

use FindingKind::*;

fn s(x: &str) -> String {
    x.to_owned()
}

#[test]
fn orphan_configmaps_found_and_live_key_left_alone() {
    let snap = load_snapshot("orphan-configmap");
    let findings = diagnose_default(&snap);
    assert_eq!(
        kinds(&findings),
        vec![
            (OrphanFinalizer, s("orphan-cm/legacy")),
            (OrphanFinalizer, s("orphan-cm/mixed")),
            (OrphanFinalizer, s("orphan-cm/mymap")),
            (WaitingOnLiveController, s("orphan-cm/mixed")),
        ]
    );

    let mymap = &findings[2];
    assert_eq!(mymap.subject.kind, "ConfigMap");
    assert_eq!(mymap.subject.api_version, "v1");
    assert_eq!(
        mymap.subject.uid.as_deref(),
        Some("c1f0e7d2-3a4b-4c5d-8e9f-0a1b2c3d4e5f")
    );
    let FindingDetail::OrphanFinalizer(rem) = &mymap.detail else {
        panic!("unexpected detail {:?}", mymap.detail);
    };
    assert_eq!(rem.orphan, vec![s("example.com/never-removed")]);
    assert!(rem.kept.is_empty());
    assert_eq!(rem.resource, "configmaps");
    assert_eq!(rem.age_seconds, 120);
    assert!(
        mymap
            .evidence
            .iter()
            .any(|e| e.contains("no fresh lease names example.com; 5 leases checked")),
        "{:#?}",
        mymap.evidence
    );
    assert!(
        mymap
            .evidence
            .iter()
            .any(|e| e.contains("finalizers [example.com/never-removed]"))
    );

    // Mixed: only the dead key is an orphan; the served key stays.
    let FindingDetail::OrphanFinalizer(mixed) = &findings[1].detail else {
        panic!("unexpected detail");
    };
    assert_eq!(mixed.orphan, vec![s("example.com/never-removed")]);
    assert_eq!(mixed.kept, vec![s("widgets.acme.io/cleanup")]);
    let Some(FinalizerFacts { verdicts, .. }) = findings[3].detail.finalizer_facts() else {
        panic!("unexpected detail");
    };
    assert_eq!(verdicts.len(), 1);
    assert_eq!(verdicts[0].finalizer, "widgets.acme.io/cleanup");
    assert!(verdicts[0].verdict.is_alive());
    assert!(
        verdicts[0].verdict.evidence()[0].contains("acme-system/f1c0ffee.widgets.acme.io"),
        "{:?}",
        verdicts[0].verdict
    );
}

#[test]
fn kubernetes_key_on_a_configmap_is_dead() {
    let snap = load_snapshot("orphan-configmap");
    let verdict = owner("kubernetes", "ConfigMap", &snap);
    let OwnerVerdict::Dead { evidence } = &verdict else {
        panic!("expected Dead, got {verdict:?}");
    };
    assert!(evidence[0].contains("no controller"), "{evidence:?}");

    let findings = diagnose_default(&snap);
    let legacy = findings
        .iter()
        .find(|f| f.subject.name == "legacy")
        .expect("legacy found");
    assert_eq!(legacy.kind(), OrphanFinalizer);
    let FindingDetail::OrphanFinalizer(rem) = &legacy.detail else {
        panic!()
    };
    assert_eq!(rem.orphan, vec![s("kubernetes")]);
}

#[test]
fn object_not_past_threshold_has_no_finding() {
    let snap = load_snapshot("orphan-configmap");
    let findings = diagnose_default(&snap);
    // `fresh` was deleted 5 s before the snapshot: under the 10 s default.
    assert!(findings.iter().all(|f| f.subject.name != "fresh"));

    // With a 10 minute threshold nothing in this snapshot is stuck yet.
    let patient = DiagnoseOptions {
        stuck_after: Duration::from_secs(600),
        ..Default::default()
    };
    assert!(diagnose(&snap, &patient).is_empty());

    // With a 1 s threshold `fresh` is stuck too.
    let eager = DiagnoseOptions {
        stuck_after: Duration::from_secs(1),
        ..Default::default()
    };
    assert!(
        diagnose(&snap, &eager)
            .iter()
            .any(|f| f.subject.name == "fresh" && f.kind() == OrphanFinalizer)
    );
}

#[test]
fn cr_with_dead_finalizer_blocks_its_namespace() {
    let snap = load_snapshot("crd-namespace");
    let findings = diagnose_default(&snap);
    assert_eq!(
        kinds(&findings),
        vec![
            (OrphanFinalizer, s("crd-ns/w1")),
            (NamespaceBlockedByContent, s("crd-ns")),
        ]
    );
    let cr = &findings[0];
    assert_eq!(cr.subject.api_version, "example.com/v1");
    assert_eq!(cr.subject.kind, "Widget");
    assert!(
        cr.evidence
            .iter()
            .any(|e| e.contains("Terminating namespace crd-ns"))
    );

    let ns = &findings[1];
    let FindingDetail::NamespaceBlockedByContent {
        remaining_resources,
        remaining_finalizers,
        blocking_objects,
    } = &ns.detail
    else {
        panic!("unexpected detail {:?}", ns.detail);
    };
    assert_eq!(remaining_resources.len(), 1);
    assert_eq!(remaining_resources[0].resource, "widgets");
    assert_eq!(remaining_resources[0].group, "example.com");
    assert_eq!(remaining_resources[0].count, 1);
    assert_eq!(remaining_finalizers.len(), 1);
    assert_eq!(remaining_finalizers[0].finalizer, "example.com/finalizer");
    assert_eq!(remaining_finalizers[0].count, 1);
    assert_eq!(blocking_objects.len(), 1);
    assert_eq!(blocking_objects[0].name, "w1");
    assert!(ns.evidence.iter().any(|e| e.contains(
        "Some content in the namespace has finalizers remaining: example.com/finalizer in 1 resource instances"
    )));
    // kube-controller-manager is alive and content remains: the
    // `kubernetes` spec token is not itself stuck.
    assert!(of_kind(&findings, NamespaceSpecFinalizerStuck).is_empty());
}

#[test]
fn dead_apiservice_correlated_with_discovery_blocked_namespace() {
    let snap = with_missing_backend(load_snapshot("dead-apiservice"), "v1beta1.metrics.k8s.io");
    let findings = diagnose_default(&snap);
    assert_eq!(
        kinds(&findings),
        vec![
            (DeadApiService, s("v1beta1.metrics.k8s.io")),
            (NamespaceBlockedByDiscovery, s("apisvc-ns")),
        ]
    );
    let api = &findings[0];
    let Some(ApiServiceFacts {
        reason,
        service,
        group_version,
        blocks_namespaces,
        ..
    }) = api.detail.api_service()
    else {
        panic!("unexpected detail {:?}", api.detail);
    };
    assert_eq!(reason, "ServiceNotFound");
    assert_eq!(service, "monitoring/prometheus-adapter");
    assert_eq!(group_version, "metrics.k8s.io/v1beta1");
    assert_eq!(blocks_namespaces, &vec![s("apisvc-ns")]);
    assert!(
        api.evidence
            .iter()
            .any(|e| e.contains("service/prometheus-adapter in \\\"monitoring\\\" is not present")),
        "{:#?}",
        api.evidence
    );
    assert!(
        api.evidence
            .iter()
            .any(|e| e.contains("the collector's discovery of metrics.k8s.io/v1beta1 failed too"))
    );

    let ns = &findings[1];
    let FindingDetail::NamespaceBlockedByDiscovery {
        group_versions,
        api_services,
        dead_api_services,
    } = &ns.detail
    else {
        panic!("unexpected detail {:?}", ns.detail);
    };
    assert_eq!(group_versions, &vec![s("metrics.k8s.io/v1beta1")]);
    assert_eq!(api_services, &vec![s("v1beta1.metrics.k8s.io")]);
    assert_eq!(dead_api_services, &vec![s("v1beta1.metrics.k8s.io")]);
}

#[test]
fn healthy_and_local_apiservices_are_never_findings() {
    let snap = with_missing_backend(load_snapshot("dead-apiservice"), "v1beta1.metrics.k8s.io");
    let findings = diagnose_default(&snap);
    for name in ["v1.apps", "v1alpha1.wardle.example.com"] {
        assert!(
            findings.iter().all(|f| f.subject.name != name),
            "{name} must not be a finding"
        );
    }

    // A local APIService is never dead, even if its condition said so.
    let mut snap = snap;
    let local = snap
        .api_services
        .iter_mut()
        .find(|a| a.metadata.name.as_deref() == Some("v1.apps"))
        .unwrap();
    let cond = &mut local.status.as_mut().unwrap().conditions.as_mut().unwrap()[0];
    cond.status = s("False");
    cond.reason = Some(s("FailedDiscoveryCheck"));
    assert!(
        diagnose_default(&snap)
            .iter()
            .all(|f| f.subject.name != "v1.apps")
    );
}

#[test]
fn apiservice_unavailable_only_briefly_is_not_dead() {
    let mut snap = with_missing_backend(load_snapshot("dead-apiservice"), "v1beta1.metrics.k8s.io");
    let api = snap
        .api_services
        .iter_mut()
        .find(|a| a.metadata.name.as_deref() == Some("v1beta1.metrics.k8s.io"))
        .unwrap();
    let cond = &mut api.status.as_mut().unwrap().conditions.as_mut().unwrap()[0];
    cond.last_transition_time = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        "2025-06-01T11:59:58Z".parse().unwrap(),
    ));
    let findings = diagnose_default(&snap);
    assert!(of_kind(&findings, DeadApiService).is_empty());
    // The namespace is still reported as blocked, naming the APIService.
    let ns = of_kind(&findings, NamespaceBlockedByDiscovery);
    assert_eq!(ns.len(), 1);
    let FindingDetail::NamespaceBlockedByDiscovery {
        dead_api_services, ..
    } = &ns[0].detail
    else {
        panic!()
    };
    assert!(dead_api_services.is_empty());
}

#[test]
fn safety_fresh_lease_for_domain_means_waiting_on_live_controller() {
    let snap = load_snapshot("live-controller");
    let findings = diagnose_default(&snap);
    assert_eq!(
        kinds(&findings),
        vec![
            (OrphanFinalizer, s("live-ns/abandoned")),
            (WaitingOnLiveController, s("live-ns/guarded")),
        ]
    );
    let guarded = &findings[1];
    assert!(
        guarded
            .evidence
            .iter()
            .any(|e| e.contains("fresh lease widget-system/8d3f5d2a.example.com")),
        "{:#?}",
        guarded.evidence
    );
    // The stale lease is named in the dead verdict's evidence.
    assert!(
        findings[0]
            .evidence
            .iter()
            .any(|e| e.contains("stale-system/0a1b2c3d.stale.example.org") && e.contains("stale")),
        "{:#?}",
        findings[0].evidence
    );
}

#[test]
fn owner_by_holder_identity_and_parent_domain() {
    let mut snap = load_snapshot("live-controller");
    // Rename the lease so that only its holderIdentity names the domain.
    let lease = snap
        .leases
        .iter_mut()
        .find(|l| l.metadata.name.as_deref() == Some("8d3f5d2a.example.com"))
        .unwrap();
    lease.metadata.name = Some(s("widget-operator-leader"));
    lease.spec.as_mut().unwrap().holder_identity = Some(s("widget-operator.example.com_0f2b6c1e"));
    assert!(owner("example.com/widget-cleanup", "ConfigMap", &snap).is_alive());
    // A subdomain key finds the controller through its parent domain.
    assert!(owner("finalizers.example.com/x", "ConfigMap", &snap).is_alive());
    // Unrelated domains stay dead.
    assert!(owner("other.example.net/x", "ConfigMap", &snap).is_dead());
}

#[test]
fn built_in_keys_follow_the_controller_manager() {
    let mut snap = load_snapshot("orphan-configmap");
    for key in ["foregroundDeletion", "orphan"] {
        assert!(owner(key, "Deployment", &snap).is_alive(), "{key}");
    }
    assert!(owner("batch.kubernetes.io/job-tracking", "Pod", &snap).is_alive());
    // A built-in key on a kind its controller never watches is dead.
    assert!(owner("kubernetes.io/pvc-protection", "ConfigMap", &snap).is_dead());
    // A key without a domain and only generic words names nothing to look
    // for: never argued dead.
    let v = owner("my-finalizer", "ConfigMap", &snap);
    assert!(
        matches!(&v, OwnerVerdict::Unknown { evidence } if evidence[0].contains("no domain and only generic words")),
        "{v:?}"
    );
    // The CRD cleanup finalizer is served by kube-apiserver itself.
    assert!(
        owner(
            "customresourcecleanup.apiextensions.k8s.io",
            "CustomResourceDefinition",
            &snap
        )
        .is_alive()
    );
    // CSI sidecar keys are never argued dead from missing domain leases.
    for key in [
        "external-attacher/hostpath-csi-k8s-io",
        "external-provisioner.volume.kubernetes.io/finalizer",
        "snapshot.storage.kubernetes.io/volumesnapshot-as-source-protection",
    ] {
        let v = owner(key, "PersistentVolume", &snap);
        assert!(matches!(v, OwnerVerdict::Unknown { .. }), "{key}: {v:?}");
    }
    // A dotted key without '/' is looked up like a domain.
    assert!(
        owner(
            "resources-finalizer.argocd.argoproj.io",
            "Application",
            &snap
        )
        .is_dead()
    );

    // Without a fresh controller-manager lease, built-in keys are Unknown,
    // never Dead.
    snap.leases
        .retain(|l| l.metadata.name.as_deref() != Some("kube-controller-manager"));
    assert!(!controller_manager_alive(&snap).0);
    let v = owner(
        "kubernetes.io/pvc-protection",
        "PersistentVolumeClaim",
        &snap,
    );
    assert!(matches!(v, OwnerVerdict::Unknown { .. }), "{v:?}");
}

#[test]
fn stale_controller_manager_lease_is_not_fresh() {
    let mut snap = load_snapshot("orphan-configmap");
    let kcm = snap
        .leases
        .iter_mut()
        .find(|l| l.metadata.name.as_deref() == Some("kube-controller-manager"))
        .unwrap();
    // 15 s lease: fresh up to 45 s, stale at 46 s.
    kcm.spec.as_mut().unwrap().renew_time =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(
            "2025-06-01T11:59:15Z".parse().unwrap(),
        ));
    assert!(controller_manager_alive(&snap).0);
    let kcm = snap
        .leases
        .iter_mut()
        .find(|l| l.metadata.name.as_deref() == Some("kube-controller-manager"))
        .unwrap();
    kcm.spec.as_mut().unwrap().renew_time =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(
            "2025-06-01T11:59:14Z".parse().unwrap(),
        ));
    let (alive, evidence) = controller_manager_alive(&snap);
    assert!(!alive);
    assert!(evidence[0].contains("stale"), "{evidence:?}");
}

#[test]
fn safety_pvc_used_by_pod_is_protected() {
    let snap = load_snapshot("pvc-protection");
    let findings = diagnose_default(&snap);
    assert_eq!(
        kinds(&findings),
        vec![
            (WaitingOnLiveController, s("pvc-ns/unused")),
            (ProtectedFinalizerInUse, s("pv-data")),
            (ProtectedFinalizerInUse, s("pvc-ns/data")),
        ]
    );
    let data = &findings[2];
    let FindingDetail::ProtectedFinalizerInUse { finalizer, used_by } = &data.detail else {
        panic!("unexpected detail {:?}", data.detail);
    };
    assert_eq!(finalizer, "kubernetes.io/pvc-protection");
    assert_eq!(used_by.len(), 1);
    assert!(used_by[0].contains("pod pvc-ns/app-0"), "{used_by:?}");
    let FindingDetail::ProtectedFinalizerInUse { used_by, .. } = &findings[1].detail else {
        panic!()
    };
    assert!(
        used_by[0].contains("Bound to claim pvc-ns/data"),
        "{used_by:?}"
    );
    assert!(of_kind(&findings, OrphanFinalizer).is_empty());
}

#[test]
fn namespace_metadata_finalizer_left_by_removed_product() {
    let snap = load_snapshot("namespace-metadata-finalizer");
    let findings = diagnose_default(&snap);
    assert_eq!(
        kinds(&findings),
        vec![(NamespaceOrphanMetadataFinalizer, s("kubesphere-ns"))]
    );
    let FindingDetail::NamespaceOrphanMetadataFinalizer(rem) = &findings[0].detail else {
        panic!()
    };
    assert_eq!(rem.orphan, vec![s("finalizers.kubesphere.io/namespaces")]);
    assert_eq!(rem.resource, "namespaces");
    assert!(
        findings[0]
            .evidence
            .iter()
            .any(|e| e.contains("no fresh lease names finalizers.kubesphere.io or kubesphere.io")),
        "{:#?}",
        findings[0].evidence
    );
}

#[test]
fn namespace_spec_token_with_and_without_content() {
    let snap = load_snapshot("namespace-spec-finalizer");
    let findings = diagnose_default(&snap);
    assert_eq!(
        kinds(&findings),
        vec![
            (OrphanFinalizer, s("spec-content/left-behind")),
            (NamespaceBlockedByContent, s("spec-content")),
            (NamespaceSpecFinalizerStuck, s("spec-content")),
            (NamespaceSpecFinalizerStuck, s("spec-empty")),
        ]
    );
    let FindingDetail::NamespaceSpecFinalizerStuck {
        stuck_tokens,
        content_remaining,
        discovery_complete,
        ..
    } = &findings[2].detail
    else {
        panic!()
    };
    // `kubernetes` is handled by a live namespace controller: not stuck.
    assert_eq!(stuck_tokens, &vec![s("example.com/spec-token")]);
    assert!(content_remaining.iter().any(|c| c == "Widget/left-behind"));
    assert!(discovery_complete);

    let FindingDetail::NamespaceSpecFinalizerStuck {
        stuck_tokens,
        content_remaining,
        ..
    } = &findings[3].detail
    else {
        panic!()
    };
    assert_eq!(stuck_tokens, &vec![s("example.com/spec-token")]);
    assert!(content_remaining.is_empty());
}

#[test]
fn kubernetes_spec_token_stuck_when_controller_manager_is_not_alive() {
    let mut snap = load_snapshot("crd-namespace");
    snap.leases
        .retain(|l| l.metadata.name.as_deref() != Some("kube-controller-manager"));
    let findings = diagnose_default(&snap);
    let stuck = of_kind(&findings, NamespaceSpecFinalizerStuck);
    assert_eq!(stuck.len(), 1);
    let FindingDetail::NamespaceSpecFinalizerStuck { stuck_tokens, .. } = &stuck[0].detail else {
        panic!()
    };
    assert_eq!(stuck_tokens, &vec![s("kubernetes")]);
}

#[test]
fn stuck_pod_without_finalizers_is_explained() {
    let mut snap = load_snapshot("pvc-protection");
    let pod = &mut snap.pods[0];
    pod.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        "2025-06-01T11:58:00Z".parse().unwrap(),
    ));
    pod.metadata.deletion_grace_period_seconds = Some(30);
    let status = pod.status.as_mut().unwrap();
    status.phase = Some(s("Succeeded"));
    let cs = &mut status.container_statuses.as_mut().unwrap()[0];
    cs.state = Some(k8s_openapi::api::core::v1::ContainerState {
        terminated: Some(k8s_openapi::api::core::v1::ContainerStateTerminated {
            exit_code: 0,
            reason: Some(s("Completed")),
            ..Default::default()
        }),
        ..Default::default()
    });
    let findings = diagnose_default(&snap);
    let pods = of_kind(&findings, PodStuckTerminating);
    assert_eq!(pods.len(), 1);
    let FindingDetail::PodStuckTerminating { hint, node, .. } = &pods[0].detail else {
        panic!()
    };
    assert_eq!(*hint, unstuck_core::doctor::PodStuckHint::VolumeTeardown);
    assert_eq!(node.as_deref(), Some("unstuck-worker"));
    // The claim stays protected while the pod exists.
    assert!(
        findings
            .iter()
            .any(|f| f.kind() == ProtectedFinalizerInUse && f.subject.name == "data")
    );
}

#[test]
fn finding_kinds_serialise_as_pascal_case_names() {
    for kind in FindingKind::ALL {
        let json = serde_json::to_value(kind).unwrap();
        assert_eq!(json, serde_json::Value::String(kind.as_str().to_owned()));
        assert_eq!(kind.as_str().parse::<FindingKind>().unwrap(), kind);
    }
    assert_eq!(
        serde_json::to_value(OrphanFinalizer).unwrap(),
        serde_json::json!("OrphanFinalizer")
    );
    assert!("Orphan".parse::<FindingKind>().is_err());
}

/// The verdict on `key` carried by an object of `kind` (deleted, with no
/// writes or events of its own): where the kind lives in the API decides
/// who may update it.
fn owner(key: &str, kind: &str, snap: &Snapshot) -> OwnerVerdict {
    let (api_version, resource, namespaced) = match kind {
        "ConfigMap" => ("v1", "configmaps", true),
        "Pod" => ("v1", "pods", true),
        "PersistentVolume" => ("v1", "persistentvolumes", false),
        "PersistentVolumeClaim" => ("v1", "persistentvolumeclaims", true),
        "Deployment" => ("apps/v1", "deployments", true),
        "Application" => ("argoproj.io/v1alpha1", "applications", true),
        "CustomResourceDefinition" => (
            "apiextensions.k8s.io/v1",
            "customresourcedefinitions",
            false,
        ),
        other => panic!("no API path for {other} in this test"),
    };
    let record: ObjectRecord = serde_json::from_value(serde_json::json!({
        "apiVersion": api_version, "kind": kind, "resource": resource, "namespaced": namespaced,
        "metadata": {"name": "x", "namespace": if namespaced { Some("app") } else { None },
            "uid": "7d1c7f52-0000-4000-8000-000000000001", "finalizers": [key],
            "deletionTimestamp": "2020-01-01T00:00:00Z"}
    }))
    .expect("an object record");
    finalizer_owner(key, &record, snap)
}
