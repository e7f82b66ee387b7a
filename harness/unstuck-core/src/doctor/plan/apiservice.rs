//! APIService remedies: deleting a registration ([`DeleteApiService`])
//! only when a lookup of its Service proves the backend gone, and the
//! refusal for one that is merely unavailable.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{Action, FORCE_DELETE_REGISTRATION, PlannedStep, refuse};
use crate::doctor::apiservice::Backend;
use crate::doctor::conditions::api_service_available;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;

use crate::doctor::model::{ApiServiceFacts, Finding, Snapshot};
use crate::doctor::owner::fmt_secs;

/// The APIService reasons that say the backend itself is missing or broken
/// (a registration whose extension was removed). `ServiceAccessError` and
/// `EndpointsAccessError` (status Unknown) say the aggregator could not
/// look, which is no proof the backend is gone.
const BACKEND_GONE_REASONS: [&str; 5] = [
    "ServiceNotFound",
    "EndpointsNotFound",
    "MissingEndpoints",
    "ServicePortError",
    "FailedDiscoveryCheck",
];

/// Delete one APIService registration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeleteApiService {
    /// e.g. `v1beta1.metrics.k8s.io`.
    pub name: String,
    /// Precondition.
    pub uid: String,
    /// Precondition.
    pub resource_version: String,
    /// Why it is dead (the Available reason and message).
    pub reason: String,
}

impl DeleteApiService {
    /// `/apis/apiregistration.k8s.io/v1/apiservices/<name>`.
    pub fn api_path(&self) -> String {
        format!("/apis/apiregistration.k8s.io/v1/apiservices/{}", self.name)
    }

    /// The DELETE body: `DeleteOptions` with uid and resourceVersion
    /// preconditions, so a re-created or changed registration is not
    /// deleted.
    pub fn delete_options(&self) -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "preconditions": {"uid": self.uid, "resourceVersion": self.resource_version},
        })
    }
}

/// ApiServiceUnavailable: left in place, its backend not proven gone,
/// with what to restore named when the lookup shows why it does not serve
/// (a pod's pull failure, crash, or no node to run on). After a sustained
/// outage ([`Outage`]) that blocks a Terminating namespace, the
/// registration is removed only when a person named it; otherwise the
/// refusal names the flag that would.
pub(super) fn unavailable(
    i: usize,
    f: &Finding,
    facts: &ApiServiceFacts,
    snapshot: &Snapshot,
) -> PlannedStep {
    let ApiServiceFacts {
        service,
        outage,
        blocks_namespaces,
        ..
    } = facts;
    let name = &f.subject.name;
    let Some(o) = outage else {
        let cause = service.split_once('/').and_then(|(ns, svc)| {
            let lookup = snapshot
                .api_service_backends
                .iter()
                .find(|l| l.service.namespace == ns && l.service.name == svc);
            crate::doctor::backend::not_serving_cause(lookup)
                .map(|c| format!("; Service {service} does not serve: {c}"))
        });
        return refuse(
            i,
            format!(
                "{} is unavailable but its backend is not proven gone; it is left in place (restore its backend, or check its Service and endpoints){}",
                f.subject,
                cause.unwrap_or_default()
            ),
        );
    };
    let lasted = format!(
        "has not served for {} (since {}); Service {service} does not serve: {}",
        fmt_secs(o.lasted_secs),
        o.since,
        o.cause
    );
    if !o.sustained() {
        return refuse(
            i,
            format!(
                "APIService {name} {lasted}: under the --apiservice-outage-after bound of {}, it is left in place (restore its backend; a registration is removed only after a sustained outage)",
                fmt_secs(o.bound_secs)
            ),
        );
    }
    if blocks_namespaces.is_empty() {
        return refuse(
            i,
            format!(
                "APIService {name} {lasted}, but it blocks no Terminating namespace: restore its backend rather than remove the registration"
            ),
        );
    }
    if !o.removal_allowed {
        return refuse(
            i,
            format!(
                "APIService {name} {lasted}, past the --apiservice-outage-after bound of {}, and blocks deletion of namespace(s) {}: restore its backend, or, once you have checked that nothing needs {} (HPAs, kubectl top), run again with --allow-apiservice-removal={name} to remove the registration (saved first; kubectl apply -f the saved file restores it)",
                fmt_secs(o.bound_secs),
                blocks_namespaces.join(", "),
                name
            ),
        );
    }
    let Some(api) = snapshot.api_service(name) else {
        return refuse(
            i,
            format!("APIService {name} is not in the snapshot any more; nothing to delete"),
        );
    };
    let (Some(uid), Some(rv)) = preconditions(api) else {
        return refuse(
            i,
            format!(
                "APIService {name} has no uid/resourceVersion in the snapshot; a delete could not be preconditioned"
            ),
        );
    };
    PlannedStep {
        finding_index: i,
        action: Action::DeleteApiService(DeleteApiService {
            name: name.clone(),
            uid,
            resource_version: rv,
            reason: format!("not serving for {}: {}", fmt_secs(o.lasted_secs), o.cause),
        }),
        rationale: format!(
            "APIService {name} {lasted}, past the --apiservice-outage-after bound of {}, and blocks deletion of namespace(s) {}; --allow-apiservice-removal named it, so its registration is deleted after saving its manifest (kubectl apply -f the saved file restores it once the backend serves)",
            fmt_secs(o.bound_secs),
            blocks_namespaces.join(", ")
        ),
        force_level: FORCE_DELETE_REGISTRATION,
    }
}

/// The registration's uid and resourceVersion, the delete's preconditions.
fn preconditions(api: &APIService) -> (Option<String>, Option<String>) {
    (
        api.metadata.uid.clone(),
        api.metadata.resource_version.clone(),
    )
}

pub(super) fn delete_api_service(
    i: usize,
    f: &Finding,
    facts: &ApiServiceFacts,
    snapshot: &Snapshot,
) -> PlannedStep {
    let name = &f.subject.name;
    let Some(api) = snapshot.api_service(name) else {
        return refuse(
            i,
            format!("APIService {name} is not in the snapshot any more; nothing to delete"),
        );
    };
    if api.spec.as_ref().and_then(|s| s.service.as_ref()).is_none() {
        return refuse(
            i,
            format!(
                "APIService {name} is local (no spec.service); local registrations are never deleted"
            ),
        );
    }
    let Some(available) = api_service_available(api) else {
        return refuse(
            i,
            format!("APIService {name} has no Available condition; not judged dead"),
        );
    };
    if available.status == "True" {
        return refuse(
            i,
            format!("APIService {name} is Available; a healthy APIService is never deleted"),
        );
    }
    let reason = available.reason.clone().unwrap_or_default();
    let message = available.message.clone().unwrap_or_default();
    let blocks = facts.blocks_namespaces.clone();
    // Re-argued from the snapshot: only the collector's lookup of the
    // Service proves the backend gone, never the condition alone.
    if let Backend::Unproven(_) | Backend::Serving(_) =
        crate::doctor::apiservice::backend(api, available, &snapshot.api_service_backends)
    {
        return refuse(
            i,
            format!(
                "the backend of APIService {name} is not proven gone by a lookup of its Service ({reason}: {message}); nothing is deleted"
            ),
        );
    }
    if !BACKEND_GONE_REASONS.contains(&reason.as_str()) {
        return refuse(
            i,
            format!(
                "APIService {name} is {} ({reason}: {message}): the aggregator could not check its backend, which does not prove the backend gone; fix that first",
                available.status
            ),
        );
    }
    if blocks.is_empty() && reason != "ServiceNotFound" {
        return refuse(
            i,
            format!(
                "APIService {name} is unavailable ({reason}: {message}) but its Service still exists and it blocks no Terminating namespace: restore the backend (e.g. scale it up) rather than delete the registration"
            ),
        );
    }
    let (Some(uid), Some(rv)) = preconditions(api) else {
        return refuse(
            i,
            format!(
                "APIService {name} has no uid/resourceVersion in the snapshot; a delete could not be preconditioned"
            ),
        );
    };
    let rationale = format!(
        "APIService {name} is unavailable ({reason}: {message}){}; restoring its backend is the gentler fix when the extension is meant to stay, otherwise the registration is deleted after saving its manifest so it can be re-applied (check consumers such as HPAs of this group first)",
        if blocks.is_empty() {
            "; its backing Service is gone".to_owned()
        } else {
            format!(" and blocks deletion of namespace(s) {}", blocks.join(", "))
        }
    );
    PlannedStep {
        finding_index: i,
        action: Action::DeleteApiService(DeleteApiService {
            name: name.clone(),
            uid,
            resource_version: rv,
            reason: format!("{reason}: {message}"),
        }),
        rationale,
        force_level: FORCE_DELETE_REGISTRATION,
    }
}
