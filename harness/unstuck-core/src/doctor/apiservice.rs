//! Whether an unavailable APIService's backend is proven gone.
//!
//! The aggregator's `Available=False` alone is not proof: its
//! `FailedDiscoveryCheck` can mean a live backend it failed to reach once
//! (a network blip, a slow TLS handshake), and even `ServiceNotFound` is
//! what the aggregator read through its own informers at some moment.
//! Deleting the APIService of a live backend takes an API away from every
//! client of the cluster. So the APIService is judged dead only on the
//! collector's own lookup of its Service ([`super::backend::judge`]:
//! missing, or no ready endpoint sustained while nothing restarts). A
//! lookup that finds ready endpoints overrules any failing condition; a
//! lookup that failed, or none at all, leaves it unproven whatever the
//! aggregator's reason.

use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::{
    APIService, APIServiceCondition,
};

use super::backend::{BackendState, judge};
use super::model::{ServiceKey, ServiceLookup};

/// The aggregator's reasons that say the Service itself is gone or empty
/// (kube-aggregator `available_controller.go`, v1.34). Quoted as context;
/// never proof on their own.
pub const BACKEND_GONE_REASONS: [&str; 2] = ["ServiceNotFound", "MissingEndpoints"];

/// What is known about an unavailable APIService's backend.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Backend {
    /// Proven gone: the evidence says how.
    Gone(Vec<String>),
    /// Ready endpoints were found: the condition is overruled.
    Serving(Vec<String>),
    /// Neither: report it, change nothing.
    Unproven(Vec<String>),
}

/// The Service an APIService is served by (`spec.service`), if any.
pub fn service_key(api: &APIService) -> Option<ServiceKey> {
    let s = api.spec.as_ref()?.service.as_ref()?;
    Some(ServiceKey {
        namespace: s.namespace.clone()?,
        name: s.name.clone()?,
    })
}

/// Judges the backend of `api` from the lookups the collector made and its
/// `Available` condition.
pub fn backend(
    api: &APIService,
    available: &APIServiceCondition,
    lookups: &[ServiceLookup],
) -> Backend {
    let reason = available.reason.as_deref().unwrap_or("");
    let key = service_key(api);
    let lookup = key
        .as_ref()
        .and_then(|k| lookups.iter().find(|l| &l.service == k));
    let j = judge(lookup);
    let mut evidence: Vec<String> = j
        .evidence
        .into_iter()
        .map(|e| format!("the collector's lookup: {e}"))
        .collect();
    match j.state {
        BackendState::Gone(_) => Backend::Gone(evidence),
        BackendState::Serving => {
            evidence.push("ready endpoints overrule the condition".into());
            Backend::Serving(evidence)
        }
        BackendState::Unknown => {
            evidence.push(if BACKEND_GONE_REASONS.contains(&reason) {
                format!(
                    "the aggregator's reason {reason} alone is not proof (it is what the aggregator last read, not a lookup of the Service); nothing is changed"
                )
            } else {
                format!(
                    "reason {reason} alone does not prove the backend gone (it can be a live backend the aggregator failed to reach); nothing is changed"
                )
            });
            Backend::Unproven(evidence)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::model::EndpointRead;

    fn api(reason: &str) -> (APIService, APIServiceCondition) {
        let api: APIService = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "v1beta1.metrics.k8s.io"},
            "spec": {"group": "metrics.k8s.io", "version": "v1beta1",
                     "service": {"namespace": "monitoring", "name": "adapter"},
                     "groupPriorityMinimum": 100, "versionPriority": 100},
            "status": {"conditions": [{"type": "Available", "status": "False", "reason": reason,
                "message": "failing or missing response"}]}
        }))
        .expect("valid APIService");
        let c = api.status.as_ref().unwrap().conditions.as_ref().unwrap()[0].clone();
        (api, c)
    }

    fn lookup(exists: bool, ready: Option<u32>, error: Option<&str>) -> ServiceLookup {
        ServiceLookup {
            service: ServiceKey {
                namespace: "monitoring".into(),
                name: "adapter".into(),
            },
            exists,
            ready_endpoints: ready,
            error: error.map(str::to_owned),
            ..Default::default()
        }
    }

    /// A Service with a selector, no pod, and no ready endpoint at two
    /// reads six seconds apart.
    fn sustained_empty() -> ServiceLookup {
        let read = |at: &str| EndpointRead {
            at: at.parse().unwrap(),
            slices: 1,
            ready: 0,
            not_ready: 0,
        };
        ServiceLookup {
            service_type: Some("ClusterIP".into()),
            has_selector: Some(true),
            selector: Some("app=adapter".into()),
            reads: vec![read("2026-11-25T10:00:00Z"), read("2026-11-25T10:00:06Z")],
            pods: Some(vec![]),
            ..lookup(true, Some(0), None)
        }
    }

    #[test]
    fn missing_service_or_no_ready_endpoint_sustained_is_gone() {
        let (a, c) = api("FailedDiscoveryCheck");
        assert!(matches!(
            backend(&a, &c, &[lookup(false, None, None)]),
            Backend::Gone(_)
        ));
        assert!(matches!(
            backend(&a, &c, &[sustained_empty()]),
            Backend::Gone(_)
        ));
        // One read of no ready endpoint is not yet proof.
        assert!(matches!(
            backend(&a, &c, &[lookup(true, Some(0), None)]),
            Backend::Unproven(_)
        ));
    }

    #[test]
    fn an_external_name_service_is_unproven_whatever_the_reason() {
        let (a, c) = api("MissingEndpoints");
        let external = ServiceLookup {
            service_type: Some("ExternalName".into()),
            external_name: Some("adapter.example.net".into()),
            has_selector: Some(false),
            ..lookup(true, Some(0), None)
        };
        let Backend::Unproven(why) = backend(&a, &c, &[external]) else {
            panic!("an ExternalName backend judged")
        };
        assert!(
            why.iter().any(|e| e.contains("adapter.example.net")),
            "{why:?}"
        );
        assert!(
            why.iter()
                .any(|e| e.contains("MissingEndpoints alone is not proof")),
            "{why:?}"
        );
    }

    #[test]
    fn ready_endpoints_overrule_any_reason() {
        let (a, c) = api("ServiceNotFound");
        assert!(matches!(
            backend(&a, &c, &[lookup(true, Some(2), None)]),
            Backend::Serving(_)
        ));
    }

    #[test]
    fn without_a_lookup_no_reason_counts() {
        for r in BACKEND_GONE_REASONS.iter().chain(&["FailedDiscoveryCheck"]) {
            let (a, c) = api(r);
            assert!(matches!(backend(&a, &c, &[]), Backend::Unproven(_)), "{r}");
            // A lookup refused or timed out is no lookup.
            for e in ["403 Forbidden", "timed out"] {
                let failed = lookup(false, None, Some(e));
                let Backend::Unproven(why) = backend(&a, &c, &[failed]) else {
                    panic!("{r} with a failed lookup ({e}) judged")
                };
                assert!(why.iter().any(|w| w.contains(e)), "{why:?}");
            }
        }
    }
}
