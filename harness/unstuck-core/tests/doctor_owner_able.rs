//! Who can act on the object, whatever it is called (issue 17), replayed
//! on snapshots recorded from real v1.34.4 local clusters: scenario 02's
//! Kiali resource whose operator was uninstalled, and scenario 13's
//! beacon controller. The variants put back an operator that shares no
//! word with its key (a pod renamed, its image mirrored, its labels
//! generic), with the rights its ClusterRole would give it, or take its
//! pod away, and ask the verdict each time.

mod doctor_support;

use doctor_support::load_snapshot;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::SignedDuration;
use unstuck_core::doctor::{
    Action, DiagnoseOptions, FindingKind, OwnerVerdict, Snapshot, diagnose,
    owner::{OwnerQuery, owner_verdict, protection_in_use},
    plan,
    snapshot::ObjectRecord,
};

const KIALI: &str = "kiali.io/finalizer";

fn record<'a>(s: &'a Snapshot, name: &str) -> &'a ObjectRecord {
    s.terminating
        .iter()
        .find(|r| r.name() == name)
        .unwrap_or_else(|| panic!("{name} is not terminating in the recording"))
}

fn verdict(s: &Snapshot, name: &str, key: &str, assume_dead: &[String]) -> OwnerVerdict {
    let r = record(s, name);
    owner_verdict(
        &OwnerQuery {
            finalizer: key,
            kind: &r.kind,
            record: Some(r),
            assume_dead,
        },
        s,
    )
    .verdict
}

/// A Running and Ready pod from scenario 13's recording, renamed so that
/// nothing about it names Kiali: `ops/agent-7f9c4-xk2lq`, ServiceAccount
/// `runner`, its image mirrored to a path without the product's name.
fn anonymous_ready_pod() -> Pod {
    let s = load_snapshot("real-v1.34.4/live-controller-without-lease");
    let mut pod = s
        .pods
        .into_iter()
        .find(|p| p.status.as_ref().and_then(|st| st.phase.as_deref()) == Some("Running"))
        .expect("a running pod in the recording");
    pod.metadata.name = Some("agent-7f9c4-xk2lq".into());
    pod.metadata.namespace = Some("ops".into());
    pod.metadata.labels = Some([("app".to_owned(), "agent".to_owned())].into());
    pod.metadata.owner_references = None;
    let spec = pod.spec.as_mut().expect("spec");
    spec.service_account_name = Some("runner".into());
    for c in &mut spec.containers {
        c.image = Some("registry.internal:5000/mirror/agent:1.0".into());
    }
    pod
}

/// The Kiali recording with `pod` running and `rules` granted to
/// `ops/runner` by ClusterRoleBinding `agent`.
fn kiali_with(pod: Option<Pod>, rules: serde_json::Value) -> Snapshot {
    let mut s = load_snapshot("real-v1.34.4/uninstalled-crd-controller");
    s.pods.extend(pod);
    let rbac = s.rbac.as_mut().expect("the recording carries RBAC");
    rbac.cluster_roles.push(
        serde_json::from_value(serde_json::json!({"metadata": {"name": "agent"}, "rules": rules}))
            .unwrap(),
    );
    rbac.cluster_role_bindings.push(
        serde_json::from_value(serde_json::json!({"metadata": {"name": "agent"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "agent"},
            "subjects": [{"kind": "ServiceAccount", "name": "runner", "namespace": "ops"}]}))
        .unwrap(),
    );
    s
}

fn kiali_rights() -> serde_json::Value {
    serde_json::json!([{"apiGroups": ["kiali.io"], "resources": ["kialis"], "verbs": ["get", "list", "watch", "update", "patch"]}])
}

fn evidence(v: &OwnerVerdict) -> String {
    v.evidence().join("\n")
}

#[test]
fn the_control_the_recorded_uninstalled_operator_is_dead() {
    let s = load_snapshot("real-v1.34.4/uninstalled-crd-controller");
    let v = verdict(&s, "kiali", KIALI, &[]);
    assert!(v.is_dead(), "{v:?}");
    assert!(
        evidence(&v).contains("no pod or workload runs as any of them"),
        "{v:?}"
    );
}

#[test]
fn a_ready_pod_with_rights_on_the_custom_type_keeps_the_key_alive_whatever_its_names() {
    let s = kiali_with(Some(anonymous_ready_pod()), kiali_rights());
    let v = verdict(&s, "kiali", KIALI, &[]);
    let text = evidence(&v);
    assert!(v.is_alive(), "{text}");
    for part in [
        "pod ops/agent-7f9c4-xk2lq is Running and Ready",
        "ServiceAccount ops/runner",
        "may update kialis.kiali.io by ClusterRoleBinding agent -> ClusterRole agent",
        "verbs [get,list,watch,update,patch] on apiGroups [kiali.io] resources [kialis]",
    ] {
        assert!(text.contains(part), "{part:?} not in\n{text}");
    }
    // Never stripped, and --assume-dead does not override it.
    let opts = DiagnoseOptions {
        assume_dead: vec![KIALI.into()],
        stuck_after: std::time::Duration::from_secs(3),
        ..Default::default()
    };
    let findings = diagnose(&s, &opts);
    let kiali: Vec<FindingKind> = findings
        .iter()
        .filter(|f| f.subject.name == "kiali")
        .map(|f| f.kind())
        .collect();
    assert_eq!(kiali, vec![FindingKind::WaitingOnLiveController]);
    let p = plan(&findings, &s);
    assert!(
        !p.steps.iter().any(
            |st| matches!(&st.action, Action::RemoveFinalizers(r) if r.target.name == "kiali")
        ),
        "{p:#?}"
    );
}

#[test]
fn a_pod_that_is_not_ready_or_a_workload_with_no_pod_leaves_it_unknown() {
    let mut pod = anonymous_ready_pod();
    for c in pod.status.as_mut().unwrap().conditions.iter_mut().flatten() {
        if c.type_ == "Ready" {
            c.status = "False".into();
        }
    }
    let s = kiali_with(Some(pod), kiali_rights());
    let v = verdict(&s, "kiali", KIALI, &[]);
    assert!(matches!(v, OwnerVerdict::Unknown { .. }), "{v:?}");
    assert!(evidence(&v).contains("not Ready"), "{v:?}");
    // --assume-dead turns that Unknown into Dead, said so.
    let v = verdict(&s, "kiali", KIALI, &[KIALI.into()]);
    assert!(v.is_dead(), "{v:?}");

    // Scaled to zero: the Deployment that would run as the account.
    let mut s = kiali_with(None, kiali_rights());
    let mut d = load_snapshot("real-v1.34.4/live-controller-without-lease")
        .deployments
        .into_iter()
        .next()
        .expect("a deployment in the recording");
    d.metadata.name = Some("agent".into());
    d.metadata.namespace = Some("ops".into());
    d.metadata.labels = None;
    let spec = d.spec.as_mut().unwrap();
    spec.replicas = Some(0);
    spec.template.spec.as_mut().unwrap().service_account_name = Some("runner".into());
    spec.template.metadata = None;
    s.deployments.push(d);
    let v = verdict(&s, "kiali", KIALI, &[]);
    assert!(matches!(v, OwnerVerdict::Unknown { .. }), "{v:?}");
    assert!(
        evidence(&v).contains("Deployment ops/agent would run as ServiceAccount ops/runner"),
        "{v:?}"
    );
}

/// A CronJob runs as its ServiceAccount only on its schedule: between runs
/// there is no pod, and the account's grant is still someone's. Shaped
/// like the nightly sync jobs operators ship (batch/v1, a pod template
/// with serviceAccountName), in the recording's Kiali case. A Job that has
/// finished makes no pod again and is not counted; one that has not is.
#[test]
fn a_cron_job_or_an_unfinished_job_running_as_the_granted_account_keeps_it_unknown() {
    let mut s = with_namespace_ops(kiali_with(None, kiali_rights()));
    let template = serde_json::json!({"spec": {
        "serviceAccountName": "runner", "restartPolicy": "OnFailure",
        "containers": [{"name": "sync", "image": "registry.internal:5000/sync:1.0"}]}});
    s.cron_jobs.push(
        serde_json::from_value(serde_json::json!({
            "apiVersion": "batch/v1", "kind": "CronJob",
            "metadata": {"name": "nightly-sync", "namespace": "ops"},
            "spec": {"schedule": "0 3 * * *", "jobTemplate": {"spec": {"template": template}}}
        }))
        .unwrap(),
    );
    let v = verdict(&s, "kiali", KIALI, &[]);
    assert!(matches!(v, OwnerVerdict::Unknown { .. }), "{v:?}");
    assert!(
        evidence(&v).contains("CronJob ops/nightly-sync would run as ServiceAccount ops/runner"),
        "{}",
        evidence(&v)
    );

    let job = |complete: bool| -> k8s_openapi::api::batch::v1::Job {
        let mut j = serde_json::json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "migrate", "namespace": "ops"},
            "spec": {"template": template}
        });
        if complete {
            j["status"] =
                serde_json::json!({"conditions": [{"type": "Complete", "status": "True"}]});
        }
        serde_json::from_value(j).unwrap()
    };
    let mut s = with_namespace_ops(kiali_with(None, kiali_rights()));
    s.jobs.push(job(false));
    assert!(
        evidence(&verdict(&s, "kiali", KIALI, &[]))
            .contains("Job ops/migrate would run as ServiceAccount ops/runner")
    );
    let mut s = with_namespace_ops(kiali_with(None, kiali_rights()));
    s.jobs.push(job(true));
    assert!(
        !evidence(&verdict(&s, "kiali", KIALI, &[])).contains("Job ops/migrate would run"),
        "a finished Job runs nothing"
    );
}

#[test]
fn cluster_wide_wildcard_rights_could_act_but_are_no_sign_of_ownership() {
    let s = kiali_with(
        Some(anonymous_ready_pod()),
        serde_json::json!([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]),
    );
    let v = verdict(&s, "kiali", KIALI, &[]);
    assert!(matches!(v, OwnerVerdict::Unknown { .. }), "{v:?}");
    let text = evidence(&v);
    assert!(
        text.contains("with rights on every API group it could remove kiali.io/finalizer, but that is no sign it serves it: confirm, then --assume-dead kiali.io/finalizer"),
        "{text}"
    );
}

#[test]
fn rights_left_to_an_account_whose_namespace_is_gone_prove_nothing_alive() {
    // The uninstall deleted namespace ops: its ServiceAccount, and any
    // token of it, went with it; only the ClusterRoleBinding is left.
    let s = kiali_with(None, kiali_rights());
    assert!(s.namespace("ops").is_none());
    let v = verdict(&s, "kiali", KIALI, &[]);
    assert!(v.is_dead(), "{v:?}");
}

/// Namespace `ops`, as the recording's own namespaces are.
fn with_namespace_ops(mut s: Snapshot) -> Snapshot {
    let mut ns = s.namespaces[0].clone();
    ns.metadata.name = Some("ops".into());
    ns.metadata.uid = Some("ops-uid".into());
    ns.metadata.deletion_timestamp = None;
    ns.status = None;
    s.namespaces.push(ns);
    s
}

#[test]
fn an_account_with_rights_on_the_custom_type_and_no_pod_may_act_from_outside() {
    // Namespace ops is there: its ServiceAccount's token may be in use by
    // a controller outside the cluster (a management cluster's).
    let s = with_namespace_ops(kiali_with(None, kiali_rights()));
    let v = verdict(&s, "kiali", KIALI, &[]);
    assert!(matches!(v, OwnerVerdict::Unknown { .. }), "{v:?}");
    let text = evidence(&v);
    assert!(
        text.contains("ServiceAccount ops/runner may update kialis.kiali.io by ClusterRoleBinding agent -> ClusterRole agent")
            && text.contains("its token may be used from outside the cluster; confirm it is not, then --assume-dead kiali.io/finalizer"),
        "{text}"
    );
    assert!(verdict(&s, "kiali", KIALI, &[KIALI.into()]).is_dead());
}

#[test]
fn a_user_or_group_with_rights_on_the_custom_type_keeps_the_key_unknown() {
    for (kind, name) in [
        ("User", "capi-manager@mgmt"),
        ("Group", "platform-controllers"),
    ] {
        let mut s = kiali_with(None, kiali_rights());
        let binding = s
            .rbac
            .as_mut()
            .unwrap()
            .cluster_role_bindings
            .last_mut()
            .unwrap();
        binding.subjects = Some(vec![
            serde_json::from_value(serde_json::json!({"kind": kind, "name": name, "apiGroup": "rbac.authorization.k8s.io"}))
                .unwrap(),
        ]);
        let v = verdict(&s, "kiali", KIALI, &[]);
        assert!(matches!(v, OwnerVerdict::Unknown { .. }), "{kind}: {v:?}");
        let text = evidence(&v);
        assert!(
            text.contains(&format!(
                "{kind} {name} may update kialis.kiali.io by ClusterRoleBinding agent"
            )) && text.contains("an identity outside the cluster"),
            "{text}"
        );
    }
    // Kubernetes' own identities and every-group rights are not a sign.
    let mut s = kiali_with(
        None,
        serde_json::json!([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]),
    );
    let binding = s
        .rbac
        .as_mut()
        .unwrap()
        .cluster_role_bindings
        .last_mut()
        .unwrap();
    binding.subjects = Some(vec![
        serde_json::from_value(serde_json::json!({"kind": "User", "name": "admin", "apiGroup": "rbac.authorization.k8s.io"}))
            .unwrap(),
    ]);
    assert!(verdict(&s, "kiali", KIALI, &[]).is_dead());
}

#[test]
fn an_unreadable_or_missing_rbac_list_keeps_the_key_unknown() {
    let mut s = load_snapshot("real-v1.34.4/uninstalled-crd-controller");
    s.rbac = None;
    let v = verdict(&s, "kiali", KIALI, &[]);
    assert!(matches!(v, OwnerVerdict::Unknown { .. }), "{v:?}");
    assert!(evidence(&v).contains("Roles and bindings are not in this snapshot"));
}

#[test]
fn a_write_after_the_deletion_by_a_manager_named_for_nothing_shows_someone_at_work() {
    let mut s = load_snapshot("real-v1.34.4/uninstalled-crd-controller");
    let kiali = s
        .terminating
        .iter_mut()
        .find(|r| r.name() == "kiali")
        .unwrap();
    let deleted = kiali.metadata.deletion_timestamp.clone().unwrap().0;
    let mut write = kiali
        .metadata
        .managed_fields
        .clone()
        .unwrap_or_default()
        .into_iter()
        .next()
        .expect("a recorded managedFields entry");
    write.manager = Some("percona-xtradb-cluster-operator".into());
    write.operation = Some("Update".into());
    write.subresource = Some("status".into());
    write.time = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        deleted + SignedDuration::from_secs(2),
    ));
    kiali
        .metadata
        .managed_fields
        .get_or_insert_default()
        .push(write.clone());
    let late_write = write;
    // Taken 30 s after the deletion: the write is 28 s old.
    s.taken_at = deleted + SignedDuration::from_secs(30);
    let v = verdict(&s, "kiali", KIALI, &[]);
    assert!(v.is_alive(), "{v:?}");
    assert!(
        evidence(&v).contains("manager \"percona-xtradb-cluster-operator\" wrote to the object 28s ago (Update status), 2s into its deletion"),
        "{v:?}"
    );
    // Three minutes on, with no identity but Kubernetes' own left that
    // may update it (the uninstall took its RBAC), the write is history.
    s.taken_at = deleted + SignedDuration::from_secs(180);
    let v = verdict(&s, "kiali", KIALI, &[]);
    assert!(v.is_dead(), "{v:?}");
    assert!(
        evidence(&v).contains("no identity but Kubernetes' own may update it any more"),
        "{v:?}"
    );

    // While one still may (here a ServiceAccount of a namespace that is
    // there), the writer may be acting from outside the cluster: Unknown,
    // never Dead, until a person confirms.
    let mut s = with_namespace_ops(kiali_with(None, kiali_rights()));
    let kiali = s
        .terminating
        .iter_mut()
        .find(|r| r.name() == "kiali")
        .unwrap();
    kiali
        .metadata
        .managed_fields
        .get_or_insert_default()
        .push(late_write);
    s.taken_at = deleted + SignedDuration::from_secs(180);
    let v = verdict(&s, "kiali", KIALI, &[]);
    assert!(matches!(v, OwnerVerdict::Unknown { .. }), "{v:?}");
    assert!(
        evidence(&v).contains(
            "and ServiceAccount ops/runner by ClusterRoleBinding agent may still update it"
        ) && evidence(&v).contains("confirm that writer is gone, then --assume-dead the key"),
        "{v:?}"
    );
    assert!(
        !evidence(&v).contains("something is at work on it"),
        "{v:?}"
    );
    assert!(verdict(&s, "kiali", KIALI, &[KIALI.into()]).is_dead());
}

#[test]
fn a_controller_named_like_a_persons_tool_is_still_a_controller() {
    // Flux's helm-controller is not a person's `helm`.
    let mut s = load_snapshot("real-v1.34.4/uninstalled-crd-controller");
    let kiali = s
        .terminating
        .iter_mut()
        .find(|r| r.name() == "kiali")
        .unwrap();
    let deleted = kiali.metadata.deletion_timestamp.clone().unwrap().0;
    let mut write = kiali.metadata.managed_fields.clone().unwrap_or_default()[0].clone();
    write.manager = Some("helm-controller".into());
    write.time = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        deleted + SignedDuration::from_secs(1),
    ));
    kiali
        .metadata
        .managed_fields
        .get_or_insert_default()
        .push(write.clone());
    s.taken_at = deleted + SignedDuration::from_secs(20);
    assert!(verdict(&s, "kiali", KIALI, &[]).is_alive());
    // A person's own helm and kubectl variants say nothing.
    for person in ["helm", "kubectl-client-side-apply"] {
        let mut s = s.clone();
        let kiali = s
            .terminating
            .iter_mut()
            .find(|r| r.name() == "kiali")
            .unwrap();
        kiali
            .metadata
            .managed_fields
            .as_mut()
            .unwrap()
            .last_mut()
            .unwrap()
            .manager = Some(person.into());
        assert!(verdict(&s, "kiali", KIALI, &[]).is_dead(), "{person}");
    }
}

#[test]
fn an_event_about_the_object_from_any_reporter_keeps_it_from_dead() {
    let mut s = load_snapshot("real-v1.34.4/uninstalled-crd-controller");
    let uid = record(&s, "kiali").metadata.uid.clone();
    let mut e = s.events.first().cloned().expect("a recorded event");
    e.involved_object.kind = Some("Kiali".into());
    e.involved_object.name = Some("kiali".into());
    e.involved_object.uid = uid;
    e.reporting_component = Some("mesh-agent".into());
    e.reason = Some("Finalizing".into());
    e.type_ = Some("Normal".into());
    e.series = None;
    e.last_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        s.taken_at - SignedDuration::from_secs(40),
    ));
    s.events.push(e);
    let v = verdict(&s, "kiali", KIALI, &[]);
    assert!(matches!(v, OwnerVerdict::Unknown { .. }), "{v:?}");
    assert!(
        evidence(&v)
            .contains("event Normal \"Finalizing\" about the object from \"mesh-agent\", 40s ago"),
        "{v:?}"
    );
}

#[test]
fn kubernetes_domains_and_generic_keys_are_never_argued_dead() {
    let s = load_snapshot("real-v1.34.4/uninstalled-crd-controller");
    for key in [
        "widgets.example.k8s.io/cleanup",
        "storage.kubernetes.io/unknown-protection",
        "cluster.cluster.x-k8s.io",
        "my-finalizer",
        "cleanup",
    ] {
        let v = verdict(&s, "kiali", key, &[]);
        assert!(matches!(v, OwnerVerdict::Unknown { .. }), "{key}: {v:?}");
        assert!(
            evidence(&v).contains(&format!("--assume-dead {key}")),
            "{key}: {v:?}"
        );
        assert!(verdict(&s, "kiali", key, &[key.into()]).is_dead(), "{key}");
    }
}

/// A VolumeAttributesClass being deleted, and a claim that names it: the
/// objects as a v1.34 API server serves them.
fn vac_snapshot(claim_names_it: bool) -> Snapshot {
    let mut s = load_snapshot("real-v1.34.4/pvc-protection-in-use");
    s.terminating.push(
        serde_json::from_value(serde_json::json!({
            "apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttributesClass",
            "resource": "volumeattributesclasses", "namespaced": false,
            "metadata": {"name": "gold", "uid": "3b1c0c5e-8f0e-4a55-9d7c-0d7f6b2f5a11",
                "deletionTimestamp": s.taken_at.checked_sub(SignedDuration::from_secs(600)).unwrap().to_string(),
                "finalizers": ["kubernetes.io/vac-protection"]}
        }))
        .unwrap(),
    );
    let class = if claim_names_it { "gold" } else { "silver" };
    s.persistent_volume_claims = Some(vec![
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "data", "namespace": "db"},
            "spec": {"accessModes": ["ReadWriteOnce"], "volumeAttributesClassName": class,
                     "resources": {"requests": {"storage": "1Gi"}}},
            "status": {"phase": "Pending"}
        }))
        .unwrap(),
    ]);
    s
}

#[test]
fn vac_protection_is_built_in_and_in_use_while_a_claim_names_the_class() {
    let key = "kubernetes.io/vac-protection";
    let s = vac_snapshot(true);
    let users = protection_in_use(key, "VolumeAttributesClass", None, "gold", &s).expect("in use");
    assert_eq!(
        users,
        vec!["claim db/data names it in spec.volumeAttributesClassName"]
    );
    let findings = diagnose(&s, &DiagnoseOptions::default());
    let gold: Vec<FindingKind> = findings
        .iter()
        .filter(|f| f.subject.name == "gold")
        .map(|f| f.kind())
        .collect();
    assert_eq!(
        gold,
        vec![FindingKind::ProtectedFinalizerInUse],
        "{findings:#?}"
    );

    // Named by nothing: its controller (kube-controller-manager, alive in
    // the recording) removes it; still never Dead.
    let s = vac_snapshot(false);
    assert!(protection_in_use(key, "VolumeAttributesClass", None, "gold", &s).is_none());
    let v = verdict(&s, "gold", key, &[]);
    assert!(v.is_alive(), "{v:?}");
    assert!(evidence(&v).contains("volumeattributesclass-protection controller"));
    // With kube-controller-manager not shown alive: Unknown, not Dead.
    let mut s = vac_snapshot(false);
    s.leases
        .retain(|l| l.metadata.name.as_deref() != Some("kube-controller-manager"));
    s.pods.clear();
    assert!(matches!(
        verdict(&s, "gold", key, &[]),
        OwnerVerdict::Unknown { .. }
    ));
}
