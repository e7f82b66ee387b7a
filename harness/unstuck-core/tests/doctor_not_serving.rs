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
    Action, BlockerGraph, DiagnoseOptions, FindingDetail, FindingKind, diagnose, plan,
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
        .find(|f| f.kind == FindingKind::ApiServiceUnavailable)
        .expect("the APIService is unavailable, not dead");
    assert!(
        !findings
            .iter()
            .any(|f| f.kind == FindingKind::DeadApiService),
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
        .find(|f| f.kind == FindingKind::WebhookBackendFailing)
        .expect("the webhook is named as the blocker");
    let FindingDetail::FailingWebhook {
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
        .find(|f| f.kind == FindingKind::NamespaceOrphanMetadataFinalizer)
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
            .any(|f| f.kind == FindingKind::WebhookBackendFailing),
        "{findings:#?}"
    );
}
