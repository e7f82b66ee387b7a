//! A dead admission webhook (failurePolicy Fail, backend gone) blocking a
//! namespace's deletion: diagnosis and plan on a snapshot recorded from a
//! real v1.34.4 cluster, and on variants of it: what counts as proof of a
//! dead backend, and what the doctor leaves alone.

mod doctor_support;

use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{MutatingWebhook, MutatingWebhookConfiguration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use unstuck_core::doctor::backend::{BackendPod, EndpointRead};
use unstuck_core::doctor::{
    Action, DeadWebhookFacts, DiagnoseOptions, Finding, FindingDetail, FindingKind, Plan,
    PlannedStep, ServiceKey, ServiceLookup, Snapshot, WebhookConfigKind, diagnose, plan,
    plan_assuming,
};

use doctor_support::read_recorded as read;

fn opts() -> DiagnoseOptions {
    DiagnoseOptions {
        stuck_after: Duration::from_secs(3),
        ..Default::default()
    }
}

fn run(s: &Snapshot) -> (Vec<Finding>, Plan) {
    let findings = diagnose(s, &opts());
    let p = plan(&findings, s);
    (findings, p)
}

fn of_kind(findings: &[Finding], kind: FindingKind) -> Vec<&Finding> {
    findings.iter().filter(|f| f.kind() == kind).collect()
}

fn step_for<'a>(p: &'a Plan, findings: &[Finding], kind: FindingKind) -> &'a PlannedStep {
    let i = findings
        .iter()
        .position(|f| f.kind() == kind)
        .unwrap_or_else(|| panic!("no {kind} finding in {findings:#?}"));
    p.steps
        .iter()
        .find(|s| s.finding_index == i)
        .unwrap_or_else(|| panic!("no step for finding #{i}"))
}

fn policy_system() -> ServiceKey {
    ServiceKey {
        namespace: "policy-system".into(),
        name: "policy-webhook".into(),
    }
}

/// The recorded snapshot with the webhook's Service looked up as
/// `lookup` instead of what the collector found.
fn built(lookup: Option<ServiceLookup>) -> Snapshot {
    let mut s: Snapshot = read("real-v1.34.4/dead-admission-webhook.json");
    s.webhook_services = lookup.into_iter().collect();
    s
}

fn lookup(exists: bool, ready: Option<u32>) -> ServiceLookup {
    ServiceLookup {
        service: policy_system(),
        exists,
        ready_endpoints: ready,
        error: None,
        ..Default::default()
    }
}

fn read_at(at: &str, ready: u32, not_ready: u32) -> EndpointRead {
    EndpointRead {
        at: at.parse().unwrap(),
        slices: 1,
        ready,
        not_ready,
    }
}

/// The Service exists with a selector, and the collector's two reads six
/// seconds apart found no ready endpoint and no pod of the selector.
fn sustained_empty() -> ServiceLookup {
    ServiceLookup {
        service_type: Some("ClusterIP".into()),
        has_selector: Some(true),
        selector: Some("app=policy-webhook".into()),
        reads: vec![
            read_at("2026-11-25T10:00:00Z", 0, 0),
            read_at("2026-11-25T10:00:06Z", 0, 0),
        ],
        pods: Some(vec![]),
        ..lookup(true, Some(0))
    }
}

#[test]
fn recorded_dead_webhook_is_found_and_made_to_fail_open_with_consent() {
    let s: Snapshot = read("real-v1.34.4/dead-admission-webhook.json");
    let (findings, p) = run(&s);

    let dead = of_kind(&findings, FindingKind::DeadWebhook);
    assert_eq!(dead.len(), 1, "{findings:#?}");
    let f = dead[0];
    assert_eq!(f.subject.kind, "ValidatingWebhookConfiguration");
    assert_eq!(f.subject.name, "policy-guard");
    let FindingDetail::DeadWebhook(DeadWebhookFacts {
        webhook,
        backend,
        service,
        blocks_namespaces,
        index,
        ..
    }) = &f.detail
    else {
        panic!("detail {:?}", f.detail)
    };
    assert_eq!(webhook, "validate.policy.example.com");
    assert_eq!(backend, "ServiceNotFound");
    assert_eq!(*service, policy_system());
    assert_eq!(blocks_namespaces, &vec!["shop".to_owned()]);
    assert_eq!(*index, 0);
    assert!(
        f.evidence
            .iter()
            .any(|e| e == "Service policy-system/policy-webhook does not exist (GET returned 404)"),
        "{:#?}",
        f.evidence
    );

    let ns = of_kind(&findings, FindingKind::NamespaceContentDeletionFailed);
    assert_eq!(ns.len(), 1);
    assert_eq!(ns[0].subject.name, "shop");
    assert!(
        ns[0].evidence.iter().any(|e| e.contains(
            r#"failed calling webhook \"validate.policy.example.com\": failed to call webhook: Post \"https://policy-webhook.policy-system.svc:443/validate?timeout=5s\": service \"policy-webhook\" not found"#
        )),
        "{:#?}",
        ns[0].evidence
    );
    // The controller wrote "All content successfully removed" beside the
    // failure; the doctor must not read it as an empty namespace.
    assert!(
        ns[0]
            .evidence
            .iter()
            .any(|e| e.starts_with("NamespaceContentRemaining=False does not mean"))
    );

    let step = step_for(&p, &findings, FindingKind::DeadWebhook);
    let Action::SetWebhookFailurePolicy(w) = &step.action else {
        panic!("step {step:#?}")
    };
    assert!(step.action.needs_webhook_consent());
    assert_eq!(step.force_level, 2);
    assert_eq!(w.configuration, WebhookConfigKind::Validating);
    assert_eq!(
        w.api_path(),
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/policy-guard"
    );
    assert_eq!(
        w.json_patch(),
        serde_json::json!([
            {"op": "test", "path": "/metadata/uid", "value": "2e680360-c2ab-4c6b-9fcb-27f60e5d0392"},
            {"op": "test", "path": "/metadata/resourceVersion", "value": "685"},
            {"op": "test", "path": "/webhooks/0/name", "value": "validate.policy.example.com"},
            {"op": "test", "path": "/webhooks/0/failurePolicy", "value": "Fail"},
            {"op": "replace", "path": "/webhooks/0/failurePolicy", "value": "Ignore"},
        ])
    );
    // The namespace waits on the webhook; nothing is finalized, no
    // finalizer stripped, no registration deleted.
    let ns_step = step_for(&p, &findings, FindingKind::NamespaceContentDeletionFailed);
    assert!(
        matches!(ns_step.action, Action::Wait { .. }),
        "{ns_step:#?}"
    );
    assert_eq!(
        p.mutating_steps()
            .map(|s| s.action.name())
            .collect::<Vec<_>>(),
        vec!["SetWebhookFailurePolicy"]
    );
    assert!(p.render_dry_run().contains("needs --allow-webhook-changes"));
}

#[test]
fn a_missing_service_is_proof() {
    let (findings, p) = run(&built(Some(lookup(false, None))));
    assert_eq!(of_kind(&findings, FindingKind::DeadWebhook).len(), 1);
    let step = step_for(&p, &findings, FindingKind::DeadWebhook);
    assert!(matches!(step.action, Action::SetWebhookFailurePolicy(_)));
}

#[test]
fn a_service_without_ready_endpoints_is_proof_when_it_blocks_a_namespace() {
    let (findings, p) = run(&built(Some(sustained_empty())));
    let dead = of_kind(&findings, FindingKind::DeadWebhook);
    assert_eq!(dead.len(), 1);
    assert!(
        matches!(&dead[0].detail, FindingDetail::DeadWebhook(DeadWebhookFacts { backend, .. }) if backend == "NoReadyEndpoints")
    );
    // Both reads and the absence of any pod are quoted.
    let ev = &dead[0].evidence;
    assert!(
        ev.iter()
            .any(|e| e.contains("read 1") && e.contains("10:00:00"))
            && ev
                .iter()
                .any(|e| e.contains("read 2") && e.contains("10:00:06"))
            && ev.iter().any(|e| e == "no pod matches its selector"),
        "{ev:#?}"
    );
    let step = step_for(&p, &findings, FindingKind::DeadWebhook);
    assert!(matches!(step.action, Action::SetWebhookFailurePolicy(_)));
}

#[test]
fn a_service_without_endpoints_that_blocks_nothing_is_left_to_its_owner() {
    let mut s = built(Some(sustained_empty()));
    s.namespaces.clear();
    let (findings, p) = run(&s);
    assert_eq!(of_kind(&findings, FindingKind::DeadWebhook).len(), 1);
    let step = step_for(&p, &findings, FindingKind::DeadWebhook);
    let Action::Wait { reason } = &step.action else {
        panic!("{step:#?}")
    };
    assert!(reason.contains("keeps nothing stuck"), "{reason}");
    assert!(step.rationale.contains("restore its backend"), "{step:#?}");
    assert_eq!(p.mutating_steps().count(), 0);
}

/// A webhook whose Service is gone outright but that keeps nothing stuck
/// is left too: a whole-cluster run must not make every dead webhook fail
/// open (issue 18).
#[test]
fn a_dead_webhook_that_keeps_nothing_stuck_is_left_as_it_is() {
    let mut s = built(Some(lookup(false, None)));
    s.namespaces.clear();
    let (findings, p) = run(&s);
    assert_eq!(of_kind(&findings, FindingKind::DeadWebhook).len(), 1);
    let step = step_for(&p, &findings, FindingKind::DeadWebhook);
    assert!(matches!(step.action, Action::Wait { .. }), "{step:#?}");
    assert_eq!(p.mutating_steps().count(), 0);
}

#[test]
fn no_proof_no_dead_webhook() {
    // A Service with a ready endpoint, no lookup at all, and a lookup that
    // failed: none proves the backend gone.
    let failed = ServiceLookup {
        error: Some("forbidden".into()),
        ..lookup(false, None)
    };
    for s in [
        built(Some(lookup(true, Some(1)))),
        built(None),
        built(Some(failed)),
    ] {
        let (findings, p) = run(&s);
        assert!(of_kind(&findings, FindingKind::DeadWebhook).is_empty());
        // The namespace is still reported, and the doctor says it cannot
        // explain it rather than acting.
        let step = step_for(&p, &findings, FindingKind::NamespaceContentDeletionFailed);
        assert!(matches!(step.action, Action::Refuse { .. }), "{step:#?}");
        assert_eq!(p.mutating_steps().count(), 0);
    }
}

#[test]
fn external_name_selectorless_restarting_or_one_read_are_not_proof() {
    let crash_looping = BackendPod {
        name: "policy-webhook-7d9f-abcde".into(),
        phase: Some("Running".into()),
        restarts: 4,
        waiting: vec!["CrashLoopBackOff".into()],
        ..Default::default()
    };
    let cases = [
        (
            ServiceLookup {
                service_type: Some("ExternalName".into()),
                external_name: Some("policy.example.net".into()),
                has_selector: Some(false),
                ..lookup(true, Some(0))
            },
            "ExternalName (-> policy.example.net)",
        ),
        (
            ServiceLookup {
                service_type: Some("ClusterIP".into()),
                has_selector: Some(false),
                reads: vec![read_at("2026-11-25T10:00:00Z", 0, 0)],
                ..lookup(true, Some(0))
            },
            "has no selector",
        ),
        (
            ServiceLookup {
                reads: vec![
                    read_at("2026-11-25T10:00:00Z", 0, 1),
                    read_at("2026-11-25T10:00:06Z", 0, 1),
                ],
                pods: Some(vec![crash_looping]),
                ..sustained_empty()
            },
            "CrashLoopBackOff",
        ),
        (
            ServiceLookup {
                reads: vec![read_at("2026-11-25T10:00:00Z", 0, 0)],
                ..sustained_empty()
            },
            "not shown for 5 s",
        ),
    ];
    for (l, why) in cases {
        let (findings, p) = run(&built(Some(l)));
        assert!(
            of_kind(&findings, FindingKind::DeadWebhook).is_empty(),
            "{why}: {findings:#?}"
        );
        assert_eq!(p.mutating_steps().count(), 0, "{why}");
        // The blocked namespace says the backend was not proven gone, and why.
        let ns = of_kind(&findings, FindingKind::NamespaceContentDeletionFailed);
        assert!(
            ns[0].evidence.iter().any(|e| e.contains("not proven gone"))
                && ns[0].evidence.iter().any(|e| e.contains(why)),
            "{why}: {:#?}",
            ns[0].evidence
        );
    }
}

#[test]
fn a_webhook_that_fails_open_or_calls_a_url_is_not_dead() {
    let mut ignore = built(Some(lookup(false, None)));
    ignore.validating_webhooks[0].webhooks.as_mut().unwrap()[0].failure_policy =
        Some("Ignore".into());
    let (findings, p) = run(&ignore);
    assert!(of_kind(&findings, FindingKind::DeadWebhook).is_empty());
    // After the change, the stale condition means: wait for the retry.
    let step = step_for(&p, &findings, FindingKind::NamespaceContentDeletionFailed);
    assert!(matches!(step.action, Action::Wait { .. }), "{step:#?}");

    let mut url = built(Some(lookup(false, None)));
    let w = &mut url.validating_webhooks[0].webhooks.as_mut().unwrap()[0];
    w.client_config.service = None;
    w.client_config.url = Some("https://policy.example.com/validate".into());
    let (findings, _) = run(&url);
    assert!(of_kind(&findings, FindingKind::DeadWebhook).is_empty());
}

#[test]
fn a_mutating_webhook_is_patched_at_its_own_path() {
    let mut s = built(Some(lookup(false, None)));
    let v = s.validating_webhooks.remove(0);
    let w = &v.webhooks.as_ref().unwrap()[0];
    s.mutating_webhooks.push(MutatingWebhookConfiguration {
        metadata: v.metadata.clone(),
        webhooks: Some(vec![MutatingWebhook {
            name: w.name.clone(),
            admission_review_versions: w.admission_review_versions.clone(),
            client_config: w.client_config.clone(),
            failure_policy: w.failure_policy.clone(),
            rules: w.rules.clone(),
            side_effects: w.side_effects.clone(),
            ..MutatingWebhook::default()
        }]),
    });
    let (findings, p) = run(&s);
    let step = step_for(&p, &findings, FindingKind::DeadWebhook);
    let Action::SetWebhookFailurePolicy(w) = &step.action else {
        panic!("{step:#?}")
    };
    assert_eq!(w.configuration, WebhookConfigKind::Mutating);
    assert_eq!(
        w.api_path(),
        "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/policy-guard"
    );
}

#[test]
fn a_plan_made_for_another_webhook_order_refuses() {
    // The finding says index 0; the configuration now has another webhook
    // there. The plan re-reads the snapshot and will not patch blindly.
    let s = built(Some(lookup(false, None)));
    let mut findings = diagnose(&s, &opts());
    let mut changed = s.clone();
    let hooks = changed.validating_webhooks[0].webhooks.as_mut().unwrap();
    let mut other = hooks[0].clone();
    other.name = "other.example.com".into();
    hooks.insert(0, other);
    findings.retain(|f| f.kind() == FindingKind::DeadWebhook);
    let p = plan(&findings, &changed);
    assert!(
        matches!(&p.steps[0].action, Action::Refuse { reason, .. } if reason.contains("not in policy-guard any more")),
        "{:#?}",
        p.steps
    );
}

#[test]
fn the_fail_open_step_comes_before_the_patches_a_dead_webhook_would_reject() {
    // The recorded webhook snapshot plus a ConfigMap held by an orphan
    // finalizer (from another recording of the same cluster): removing the
    // finalizer is an UPDATE the dead webhook may reject, so making it fail
    // open goes first although its force level is higher.
    let mut s: Snapshot = read("real-v1.34.4/dead-admission-webhook.json");
    let other: Snapshot = read("real-v1.34.4/foreground-deletion-chain.json");
    let mut child = other
        .terminating
        .iter()
        .find(|r| r.kind == "ConfigMap" && r.name() == "child")
        .cloned()
        .expect("fg/child in the foreground recording");
    // Recorded later than the webhook snapshot: make it a minute old there.
    child.metadata.deletion_timestamp = Some(Time(s.taken_at - Duration::from_secs(60)));
    s.terminating.push(child);
    let (_, p) = run(&s);
    let order: Vec<&str> = p.mutating_steps().map(|s| s.action.name()).collect();
    assert_eq!(order, vec!["SetWebhookFailurePolicy", "RemoveFinalizers"]);
    // Steps that change nothing still come first.
    let first_mutating = p.steps.iter().position(|s| s.action.is_mutating()).unwrap();
    assert!(
        p.steps[..first_mutating]
            .iter()
            .all(|s| !s.action.is_mutating())
    );
    assert!(
        p.steps[first_mutating..]
            .iter()
            .all(|s| s.action.is_mutating())
    );
}

/// Scenario 36 recorded on a real v1.34.4 cluster (2026-12-07): Kyverno's
/// resource webhook (Fail, Service gone) rejects the namespace
/// controller's DELETE of an ACME Challenge, so the Challenge is not
/// Terminating yet and no finding is about it. The dry run shows what the
/// round after the fail-open will meet: the Challenge, hanging on
/// cert-manager's finalizer, whose owner is dead and will be removed.
#[test]
fn the_dry_run_shows_what_a_fail_open_will_reveal_behind_it() {
    let s = doctor_support::load_snapshot("real-v1.34.4/webhook-then-dead-finalizer-chain");
    let (findings, p) = run(&s);
    let fail_open = p
        .steps
        .iter()
        .find(|st| matches!(st.action, Action::SetWebhookFailurePolicy(_)))
        .expect("the dead webhook is failed open");
    assert_eq!(p.expected.len(), 1, "{:#?}", p.expected);
    let e = &p.expected[0];
    assert_eq!(e.webhook_finding, fail_open.finding_index);
    assert_eq!(e.webhook, "validate.kyverno.svc-fail");
    assert_eq!(e.object.kind, "Challenge");
    assert!(e.object.name.starts_with("shop-tls-"), "{e:?}");
    // Not a finding now: it is not Terminating until the webhook opens.
    assert!(
        !findings.iter().any(|f| f.subject.name == e.object.name),
        "{findings:#?}"
    );
    assert_eq!(e.keys.len(), 1);
    assert!(e.keys[0].finalizer.starts_with("finalizer.acme-"));
    assert_eq!(e.keys[0].owner, "Dead");
    assert!(e.keys[0].then.starts_with("removed"), "{e:?}");
    let text = p.render_dry_run();
    let at = text
        .find("Expected in later rounds")
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        text[at..].contains(&format!(
            "Challenge {}/{}: once webhook \"validate.kyverno.svc-fail\"",
            e.object.namespace.as_deref().unwrap(),
            e.object.name
        )),
        "{text}"
    );
    // Nothing is expected behind a webhook the plan does not open.
    let mut none = s.clone();
    none.namespace_content
        .retain(|r| r.metadata.deletion_timestamp.is_some());
    assert!(run(&none).1.expected.is_empty());
}

/// A User outside the cluster (a management cluster's controller, say)
/// granted update and patch on the Challenges of API group `group`: no
/// pod of this cluster is that writer, so the key's owner is Unknown.
fn grant_an_outside_user_challenge_updates(s: &mut Snapshot, group: &str) {
    let rbac = s.rbac.as_mut().expect("recorded with RBAC");
    rbac.cluster_roles.push(
        serde_json::from_value(
            serde_json::json!({"metadata": {"name": "acme-solver"}, "rules": [
            {"apiGroups": [group], "resources": ["challenges"], "verbs": ["update", "patch"]}]}),
        )
        .unwrap(),
    );
    rbac.cluster_role_bindings.push(
        serde_json::from_value(serde_json::json!({"metadata": {"name": "acme-solver"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "acme-solver"},
            "subjects": [{"kind": "User", "name": "mgmt-cluster-acme"}]}))
        .unwrap(),
    );
}

/// Scenario 34 recorded (cert-manager uninstalled, its webhook left
/// failing closed, a Challenge held by its finalizer; no namespace is
/// being deleted). The fail-open is for the finalizer patch alone. With a
/// User outside the cluster granted update on Challenges (a management
/// cluster's controller, say), the key is Unknown and its patch refused:
/// opening the policy would then serve nothing, and it is refused too.
#[test]
fn a_fail_open_only_for_a_write_the_plan_refuses_is_refused_itself() {
    let s = doctor_support::load_snapshot("real-v1.34.4/cert-manager-webhook-rejects-patch");
    let (_, p) = run(&s);
    let names =
        |p: &Plan| -> Vec<&'static str> { p.mutating_steps().map(|st| st.action.name()).collect() };
    assert_eq!(
        names(&p),
        ["SetWebhookFailurePolicy", "RemoveFinalizers"],
        "the control: {p:#?}"
    );
    let mut outside = s.clone();
    grant_an_outside_user_challenge_updates(&mut outside, "acme-ovbvpy.cert-manager.io");
    let (_, p) = run(&outside);
    assert!(names(&p).is_empty(), "{p:#?}");
    let refusal = p
        .steps
        .iter()
        .find_map(|st| match &st.action {
            Action::Refuse { reason, .. }
                if reason.contains("would be failed open only for writes this plan refuses") =>
            {
                Some(reason)
            }
            _ => None,
        })
        .unwrap_or_else(|| panic!("{p:#?}"));
    assert!(refusal.contains("Challenge"), "{refusal}");
}

/// The same recording as above (scenario 36), with a User outside the
/// cluster granted update on Challenges: the key the fail-open will reveal
/// is Unknown, and the dry run says it will be refused unless its owner is
/// confirmed gone. Given `--assume-dead` for that key, the dry run says
/// what the later round will do then, as the findings about stuck objects
/// already do.
#[test]
fn what_the_dry_run_expects_heeds_assume_dead() {
    let mut s = doctor_support::load_snapshot("real-v1.34.4/webhook-then-dead-finalizer-chain");
    let challenge = s
        .namespace_content
        .iter()
        .find(|r| r.kind == "Challenge")
        .cloned()
        .expect("a Challenge in the recording");
    let group = challenge.api_version.split('/').next().unwrap().to_owned();
    let key = challenge.metadata.finalizers.as_ref().expect("finalizers")[0].clone();
    grant_an_outside_user_challenge_updates(&mut s, &group);
    let (findings, p) = run(&s);
    let k = &p.expected.first().unwrap_or_else(|| panic!("{p:#?}")).keys[0];
    assert_eq!(k.owner, "Unknown", "{k:?}");
    assert!(
        k.then.starts_with("refused") && k.then.contains(&format!("--assume-dead {key}")),
        "{k:?}"
    );
    let assumed = plan_assuming(&findings, &s, std::slice::from_ref(&key));
    let k = &assumed.expected[0].keys[0];
    assert_eq!(k.owner, "Dead", "{k:?}");
    assert!(
        k.then.starts_with("removed") && k.then.contains("assumed dead"),
        "{k:?}"
    );
    // Another key named changes nothing.
    let other = plan_assuming(&findings, &s, &["example.com/other".to_owned()]);
    assert_eq!(other.expected[0].keys[0].owner, "Unknown");
}
