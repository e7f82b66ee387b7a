//! A webhook whose backend is there but failing (slow, misconfigured):
//! the namespaces whose deletes it fails, and the stuck objects whose
//! release it would fail, wait on it; it waits on its Service. Its root
//! has no remedy: the plan advises a repair.

use super::super::NodeState;
use super::super::build::Builder;
use super::namespace_ref;
use crate::doctor::model::{Finding, FindingDetail};

pub(super) fn failing_webhook(b: &mut Builder, i: usize, f: &Finding) {
    let FindingDetail::WebhookBackendFailing {
        configuration,
        configuration_name,
        webhook,
        service,
        verdict,
        quote,
        blocks_namespaces,
        rejects,
        ..
    } = &f.detail
    else {
        return;
    };
    let hook = b.webhook(
        *configuration,
        configuration_name,
        webhook,
        NodeState::Unavailable,
        Some(format!("backend {verdict}")),
    );
    if let Some(s) = service {
        let svc = b.service(s);
        b.edge(
            &hook,
            &svc,
            format!("failurePolicy Fail and its backend behind Service {s} is {verdict}: {quote}"),
            Some(i),
        );
    }
    // Behind the fix: a stuck object's release the webhook matches waits
    // on the backend's repair.
    for r in rejects {
        let from = b.stuck(&r.subject);
        b.edge(
            &from,
            &hook,
            format!(
                "{} needs {} {}, which webhook \"{webhook}\" fails while its backend is {verdict}",
                r.purpose, r.operation, r.resource
            ),
            Some(i),
        );
    }
    for ns in blocks_namespaces {
        let from = b.stuck(&namespace_ref(ns));
        b.edge(
            &from,
            &hook,
            format!(
                "NamespaceDeletionContentFailure: failed calling webhook \"{webhook}\": {quote}"
            ),
            Some(i),
        );
    }
}
