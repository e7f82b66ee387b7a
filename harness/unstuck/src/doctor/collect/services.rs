//! Service lookups: the admission webhooks and the Services they call,
//! and what backs a Service (its EndpointSlices, the pods it selects).

use std::collections::BTreeSet;

use futures::{StreamExt, stream};
use k8s_openapi::{
    api::{
        admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration},
        core::v1::{Pod, Service},
        discovery::v1::EndpointSlice,
    },
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    jiff::Timestamp,
    kube_aggregator::pkg::apis::apiregistration::v1::APIService,
};
use kube::{Api, Client, api::ListParams};
use unstuck_core::doctor::{
    DiscoveryFailure, ServiceKey, ServiceLookup, backend,
    conversion::services_called as conversion_services_called, webhook::services_called,
};

use super::{BlindSpot, CONCURRENCY};
use crate::doctor::pages::list_all;

/// The admission webhooks and what backs them.
#[derive(Default)]
pub(super) struct Webhooks {
    pub validating: Vec<ValidatingWebhookConfiguration>,
    pub mutating: Vec<MutatingWebhookConfiguration>,
    pub services: Vec<ServiceLookup>,
}

/// Both kinds of webhook configuration, then a lookup of every Service
/// they call (GET the Service, count ready endpoints over its
/// EndpointSlices), in parallel. A failed list is recorded, not fatal:
/// without it no webhook is judged dead.
pub(super) async fn collect_webhooks(client: &Client) -> Result<Webhooks, DiscoveryFailure> {
    let (v_api, m_api) = (
        Api::<ValidatingWebhookConfiguration>::all(client.clone()),
        Api::<MutatingWebhookConfiguration>::all(client.clone()),
    );
    let (validating, mutating) = tokio::join!(list_all(v_api), list_all(m_api));
    let failed = |resource: &str, e: kube::Error| DiscoveryFailure {
        group_version: "admissionregistration.k8s.io/v1".into(),
        message: format!("list {resource}: {}", crate::kube_error::text(&e)),
    };
    let validating = validating.map_err(|e| failed("validatingwebhookconfigurations", e))?;
    let mutating = mutating.map_err(|e| failed("mutatingwebhookconfigurations", e))?;
    let mut services = stream::iter(services_called(&validating, &mutating))
        .map(|key| look_up_service(client, key))
        .buffer_unordered(CONCURRENCY)
        .collect::<Vec<_>>()
        .await;
    services.sort_by(|a, b| a.service.cmp(&b.service));
    Ok(Webhooks {
        validating,
        mutating,
        services,
    })
}

/// What backs the webhooks, the conversion webhooks and the APIServices:
/// a failed webhook list is a blind spot (no webhook is judged dead
/// without it), the conversion webhooks' Services are looked up beside
/// the admission webhooks' ones, then every APIService's Service; a
/// Service or its pods that could not be read is a blind spot too.
pub(super) async fn backends(
    client: &Client,
    webhooks: Result<Webhooks, DiscoveryFailure>,
    conversion_webhook_crds: &[CustomResourceDefinition],
    api_services: &[APIService],
    blind_spots: &mut Vec<BlindSpot>,
    failures: &mut Vec<DiscoveryFailure>,
) -> (Webhooks, Vec<ServiceLookup>) {
    let mut webhooks = webhooks.unwrap_or_else(|failure| {
        blind_spots.push(BlindSpot {
            what: "webhook configurations (admissionregistration.k8s.io/v1)".into(),
            why: failure.message.clone(),
        });
        failures.push(failure);
        Webhooks::default()
    });
    let conversion_services =
        look_up_conversion_services(client, conversion_webhook_crds, &webhooks.services).await;
    webhooks.services.extend(conversion_services);
    webhooks.services.sort_by(|a, b| a.service.cmp(&b.service));
    let api_service_backends = stream::iter(
        api_services
            .iter()
            .filter_map(unstuck_core::doctor::apiservice::service_key)
            .collect::<BTreeSet<_>>(),
    )
    .map(|key| Box::pin(look_up_service(client, key)))
    .buffer_unordered(CONCURRENCY)
    .collect::<Vec<_>>()
    .await;
    let mut api_service_backends = api_service_backends;
    api_service_backends.sort_by(|a, b| a.service.cmp(&b.service));
    for l in webhooks.services.iter().chain(&api_service_backends) {
        if let Some(e) = &l.error {
            blind_spots.push(BlindSpot {
                what: format!("Service {} and its EndpointSlices", l.service),
                why: e.clone(),
            });
        }
        if let Some(e) = &l.pods_error {
            blind_spots.push(BlindSpot {
                what: format!("the pods Service {} selects", l.service),
                why: e.clone(),
            });
        }
    }
    (webhooks, api_service_backends)
}

/// GET the Service and record what it is (type, externalName, selector),
/// then count its EndpointSlices' endpoints. For a Service that selects
/// pods and has no ready endpoint, the pods its selector matches are read
/// too and, unless one is coming back, the slices again
/// [`backend::SUSTAINED`] later: "no ready endpoint" counts as proof
/// ([`backend::judge`]) only when sustained, with both reads recorded.
async fn look_up_service(client: &Client, key: ServiceKey) -> ServiceLookup {
    let svc: Api<Service> = Api::namespaced(client.clone(), &key.namespace);
    let mut lookup = ServiceLookup {
        service: key,
        ..ServiceLookup::default()
    };
    let spec = match svc.get_opt(&lookup.service.name).await {
        Ok(None) => return lookup,
        Ok(Some(s)) => s.spec.unwrap_or_default(),
        Err(e) => {
            lookup.error = Some(LookupError::Service(e).to_string());
            return lookup;
        }
    };
    lookup.exists = true;
    lookup.service_type = Some(spec.type_.unwrap_or_else(|| "ClusterIP".into()));
    lookup.external_name = spec.external_name;
    let selector: Vec<String> = spec
        .selector
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    lookup.has_selector = Some(!selector.is_empty());
    if !selector.is_empty() {
        lookup.selector = Some(selector.join(","));
    }
    if let Err(e) = read_slices(client, &mut lookup).await {
        lookup.error = Some(e.to_string());
        return lookup;
    }
    let selects_pods =
        lookup.has_selector == Some(true) && lookup.service_type.as_deref() != Some("ExternalName");
    if !selects_pods || lookup.ready_endpoints != Some(0) {
        return lookup;
    }
    read_backend_pods(client, &mut lookup).await;
    let now = Timestamp::now();
    let coming_back = lookup
        .pods
        .iter()
        .flatten()
        .any(|p| p.coming_back(now).is_some());
    if lookup.pods_error.is_none() && !coming_back {
        tokio::time::sleep(backend::SUSTAINED).await;
        if let Err(e) = read_slices(client, &mut lookup).await {
            lookup.error = Some(e.to_string());
            return lookup;
        }
        // Pods made since the first read would show up now.
        read_backend_pods(client, &mut lookup).await;
    }
    lookup
}

/// A read of what backs a Service that failed. The snapshot records its
/// text ([`ServiceLookup::error`]), so a saved snapshot says why.
#[derive(Debug, thiserror::Error)]
enum LookupError {
    #[error("{}", crate::kube_error::text(.0))]
    Service(#[source] kube::Error),
    #[error("listing its EndpointSlices: {}", crate::kube_error::text(.0))]
    Slices(#[source] kube::Error),
}

/// One read of the Service's EndpointSlices, appended to `lookup.reads`.
async fn read_slices(client: &Client, lookup: &mut ServiceLookup) -> Result<(), LookupError> {
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), &lookup.service.namespace);
    let lp = ListParams::default().labels(&format!(
        "kubernetes.io/service-name={}",
        lookup.service.name
    ));
    let list = slices.list(&lp).await.map_err(LookupError::Slices)?;
    // An endpoint whose `ready` is unset counts as ready (the API's rule).
    let endpoints = || list.items.iter().flat_map(|s| &s.endpoints);
    let is_ready = |e: &&k8s_openapi::api::discovery::v1::Endpoint| {
        e.conditions.as_ref().and_then(|c| c.ready) != Some(false)
    };
    let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    let read = backend::EndpointRead {
        at: Timestamp::now(),
        slices: count(list.items.len()),
        ready: count(endpoints().filter(is_ready).count()),
        not_ready: count(endpoints().filter(|e| !is_ready(e)).count()),
    };
    lookup.ready_endpoints = Some(read.ready);
    lookup.reads.push(read);
    Ok(())
}

/// The pods the Service's selector matches, in its namespace.
async fn read_backend_pods(client: &Client, lookup: &mut ServiceLookup) {
    let Some(selector) = lookup.selector.clone() else {
        return;
    };
    let pods: Api<Pod> = Api::namespaced(client.clone(), &lookup.service.namespace);
    match pods.list(&ListParams::default().labels(&selector)).await {
        Ok(list) => {
            lookup.pods = Some(
                list.items
                    .iter()
                    .map(backend::BackendPod::from_pod)
                    .collect(),
            );
            lookup.pods_error = None;
        }
        Err(e) => {
            lookup.pods = None;
            lookup.pods_error = Some(crate::kube_error::text(&e));
        }
    }
}

/// Lookups of the Services these CRDs' webhooks call that `known` does
/// not hold yet (an admission webhook may call the same Service).
async fn look_up_conversion_services(
    client: &Client,
    crds: &[CustomResourceDefinition],
    known: &[ServiceLookup],
) -> Vec<ServiceLookup> {
    let mut out = Vec::new();
    for key in conversion_services_called(crds)
        .into_iter()
        .filter(|k| !known.iter().any(|l| l.service == *k))
    {
        out.push(look_up_service(client, key).await);
    }
    out
}
