//! Whether an unavailable APIService's backend is proven gone.
//!
//! The aggregator's `Available=False` alone is not proof: its
//! `FailedDiscoveryCheck` can mean a live backend it failed to reach once
//! (a network blip, a slow TLS handshake). Deleting the APIService of a
//! live backend takes an API away from every client of the cluster. So the
//! APIService is judged dead only on the collector's own lookup of its
//! Service (missing, or no ready endpoint over its EndpointSlices), or,
//! when no lookup could be made, on the aggregator's two reasons that name
//! the Service itself (`ServiceNotFound`, `MissingEndpoints`). A lookup
//! that finds ready endpoints overrules any failing condition.

use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::{
    APIService, APIServiceCondition,
};

use super::webhook::{ServiceKey, ServiceLookup};

/// The aggregator's reasons that say the Service itself is gone or empty
/// (kube-aggregator `available_controller.go`, v1.34).
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
    match lookup {
        Some(l) if l.error.is_none() && !l.exists => Backend::Gone(vec![format!(
            "the collector's lookup: Service {} does not exist",
            l.service
        )]),
        Some(l) if l.exists && l.ready_endpoints == Some(0) => Backend::Gone(vec![format!(
            "the collector's lookup: Service {} exists but has no ready endpoint in its EndpointSlices",
            l.service
        )]),
        Some(l) if l.exists && l.ready_endpoints.is_some_and(|n| n > 0) => {
            Backend::Serving(vec![format!(
                "the collector's lookup: Service {} has {} ready endpoint(s), which overrules the condition",
                l.service,
                l.ready_endpoints.unwrap_or_default()
            )])
        }
        other => {
            let why = match other.and_then(|l| l.error.as_deref()) {
                Some(e) => format!("the collector could not look up its Service: {e}"),
                None => "the collector made no lookup of its Service".to_string(),
            };
            if BACKEND_GONE_REASONS.contains(&reason) {
                Backend::Gone(vec![
                    why,
                    format!("the aggregator's reason {reason} names the Service itself"),
                ])
            } else {
                Backend::Unproven(vec![
                    why,
                    format!(
                        "reason {reason} alone does not prove the backend gone (it can be a live backend the aggregator failed to reach); nothing is changed"
                    ),
                ])
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        }
    }

    #[test]
    fn missing_service_or_no_ready_endpoint_is_gone() {
        let (a, c) = api("FailedDiscoveryCheck");
        assert!(matches!(
            backend(&a, &c, &[lookup(false, None, None)]),
            Backend::Gone(_)
        ));
        assert!(matches!(
            backend(&a, &c, &[lookup(true, Some(0), None)]),
            Backend::Gone(_)
        ));
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
    fn without_a_lookup_only_the_service_reasons_count() {
        for r in BACKEND_GONE_REASONS {
            let (a, c) = api(r);
            assert!(matches!(backend(&a, &c, &[]), Backend::Gone(_)), "{r}");
        }
        let (a, c) = api("FailedDiscoveryCheck");
        assert!(matches!(backend(&a, &c, &[]), Backend::Unproven(_)));
        let forbidden = lookup(false, None, Some("403 Forbidden"));
        assert!(matches!(
            backend(&a, &c, &[forbidden]),
            Backend::Unproven(_)
        ));
    }
}
