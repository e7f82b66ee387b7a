//! The edges each finding argues: one function per [`FindingDetail`]
//! variant. A new variant adds one arm to [`add`] (and, if it names a new
//! kind of thing, one constructor in `build.rs`); until then the catch-all
//! arm puts the finding's subject in the graph, so nothing is lost.

//!
//! By blocker family: [`finalizers`] (keys, foreground chains,
//! protection), [`namespace`] (what a Terminating namespace's conditions
//! name), [`backends`] (APIServices and webhooks and their Services),
//! [`pods`] (a pod on its node), [`load_balancer`] (a Service and its
//! cloud controller manager).

mod backends;
mod failing;
mod finalizers;
mod load_balancer;
mod namespace;
mod pods;

use super::build::{Builder, object_id, object_label};
use super::{NodeKind, NodeState};
use crate::doctor::model::{
    ApiServiceFacts, ConversionWebhookFacts, DeadWebhookFacts, FinalizerFacts, Finding,
    FindingDetail, ObjectRef,
};
use backends::{DeadWebhook, api_service, dead_webhook};
use finalizers::{finalizers, foreground, orphan_finalizer, protected};
use namespace::{
    content_failure, namespace_content, namespace_discovery, namespace_stall, spec_tokens,
};
use pods::pod_stuck;

/// Adds what finding `i` (0-based, in report order) argues.
pub(super) fn add(b: &mut Builder, i: usize, f: &Finding) {
    b.argue(&object_id(&f.subject), i);
    match &f.detail {
        FindingDetail::OrphanFinalizer(rem)
        | FindingDetail::NamespaceOrphanMetadataFinalizer(rem) => orphan_finalizer(b, i, f, rem),
        FindingDetail::WaitingOnLiveController(FinalizerFacts { verdicts, .. })
        | FindingDetail::UnknownFinalizerOwner(FinalizerFacts { verdicts, .. }) => {
            finalizers(b, i, f, verdicts)
        }
        FindingDetail::WaitingOnDependents { dependents, leaves } => {
            foreground(b, i, f, dependents, leaves)
        }
        FindingDetail::ProtectedFinalizerInUse { finalizer, used_by } => {
            protected(b, i, f, finalizer, used_by)
        }
        FindingDetail::NamespaceBlockedByContent {
            remaining_resources,
            remaining_finalizers,
            blocking_objects,
        } => namespace_content(
            b,
            i,
            f,
            blocking_objects,
            remaining_resources,
            remaining_finalizers,
        ),
        FindingDetail::NamespaceBlockedByDiscovery {
            group_versions,
            api_services,
            ..
        } => namespace_discovery(b, i, f, group_versions, api_services),
        FindingDetail::DeadApiService(ApiServiceFacts {
            service,
            group_version,
            blocks_namespaces,
            ..
        })
        | FindingDetail::ApiServiceUnavailable(ApiServiceFacts {
            service,
            group_version,
            blocks_namespaces,
            ..
        }) => api_service(b, i, f, service, group_version, blocks_namespaces),
        FindingDetail::DeadWebhook(DeadWebhookFacts {
            configuration,
            configuration_name,
            webhook,
            service,
            backend,
            blocks_namespaces,
            rejects,
            ..
        }) => dead_webhook(
            b,
            i,
            DeadWebhook {
                kind: *configuration,
                configuration: configuration_name,
                name: webhook,
                service,
                backend,
                blocks: blocks_namespaces,
                rejects,
            },
        ),
        FindingDetail::NamespaceContentDeletionFailed { message, webhooks } => {
            content_failure(b, i, f, message, webhooks)
        }
        FindingDetail::NamespaceSpecFinalizerStuck { stuck_tokens, .. } => {
            spec_tokens(b, i, f, stuck_tokens)
        }
        FindingDetail::PodStuckTerminating { node, hint, .. } => {
            pod_stuck(b, i, f, node.as_deref(), *hint)
        }
        FindingDetail::PodNotStarting { .. } => {
            let r = &f.subject;
            b.node(
                object_id(r),
                NodeKind::Object,
                object_label(r),
                NodeState::NotStarting,
                None,
            );
        }
        FindingDetail::NamespaceNotProgressing(stall) => namespace_stall(b, i, f, stall),
        // Variants added after this module was written: their subject is
        // in the graph, their edges come with their own arm above.
        FindingDetail::DeadConversionWebhook(ConversionWebhookFacts {
            crd,
            service,
            backend,
            blocks_namespaces,
            ..
        }) => backends::conversion_webhook(b, i, crd, service, backend, blocks_namespaces),
        FindingDetail::WebhookBackendFailing { .. } => failing::failing_webhook(b, i, f),
        FindingDetail::LoadBalancerCleanupPending(lb) => {
            load_balancer::cleanup_pending(b, i, f, lb)
        }
        #[allow(unreachable_patterns)]
        _ => {
            b.object(&f.subject);
        }
    }
}

/// The Namespace called `name`.
fn namespace_ref(name: &str) -> ObjectRef {
    ObjectRef {
        api_version: "v1".into(),
        kind: "Namespace".into(),
        namespace: None,
        name: name.to_owned(),
        uid: None,
    }
}
