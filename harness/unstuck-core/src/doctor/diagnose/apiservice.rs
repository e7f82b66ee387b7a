//! APIService findings: an APIService that has been unavailable past the
//! threshold, dead when its backend is proven gone, and the namespaces whose
//! discovery it blocks.

use std::collections::BTreeSet;

use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::{
    APIService, APIServiceCondition, ServiceReference,
};

use super::Diagnosis;
use super::namespace::DiscoveryBlocked;
use crate::doctor::apiservice::Backend;
use crate::doctor::conditions::{
    NS_DISCOVERY_FAILURE, api_service_available, quote_api_service_condition,
};
use crate::doctor::model::{
    ApiServiceFacts, Finding, FindingDetail, FindingKind, ObjectRef, Outage,
};
use crate::doctor::owner::fmt_secs;

impl<'a> Diagnosis<'a> {
    /// DeadApiService findings; returns the names of the dead APIServices.
    pub(super) fn dead_api_services(
        &self,
        blocked: &[DiscoveryBlocked<'_>],
        findings: &mut Vec<Finding>,
    ) -> BTreeSet<String> {
        let mut dead = BTreeSet::new();
        for api in &self.snapshot.api_services {
            let Some((name, service, available)) = self.long_unavailable(api) else {
                continue;
            };
            let Some(finding) = self.api_service_finding(api, name, service, available, blocked)
            else {
                continue;
            };
            if finding.kind() == FindingKind::DeadApiService {
                dead.insert(name.to_owned());
            }
            findings.push(finding);
        }
        dead
    }

    /// The APIService's name, Service and Available condition when it is
    /// served by a Service and has been unavailable past the threshold.
    fn long_unavailable<'s>(
        &self,
        api: &'s APIService,
    ) -> Option<(&'s str, &'s ServiceReference, &'s APIServiceCondition)> {
        let name = api.metadata.name.as_deref()?;
        // Local APIServices (no spec.service) are served by the
        // apiserver itself: never dead.
        let service = api.spec.as_ref().and_then(|s| s.service.as_ref())?;
        let available = api_service_available(api)?;
        if available.status == "True" {
            return None;
        }
        // Unavailable only briefly (a backend starting up) is not dead.
        if let Some(t) = &available.last_transition_time
            && self.snapshot.age_of(t.0) <= self.threshold
        {
            return None;
        }
        Some((name, service, available))
    }

    /// The finding for a long-unavailable APIService: DeadApiService when
    /// its backend is proven gone, ApiServiceUnavailable when that is not
    /// proven or the backend is there and fails the calls; `None` when the
    /// backend is there and its condition does not say why it fails.
    fn api_service_finding(
        &self,
        api: &APIService,
        name: &str,
        service: &ServiceReference,
        available: &APIServiceCondition,
        blocked: &[DiscoveryBlocked<'_>],
    ) -> Option<Finding> {
        let reason = available.reason.clone().unwrap_or_default();
        let message = available.message.clone().unwrap_or_default();
        let service_ns = service.namespace.as_deref().unwrap_or_default();
        let service_name = service.name.as_deref().unwrap_or_default();
        let gv = api_service_group_version(api, name);

        let mut evidence = vec![
            quote_api_service_condition(name, available),
            format!("spec.service {service_ns}/{service_name} serves {gv}"),
        ];
        evidence.extend(self.unavailable_lines(available, service_ns, &gv));
        let blocks = blocked_namespaces(blocked, &gv, &mut evidence);
        let kind = self.backend_kind(api, available, &message, &mut evidence)?;
        let outage = (kind == FindingKind::ApiServiceUnavailable)
            .then(|| self.outage(name, service_ns, service_name, available, &mut evidence))
            .flatten();
        let facts = ApiServiceFacts {
            reason: reason.clone(),
            message: message.clone(),
            status: available.status.clone(),
            service: format!("{service_ns}/{service_name}"),
            group_version: gv,
            resource_version: api.metadata.resource_version.clone(),
            blocks_namespaces: blocks.clone(),
            outage,
        };
        Some(Finding {
            subject: ObjectRef {
                api_version: "apiregistration.k8s.io/v1".into(),
                kind: "APIService".into(),
                namespace: None,
                name: name.to_owned(),
                uid: api.metadata.uid.clone(),
            },
            summary: format!(
                "APIService {name} is unavailable ({reason}): {message}{}",
                if blocks.is_empty() {
                    String::new()
                } else {
                    format!("; it blocks deletion of namespace(s) {}", blocks.join(", "))
                }
            ),
            evidence,
            detail: if kind == FindingKind::DeadApiService {
                FindingDetail::DeadApiService(facts)
            } else {
                FindingDetail::ApiServiceUnavailable(facts)
            },
        })
    }

    /// What the backend's state makes of the unavailable APIService, with
    /// the evidence for it; `None` for a serving backend whose failure
    /// `message` does not classify as a call that reached it.
    fn backend_kind(
        &self,
        api: &APIService,
        available: &APIServiceCondition,
        message: &str,
        evidence: &mut Vec<String>,
    ) -> Option<FindingKind> {
        Some(
            match crate::doctor::apiservice::backend(
                api,
                available,
                &self.snapshot.api_service_backends,
            ) {
                Backend::Serving(why) => {
                    // Ready endpoints and a failing condition: a backend
                    // that is there but fails the aggregator's calls.
                    let call = crate::doctor::backend::classify(message).filter(|c| {
                        c.verdict != crate::doctor::backend::CallVerdict::Unreachable
                    })?;
                    evidence.extend(why);
                    evidence.push(call.line());
                    let name = api.metadata.name.as_deref().unwrap_or_default();
                    evidence.extend(
                        self.snapshot
                            .api_service_probes
                            .iter()
                            .filter(|p| p.api_service == name)
                            .map(|p| p.line()),
                    );
                    evidence.push(format!(
                        "not deleted: that is for a backend proven gone; {}",
                        call.advice()
                    ));
                    FindingKind::ApiServiceUnavailable
                }
                Backend::Gone(why) => {
                    evidence.extend(why);
                    FindingKind::DeadApiService
                }
                Backend::Unproven(why) => {
                    evidence.extend(why);
                    FindingKind::ApiServiceUnavailable
                }
            },
        )
    }

    /// The outage of a backend that is installed but not serving: its
    /// Service there, no ready endpoint, a pod's cause named. `None`
    /// (nothing offered) when any of that is not shown.
    fn outage(
        &self,
        name: &str,
        service_ns: &str,
        service_name: &str,
        available: &APIServiceCondition,
        evidence: &mut Vec<String>,
    ) -> Option<Outage> {
        let since = available.last_transition_time.as_ref()?.0;
        let lookup = self
            .snapshot
            .api_service_backends
            .iter()
            .find(|l| l.service.namespace == service_ns && l.service.name == service_name);
        let cause = crate::doctor::backend::not_serving_cause(lookup)?;
        let lasted = self.snapshot.age_of(since);
        let outage = Outage {
            since: since.to_string(),
            lasted_secs: lasted.as_secs(),
            bound_secs: self.outage_after.as_secs(),
            cause,
            removal_allowed: self.allow_apiservice_removal.iter().any(|n| n == name),
        };
        evidence.push(format!(
            "not serving for {} (since {}, by the API server's clock; the bound --apiservice-outage-after is {}){}",
            fmt_secs(outage.lasted_secs),
            outage.since,
            fmt_secs(outage.bound_secs),
            if outage.removal_allowed {
                "; its removal is allowed by --allow-apiservice-removal"
            } else {
                ""
            }
        ));
        Some(outage)
    }

    /// How long the APIService has been unavailable, and what else says
    /// its backend is not answering.
    fn unavailable_lines(
        &self,
        available: &APIServiceCondition,
        service_ns: &str,
        gv: &str,
    ) -> Vec<String> {
        let mut evidence = Vec::new();
        match &available.last_transition_time {
            Some(t) => evidence.push(format!(
                "unavailable since {} ({} before the snapshot)",
                t.0,
                fmt_secs(self.snapshot.age_of(t.0).as_secs())
            )),
            None => evidence.push("the Available condition has no lastTransitionTime".into()),
        }
        if let Some(ns) = self.snapshot.namespace(service_ns)
            && ns.metadata.deletion_timestamp.is_some()
        {
            evidence.push(format!(
                "the backing service's namespace {service_ns} is itself Terminating: it cannot finish while this APIService fails discovery (self-deadlock)"
            ));
        }
        for f in self
            .snapshot
            .discovery_failures
            .iter()
            .filter(|f| f.group_version == gv)
        {
            evidence.push(format!(
                "the collector's discovery of {gv} failed too: {}",
                f.message
            ));
        }
        evidence
    }
}

fn api_service_group_version(api: &APIService, name: &str) -> String {
    let spec = api.spec.as_ref();
    match (
        spec.and_then(|s| s.group.as_deref()),
        spec.and_then(|s| s.version.as_deref()),
    ) {
        (Some(g), Some(v)) if !g.is_empty() => format!("{g}/{v}"),
        (_, Some(v)) => v.to_owned(),
        // `v1beta1.metrics.k8s.io` -> `metrics.k8s.io/v1beta1`.
        _ => match name.split_once('.') {
            Some((v, g)) if !g.is_empty() => format!("{g}/{v}"),
            Some((v, _)) => v.to_owned(),
            None => name.to_owned(),
        },
    }
}

/// The Terminating namespaces whose discovery failure names `gv`, sorted,
/// with one evidence line each (or one saying none does yet).
fn blocked_namespaces(
    blocked: &[DiscoveryBlocked<'_>],
    gv: &str,
    evidence: &mut Vec<String>,
) -> Vec<String> {
    let mut blocks: Vec<String> = blocked
        .iter()
        .filter(|b| b.group_versions.iter().any(|g| g == gv))
        .map(|b| b.namespace.to_owned())
        .collect();
    blocks.sort();
    for ns in &blocks {
        evidence.push(format!(
            "blocks deletion of namespace {ns}: its {NS_DISCOVERY_FAILURE} condition names {gv}"
        ));
    }
    if blocks.is_empty() {
        evidence.push(
            "no Terminating namespace names it yet, but every namespace deletion and the garbage collector need complete discovery".into(),
        );
    }
    blocks
}
