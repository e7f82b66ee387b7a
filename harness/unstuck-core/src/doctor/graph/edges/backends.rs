//! Backends: an APIService or a webhook waits on the Service it calls;
//! the namespaces it blocks wait on it.

use super::super::NodeState;
use super::super::build::Builder;
use super::namespace_ref;
use crate::doctor::model::{Finding, FindingKind, ServiceKey, WebhookConfigKind};

/// An unavailable APIService waits on its Service; the namespaces whose
/// discovery it breaks wait on it.
pub(super) fn api_service(
    b: &mut Builder,
    i: usize,
    f: &Finding,
    service: &str,
    group_version: &str,
    blocks: &[String],
) {
    let api = b.api_service(&f.subject.name);
    if let Some((namespace, name)) = service.split_once('/') {
        let key = ServiceKey {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        };
        let svc = b.service(&key);
        let why = match f.kind() {
            FindingKind::DeadApiService => {
                format!("serves {group_version} from Service {key}, proven gone")
            }
            _ => format!("serves {group_version} from Service {key}, not proven gone"),
        };
        b.edge(&api, &svc, why, Some(i));
    }
    for ns in blocks {
        let from = b.stuck(&namespace_ref(ns));
        b.edge(
            &from,
            &api,
            format!("NamespaceDeletionDiscoveryFailure names {group_version}"),
            Some(i),
        );
    }
}

/// The facts of a [`FindingDetail::DeadWebhook`].
pub(super) struct DeadWebhook<'a> {
    pub kind: WebhookConfigKind,
    pub configuration: &'a str,
    pub name: &'a str,
    pub service: &'a ServiceKey,
    pub backend: &'a str,
    pub blocks: &'a [String],
    /// The writes that would release stuck objects, which it rejects.
    pub rejects: &'a [crate::doctor::model::RejectedWrite],
}

/// A webhook failing closed waits on its Service; the namespaces whose
/// content deletes it rejects wait on it.
pub(super) fn dead_webhook(b: &mut Builder, i: usize, w: DeadWebhook) {
    let hook = b.webhook(
        w.kind,
        w.configuration,
        w.name,
        NodeState::FailingClosed,
        None,
    );
    let svc = b.service(w.service);
    b.edge(
        &hook,
        &svc,
        format!(
            "failurePolicy Fail and its Service {} has no backend ({})",
            w.service, w.backend
        ),
        Some(i),
    );
    // Behind the fix: the stuck object's release (its finalizer patch,
    // the namespace's own finalizers) waits on the webhook too.
    for r in w.rejects {
        let from = b.stuck(&r.subject);
        b.edge(
            &from,
            &hook,
            format!(
                "{} needs {} {}, which webhook \"{}\" rejects",
                r.purpose, r.operation, r.resource, w.name
            ),
            Some(i),
        );
    }
    for ns in w.blocks {
        let from = b.stuck(&namespace_ref(ns));
        b.edge(
            &from,
            &hook,
            format!(
                "NamespaceDeletionContentFailure: failed calling webhook \"{}\"",
                w.name
            ),
            Some(i),
        );
    }
}

/// A CRD whose conversion webhook's Service is gone: every namespace whose
/// deletion fails on converting its objects waits on the CRD, the CRD on
/// its Service.
pub(super) fn conversion_webhook(
    b: &mut Builder,
    i: usize,
    crd: &str,
    service: &ServiceKey,
    backend: &str,
    blocks: &[String],
) {
    let c = b.crd(
        crd,
        NodeState::FailingClosed,
        Some("conversion strategy Webhook".into()),
    );
    let svc = b.service(service);
    b.edge(
        &c,
        &svc,
        format!("its conversion webhook calls Service {service}, which has no backend ({backend})"),
        Some(i),
    );
    for ns in blocks {
        let from = b.stuck(&namespace_ref(ns));
        b.edge(
            &from,
            &c,
            format!("its deletion fails converting {crd} objects (conversion webhook failed)"),
            Some(i),
        );
    }
}
