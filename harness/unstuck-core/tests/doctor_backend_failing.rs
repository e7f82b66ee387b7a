//! Backends that are there but fail the apiserver's calls, replayed on
//! snapshots recorded from scenarios 37-40 on a real v1.34.4 local cluster
//! (`tests/recorded/real-v1.34.4/webhook-backend-*.json`,
//! `apiservice-backend-hangs.json`): never "gone", never failed open or
//! deleted, the cause named with the apiserver's own words.
//!
//! `webhook-backend-500.json` was taken while scenarios 37, 38 and 39 ran
//! side by side: three configurations, each with a webhook named
//! `validate.policy.example.com`, one hanging, one answering 500, one with
//! a certificate the caBundle does not trust. The namespace conditions name
//! only the webhook; each finding must still be pinned on the right
//! configuration.

use std::time::Duration;

use unstuck_core::doctor::{
    Action, DeadWebhookFacts, DiagnoseOptions, Finding, FindingDetail, FindingKind, Plan, Snapshot,
    diagnose, plan,
};

fn recorded(name: &str) -> Snapshot {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/recorded/real-v1.34.4")
        .join(format!("{name}.json"));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("parsing {}: {e}", path.display()))
}

fn run(name: &str) -> (Vec<Finding>, Plan) {
    let s = recorded(name);
    let findings = diagnose(
        &s,
        &DiagnoseOptions {
            stuck_after: Duration::from_secs(3),
            ..Default::default()
        },
    );
    let p = plan(&findings, &s);
    (findings, p)
}

fn failing<'a>(findings: &'a [Finding], config: &str) -> &'a Finding {
    findings
        .iter()
        .find(|f| f.kind() == FindingKind::WebhookBackendFailing && f.subject.name == config)
        .unwrap_or_else(|| {
            panic!(
                "no WebhookBackendFailing for {config}: {:#?}",
                findings
                    .iter()
                    .map(|f| (f.kind(), &f.subject.name, &f.summary))
                    .collect::<Vec<_>>()
            )
        })
}

fn verdict(f: &Finding) -> (&str, &[String]) {
    match &f.detail {
        FindingDetail::WebhookBackendFailing {
            verdict,
            blocks_namespaces,
            ..
        } => (verdict.as_str(), blocks_namespaces.as_slice()),
        d => panic!("detail {d:?}"),
    }
}

fn no_writes_on_webhooks_or_apiservices(p: &Plan) {
    for s in &p.steps {
        assert!(
            !matches!(
                s.action,
                Action::SetWebhookFailurePolicy(_) | Action::DeleteApiService(_)
            ),
            "a backend that is there was acted on: {}",
            p.render_dry_run()
        );
    }
}

#[test]
fn a_500_and_a_tls_mismatch_side_by_side_are_each_misconfigured_on_their_own_configuration() {
    let (findings, p) = run("webhook-backend-500");
    assert!(
        findings
            .iter()
            .all(|f| f.kind() != FindingKind::DeadWebhook),
        "a backend that answers was called dead"
    );
    let e500 = failing(&findings, "policy-guard-qh6lpy");
    assert_eq!(
        verdict(e500),
        (
            "misconfigured: HTTP error",
            &["shop-qh6lpy".to_string()][..]
        )
    );
    assert!(
        e500.evidence
            .iter()
            .any(|e| e.contains("unstuck-backend: internal error (fault error500)")),
        "{:#?}",
        e500.evidence
    );
    let tls = failing(&findings, "policy-guard-icxl7p");
    assert_eq!(
        verdict(tls),
        ("misconfigured: TLS", &["shop-icxl7p".to_string()][..])
    );
    assert!(
        tls.evidence
            .iter()
            .any(|e| e.contains("x509: certificate signed by unknown authority")),
        "{:#?}",
        tls.evidence
    );
    for f in [e500, tls] {
        assert!(
            f.evidence.iter().any(|e| e.contains("ready endpoint")),
            "the backend's endpoint is the evidence it is there: {:#?}",
            f.evidence
        );
    }
    // The hanging one's namespace had no condition yet when this was
    // taken: nothing is said of it.
    assert!(
        findings
            .iter()
            .all(|f| !(f.kind() == FindingKind::WebhookBackendFailing
                && f.subject.name == "policy-guard-ibcqob")),
    );
    no_writes_on_webhooks_or_apiservices(&p);
    let advice: Vec<&str> = p
        .steps
        .iter()
        .filter_map(|s| match &s.action {
            Action::Refuse { reason, .. } if reason.contains("policy-guard-icxl7p") => {
                Some(reason.as_str())
            }
            _ => None,
        })
        .collect();
    assert!(
        advice.iter().any(|r| r.contains("caBundle")),
        "the TLS mismatch's advice names the caBundle: {advice:?}"
    );
}

#[test]
fn a_hanging_webhook_is_slow_with_its_timeout_not_gone() {
    let (findings, p) = run("webhook-backend-hangs");
    let f = findings
        .iter()
        .find(|f| f.kind() == FindingKind::WebhookBackendFailing)
        .expect("a WebhookBackendFailing finding");
    let FindingDetail::WebhookBackendFailing {
        verdict, timeout, ..
    } = &f.detail
    else {
        panic!("{:?}", f.detail)
    };
    assert_eq!(verdict, "slow");
    assert_eq!(timeout.as_deref(), Some("5s"));
    assert!(
        f.evidence
            .iter()
            .any(|e| e.contains("did not answer within the call's timeout of 5s")),
        "{:#?}",
        f.evidence
    );
    // The collector timed it: a dry-run DELETE of the object the
    // namespace controller fails to delete took the whole timeout.
    assert!(
        f.evidence.iter().any(
            |e| e.contains("dry-run DELETE (dryRun=All) of ConfigMap shop-")
                && e.contains("/guarded-settings was rejected after 5.0")
                && e.contains("context deadline exceeded")
        ),
        "{:#?}",
        f.evidence
    );
    assert!(
        findings
            .iter()
            .all(|f| f.kind() != FindingKind::DeadWebhook)
    );
    no_writes_on_webhooks_or_apiservices(&p);
}

#[test]
fn what_is_timed_is_an_object_the_failing_webhook_takes_in_the_namespace_it_fails() {
    let s = recorded("webhook-backend-hangs");
    let targets = unstuck_core::doctor::backend::probe_targets(&s);
    assert!(!targets.is_empty());
    for (hook, r) in &targets {
        assert_eq!(hook, "validate.policy.example.com");
        assert_eq!(r.kind, "ConfigMap");
        assert_eq!(r.metadata.name.as_deref(), Some("guarded-settings"));
        let labels = r.metadata.labels.clone().unwrap_or_default();
        assert_eq!(
            labels
                .get("backends.policy.example.com/guarded")
                .map(String::as_str),
            Some("true"),
            "only what its objectSelector takes: {r:?}"
        );
    }
    // A namespace blocked by a backend proven gone is not timed: nothing
    // answers there to measure.
    let gone = recorded("dead-admission-webhook");
    assert!(unstuck_core::doctor::backend::probe_targets(&gone).is_empty());
}

#[test]
fn an_aggregated_api_that_hangs_is_reported_not_dropped_for_its_ready_endpoint() {
    let (findings, p) = run("apiservice-backend-hangs");
    let f = findings
        .iter()
        .find(|f| f.kind() == FindingKind::ApiServiceUnavailable)
        .unwrap_or_else(|| {
            panic!(
                "no ApiServiceUnavailable: {:#?}",
                findings
                    .iter()
                    .map(|f| (f.kind(), &f.subject.name))
                    .collect::<Vec<_>>()
            )
        });
    assert!(f.subject.name.starts_with("v1beta1.metrics-"));
    assert!(
        f.evidence.iter().any(|e| e.contains("slow or hanging")
            && e.contains("Client.Timeout exceeded while awaiting headers")),
        "{:#?}",
        f.evidence
    );
    assert!(
        findings
            .iter()
            .all(|f| f.kind() != FindingKind::DeadApiService)
    );
    no_writes_on_webhooks_or_apiservices(&p);
}

/// Scenario 49 (`webhook-backend-hangs-behind-finalizer.json`, the first
/// doctor call's snapshot): a ConfigMap with a dead finalizer in a
/// Terminating namespace, guarded by a webhook whose backend hangs. The
/// finalizer's removal is an UPDATE the webhook matches: both findings
/// say so, the graph draws the wait, and the plan holds the write back
/// until the backend is repaired. Nothing touches the webhook.
#[test]
fn a_hanging_webhook_in_front_of_a_dead_finalizers_release_holds_the_patch_back() {
    let s = recorded("webhook-backend-hangs-behind-finalizer");
    let (findings, p) = run("webhook-backend-hangs-behind-finalizer");
    let (wi, webhook) = findings
        .iter()
        .enumerate()
        .find(|(_, f)| f.kind() == FindingKind::WebhookBackendFailing)
        .expect("WebhookBackendFailing");
    let (oi, orphan) = findings
        .iter()
        .enumerate()
        .find(|(_, f)| f.kind() == FindingKind::OrphanFinalizer)
        .expect("OrphanFinalizer");
    assert_eq!(orphan.subject.name, "guarded-leftover");
    let FindingDetail::WebhookBackendFailing {
        verdict, rejects, ..
    } = &webhook.detail
    else {
        panic!("{:?}", webhook.detail);
    };
    assert_eq!(verdict, "slow");
    assert_eq!(rejects.len(), 1, "{rejects:?}");
    assert_eq!(rejects[0].subject, orphan.subject);
    assert_eq!(
        (rejects[0].operation.as_str(), rejects[0].resource.as_str()),
        ("UPDATE", "configmaps")
    );
    assert!(
        orphan.evidence.iter().any(|e| e.contains(
            "removing its finalizers needs UPDATE configmaps, which webhook \"validate.policy.example.com\""
        ) && e.contains("its backend is slow")),
        "{:#?}",
        orphan.evidence
    );
    assert!(
        webhook
            .summary
            .contains("it rejects the write that would release 1 stuck object(s)")
    );

    // The plan: the finalizer patch is there but held back, never a
    // fail-open of the webhook.
    no_writes_on_webhooks_or_apiservices(&p);
    let blocked: Vec<_> = p.blockers_of(oi).collect();
    assert_eq!(blocked.len(), 1, "{:#?}", p.blocked);
    assert_eq!(blocked[0].webhook_finding, wi);
    assert_eq!(blocked[0].failing.as_deref(), Some("slow"));
    let patch = p
        .steps
        .iter()
        .find(|st| st.finding_index == oi && st.action.is_mutating())
        .expect("the finalizer patch is planned");
    assert!(
        patch
            .rationale
            .contains("never fails open a webhook whose backend is there"),
        "{}",
        patch.rationale
    );

    // The graph: the ConfigMap waits on the webhook, for its release.
    let graph = unstuck_core::doctor::BlockerGraph::build(&findings, &p, &s);
    assert!(
        graph
            .edges
            .iter()
            .any(|e| e.from.contains("guarded-leftover")
                && e.to.contains("validate.policy.example.com")
                && e.why.contains("fails while its backend is slow")),
        "{:#?}",
        graph.edges
    );
}

/// The same snapshot once the backend is repaired but before the namespace
/// controller's next pass: its condition still says "context deadline
/// exceeded", and the doctor's own dry-run DELETE through the webhook is
/// admitted. The backend answers now: nothing waits on it, and the
/// finalizer patch is no longer held back.
#[test]
fn a_webhook_whose_dry_run_is_admitted_now_holds_nothing_back() {
    let mut s = recorded("webhook-backend-hangs-behind-finalizer");
    let ns = s
        .namespaces
        .iter()
        .find_map(|n| {
            n.metadata
                .name
                .clone()
                .filter(|name| name.starts_with("shop-"))
        })
        .unwrap();
    s.webhook_probes = vec![unstuck_core::doctor::backend::WebhookProbe {
        webhook: "validate.policy.example.com".into(),
        object: format!("ConfigMap {ns}/guarded-leftover"),
        elapsed_ms: 12,
        error: None,
    }];
    let findings = diagnose(
        &s,
        &DiagnoseOptions {
            stuck_after: Duration::from_secs(3),
            ..Default::default()
        },
    );
    assert!(
        !findings
            .iter()
            .any(|f| f.kind() == FindingKind::WebhookBackendFailing),
        "{:#?}",
        findings.iter().map(|f| &f.summary).collect::<Vec<_>>()
    );
    let p = plan(&findings, &s);
    assert!(p.blocked.is_empty(), "{:#?}", p.blocked);
    let oi = findings
        .iter()
        .position(|f| f.kind() == FindingKind::OrphanFinalizer)
        .expect("OrphanFinalizer");
    assert!(
        p.steps
            .iter()
            .any(|st| st.finding_index == oi && st.action.is_mutating()),
        "{}",
        p.render_dry_run()
    );
}

/// A Terminating object the webhook takes is a probe candidate too, after
/// the ones not being deleted: here the guarded ConfigMap is all there is.
#[test]
fn a_terminating_object_is_timed_when_it_is_all_the_webhook_takes() {
    let s = recorded("webhook-backend-hangs-behind-finalizer");
    let targets = unstuck_core::doctor::backend::probe_targets(&s);
    assert_eq!(targets.len(), 1, "{targets:?}");
    assert_eq!(targets[0].0, "validate.policy.example.com");
    assert_eq!(
        targets[0].1.metadata.name.as_deref(),
        Some("guarded-leftover")
    );
}

/// Recorded on the kind suite (v1.34.4, one shared cluster) while three
/// scenarios each had a webhook named `validate.policy.example.com`: one
/// whose backend hangs (policy-guard-ilkd3v), one whose certificate expired
/// (policy-guard-l6zt76) and one whose Service was never created
/// (policy-guard-z6jmkn, no namespaceSelector: every namespace). The dead
/// one's name once stood for all three: the expired certificate was not
/// found and its namespace was said to be blocked by a backend that is
/// gone. The error quotes the URL each call posted to, which pins it.
#[test]
fn a_dead_webhook_does_not_hide_a_failing_one_of_the_same_name() {
    let (findings, p) = run("same-named-webhooks-side-by-side");
    let tls = failing(&findings, "policy-guard-l6zt76");
    assert_eq!(
        verdict(tls),
        ("misconfigured: TLS", &["shop-l6zt76".to_string()][..])
    );
    assert!(
        tls.evidence
            .iter()
            .any(|e| e.contains("x509: certificate has expired")),
        "{:#?}",
        tls.evidence
    );
    let dead = findings
        .iter()
        .find(|f| f.kind() == FindingKind::DeadWebhook)
        .expect("the webhook whose Service is missing is dead");
    assert_eq!(dead.subject.name, "policy-guard-z6jmkn");
    match &dead.detail {
        FindingDetail::DeadWebhook(DeadWebhookFacts {
            blocks_namespaces, ..
        }) => assert_eq!(
            blocks_namespaces,
            &["shop-z6jmkn".to_string()],
            "only its own scenario's namespace quotes its URL"
        ),
        d => panic!("detail {d:?}"),
    }
    let content = findings
        .iter()
        .find(|f| {
            f.kind() == FindingKind::NamespaceContentDeletionFailed
                && f.subject.name == "shop-l6zt76"
        })
        .expect("the namespace's failure is reported");
    assert!(
        content
            .evidence
            .iter()
            .all(|e| !e.contains("backend is gone")),
        "{:#?}",
        content.evidence
    );
    assert!(
        content
            .evidence
            .iter()
            .any(|e| e.contains("ValidatingWebhookConfiguration policy-guard-l6zt76")),
        "the one webhook the error can mean is named with its configuration: {:#?}",
        content.evidence
    );
    // The dead one may be failed open for its own namespace; the two whose
    // backends are there are never touched.
    for s in &p.steps {
        if let Action::SetWebhookFailurePolicy(set) = &s.action {
            assert_eq!(set.configuration_name, "policy-guard-z6jmkn");
        }
        assert!(!matches!(s.action, Action::DeleteApiService(_)));
    }
}
