//! A dead webhook behind the doctor's own fix, on snapshots recorded from
//! a real v1.34.4 local cluster (scenarios 34 and 35): cert-manager's
//! validating webhook rejects the Challenge's finalizer patch, Gatekeeper's
//! check-ignore-label rejects the namespace's. Neither webhook is named by
//! any namespace condition; the doctor finds them by matching the writes
//! it plans, orders the fail-open first, and leaves the webhooks that keep
//! nothing stuck.

mod doctor_support;

use std::time::Duration;

use doctor_support::load_snapshot;
use unstuck_core::doctor::{
    Action, DeadWebhookFacts, DiagnoseOptions, Finding, FindingDetail, FindingKind, Plan, diagnose,
    plan,
};

fn run(name: &str) -> (Vec<Finding>, Plan) {
    let s = load_snapshot(&format!("real-v1.34.4/{name}"));
    let opts = DiagnoseOptions {
        stuck_after: Duration::from_secs(3),
        ..Default::default()
    };
    let findings = diagnose(&s, &opts);
    let p = plan(&findings, &s);
    (findings, p)
}

fn webhook_finding<'a>(findings: &'a [Finding], config_kind: &str) -> (usize, &'a Finding) {
    findings
        .iter()
        .enumerate()
        .find(|(_, f)| f.kind() == FindingKind::DeadWebhook && f.subject.kind == config_kind)
        .unwrap_or_else(|| panic!("no dead {config_kind} in {findings:#?}"))
}

fn step_index(p: &Plan, finding: usize) -> usize {
    p.steps
        .iter()
        .position(|s| s.finding_index == finding)
        .unwrap_or_else(|| panic!("no step for finding {finding}: {p:#?}"))
}

#[test]
fn cert_managers_webhook_is_found_behind_the_challenges_finalizer_patch() {
    let (findings, p) = run("cert-manager-webhook-rejects-patch");
    let (vi, validating) = webhook_finding(&findings, "ValidatingWebhookConfiguration");
    let FindingDetail::DeadWebhook(DeadWebhookFacts {
        rejects,
        blocks_namespaces,
        ..
    }) = &validating.detail
    else {
        panic!("{validating:#?}")
    };
    assert!(blocks_namespaces.is_empty(), "no namespace names it");
    assert_eq!(rejects.len(), 1, "{rejects:#?}");
    assert_eq!(rejects[0].subject.kind, "Challenge");
    assert_eq!(rejects[0].resource, "challenges");
    assert_eq!(rejects[0].assumed, None, "rules and selector evaluated");
    let (oi, orphan) = findings
        .iter()
        .enumerate()
        .find(|(_, f)| f.kind() == FindingKind::OrphanFinalizer && f.subject.kind == "Challenge")
        .expect("the Challenge's finalizer is an orphan");
    assert!(
        orphan
            .evidence
            .iter()
            .any(|e| e.contains("webhook \"webhook.cert-manager.io\"") && e.contains("rejects")),
        "{:#?}",
        orphan.evidence
    );
    // Fail open first, then the patch, which names its blocker.
    let open = step_index(&p, vi);
    let strip = step_index(&p, oi);
    assert!(matches!(
        p.steps[open].action,
        Action::SetWebhookFailurePolicy(_)
    ));
    assert!(matches!(p.steps[strip].action, Action::RemoveFinalizers(_)));
    assert!(open < strip, "{p:#?}");
    let blockers: Vec<_> = p.blockers_of(oi).collect();
    assert_eq!(blockers.len(), 1);
    assert_eq!(blockers[0].webhook_finding, vi);
    assert!(
        p.steps[strip]
            .rationale
            .contains(&format!("(finding #{})", vi + 1)),
        "{}",
        p.steps[strip].rationale
    );
    // The mutating webhook (CREATE of certificaterequests) is as dead and
    // keeps nothing stuck: left as it is.
    let (mi, _) = webhook_finding(&findings, "MutatingWebhookConfiguration");
    let left = &p.steps[step_index(&p, mi)];
    assert!(
        matches!(&left.action, Action::Wait { reason } if reason.contains("keeps nothing stuck")),
        "{left:#?}"
    );
    assert_eq!(p.mutating_steps().count(), 2, "{p:#?}");
}

#[test]
fn gatekeepers_label_check_is_found_behind_the_namespace_finalizer_patch() {
    let (findings, p) = run("gatekeeper-webhook-rejects-ns-patch");
    let dead: Vec<&Finding> = findings
        .iter()
        .filter(|f| f.kind() == FindingKind::DeadWebhook)
        .collect();
    // validation.gatekeeper.sh fails open already: not dead, not reported.
    assert_eq!(dead.len(), 1, "{dead:#?}");
    let FindingDetail::DeadWebhook(DeadWebhookFacts {
        webhook, rejects, ..
    }) = &dead[0].detail
    else {
        unreachable!()
    };
    assert_eq!(webhook, "check-ignore-label.gatekeeper.sh");
    assert_eq!(rejects.len(), 1);
    assert_eq!(rejects[0].subject.kind, "Namespace");
    assert_eq!(rejects[0].resource, "namespaces");
    let ns = findings
        .iter()
        .position(|f| f.kind() == FindingKind::NamespaceOrphanMetadataFinalizer)
        .expect("the Rancher finalizer");
    assert_eq!(p.blockers_of(ns).count(), 1);
    let wi = findings
        .iter()
        .position(|f| f.kind() == FindingKind::DeadWebhook)
        .unwrap();
    assert!(step_index(&p, wi) < step_index(&p, ns));
}

#[test]
fn the_graph_shows_the_challenge_waiting_on_its_key_and_on_the_webhook() {
    let s = load_snapshot("real-v1.34.4/cert-manager-webhook-rejects-patch");
    let opts = DiagnoseOptions {
        stuck_after: Duration::from_secs(3),
        ..Default::default()
    };
    let findings = diagnose(&s, &opts);
    let p = plan(&findings, &s);
    let g = unstuck_core::doctor::BlockerGraph::build(&findings, &p, &s);
    let json = serde_json::to_value(&g).unwrap();
    let edges = json["edges"].as_array().unwrap();
    assert!(
        edges
            .iter()
            .any(|e| e["from"].as_str().unwrap().contains("Challenge")
                && e["to"].as_str().unwrap().starts_with("webhook:")
                && e["why"].as_str().unwrap().contains("rejects")),
        "{json:#}"
    );
    // Both roots: the dead key (RemoveFinalizers) and the webhook's gone
    // Service (its fail-open).
    let roots = json["roots"].as_array().unwrap();
    let actions: Vec<&str> = roots
        .iter()
        .filter_map(|r| r["remedy"]["action"].as_str())
        .collect();
    assert!(actions.contains(&"RemoveFinalizers"), "{roots:#?}");
    assert!(actions.contains(&"SetWebhookFailurePolicy"), "{roots:#?}");
}

/// The doctor's own remedy on a dead registration is a write too: a
/// webhook on `*/*` DELETE that fails closed with its backend gone (as
/// Kyverno's resource webhook is generated for a policy on every kind)
/// rejects deleting the dead APIService, and is named first.
#[test]
fn a_webhook_on_every_delete_stands_before_deleting_a_dead_apiservice() {
    use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
    use unstuck_core::doctor::{ServiceKey, ServiceLookup};
    // Recorded before the collector looked up APIService backends: the
    // lookup it makes now (Service not found) is added.
    let mut s = doctor_support::with_missing_backend(
        load_snapshot("real-v1.34.4/dead-metrics-apiservice"),
        "v1beta1.metrics.k8s.io",
    );
    let hook: ValidatingWebhookConfiguration = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "kyverno-resource-validating-webhook-cfg", "uid": "w-uid", "resourceVersion": "7"},
        "webhooks": [{
            "name": "validate.kyverno.svc-fail",
            "admissionReviewVersions": ["v1"], "sideEffects": "None", "failurePolicy": "Fail",
            "clientConfig": {"service": {"namespace": "kyverno", "name": "kyverno-svc"}},
            "rules": [{"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["DELETE"], "resources": ["*/*"]}]
        }]
    }))
    .unwrap();
    s.validating_webhooks.push(hook);
    s.webhook_services.push(ServiceLookup {
        service: ServiceKey {
            namespace: "kyverno".into(),
            name: "kyverno-svc".into(),
        },
        exists: false,
        ..Default::default()
    });
    let opts = DiagnoseOptions {
        stuck_after: Duration::from_secs(3),
        ..Default::default()
    };
    let findings = diagnose(&s, &opts);
    let p = plan(&findings, &s);
    let ai = findings
        .iter()
        .position(|f| f.kind() == FindingKind::DeadApiService)
        .expect("the dead APIService");
    let wi = findings
        .iter()
        .position(|f| f.kind() == FindingKind::DeadWebhook)
        .expect("the dead webhook");
    let FindingDetail::DeadWebhook(DeadWebhookFacts { rejects, .. }) = &findings[wi].detail else {
        unreachable!()
    };
    assert!(
        rejects
            .iter()
            .any(|r| r.operation == "DELETE" && r.subject.kind == "APIService"),
        "{rejects:#?}"
    );
    assert_eq!(p.blockers_of(ai).count(), 1, "{p:#?}");
    assert!(step_index(&p, wi) < step_index(&p, ai));
    assert!(matches!(
        p.steps[step_index(&p, wi)].action,
        Action::SetWebhookFailurePolicy(_)
    ));
}
