//! Collect: one [`Snapshot`] of a live cluster, read from the outside as a
//! person's kubectl would, only faster: discovery of every group/version in
//! parallel, then metadata-only LISTs of every listable type in parallel.
//! A group/version that cannot be discovered or listed is recorded in the
//! snapshot (partial discovery is data, not an abort); a list refused or
//! timed out is also a blind spot the report names first. Lists are paged
//! ([`super::pages`]); with a namespace scope, namespaced types are listed
//! only in those namespaces.

use std::{
    collections::BTreeSet,
    time::{Duration, Instant},
};

pub use super::pages::PAGE;
use super::pages::{Kept, is_blind, keep, list_all, list_kept};
use super::versions::one_per_object;
use futures::{StreamExt, stream};
use k8s_openapi::{
    api::{
        admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration},
        coordination::v1::Lease,
        core::v1::{Event, Namespace, Node, PersistentVolume, Pod, Service},
        discovery::v1::EndpointSlice,
    },
    apimachinery::pkg::apis::meta::v1::APIResource,
    jiff::Timestamp,
    kube_aggregator::pkg::apis::apiregistration::v1::APIService,
};
use kube::{
    Api, Client,
    api::{ApiResource, ListParams},
    core::PartialObjectMeta,
};
use unstuck_core::doctor::{
    DiscoveryFailure, ObjectRecord, ServiceKey, ServiceLookup, Snapshot, backend,
    snapshot::Unreadable, webhook::services_called,
};

/// How many requests collect keeps in flight at once.
const CONCURRENCY: usize = 16;

/// One listable resource type found by discovery.
#[derive(Clone, Debug)]
pub struct ListableType {
    pub api_version: String,
    pub kind: String,
    pub resource: String,
    pub namespaced: bool,
}

impl ListableType {
    pub fn api_resource(&self) -> ApiResource {
        api_resource(&self.api_version, &self.kind, &self.resource)
    }
}

/// The dynamic-API description of a type known by apiVersion, kind and
/// plural resource name (`v1` is the core group).
pub fn api_resource(api_version: &str, kind: &str, plural: &str) -> ApiResource {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    ApiResource {
        group: group.to_string(),
        version: version.to_string(),
        api_version: api_version.to_string(),
        kind: kind.to_string(),
        plural: plural.to_string(),
    }
}

/// Discovery result: the types, and the group/versions that failed.
pub struct Discovered {
    pub types: Vec<ListableType>,
    pub failures: Vec<DiscoveryFailure>,
    /// Each group's preferred group/version (core `v1` included): the
    /// version an object served in several is recorded under.
    pub preferred: BTreeSet<String>,
}

/// Discovers every listable type, preferring nothing: every served
/// version of every group is asked, because a dead aggregated API is
/// exactly one such version. Each group's preferred version is noted,
/// for the object served in several ([`super::versions`]).
pub async fn discover(client: &Client) -> Result<Discovered, kube::Error> {
    let mut versions: Vec<String> = client.list_core_api_versions().await?.versions;
    let mut preferred: BTreeSet<String> = versions.first().cloned().into_iter().collect();
    for g in client.list_api_groups().await?.groups {
        preferred.extend(g.preferred_version.map(|v| v.group_version));
        versions.extend(g.versions.into_iter().map(|v| v.group_version));
    }
    let results: Vec<(String, Result<Vec<APIResource>, kube::Error>)> = stream::iter(versions)
        .map(|gv| {
            let client = client.clone();
            async move {
                let r = if gv.contains('/') {
                    client.list_api_group_resources(&gv).await
                } else {
                    client.list_core_api_resources(&gv).await
                };
                (gv, r.map(|l| l.resources))
            }
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    let mut out = Discovered {
        types: Vec::new(),
        failures: Vec::new(),
        preferred,
    };
    for (gv, r) in results {
        match r {
            Ok(resources) => out.types.extend(
                resources
                    .into_iter()
                    .filter(|r| !r.name.contains('/') && r.verbs.iter().any(|v| v == "list"))
                    .map(|r| ListableType {
                        api_version: gv.clone(),
                        kind: r.kind,
                        resource: r.name,
                        namespaced: r.namespaced,
                    }),
            ),
            Err(e) => out.failures.push(DiscoveryFailure {
                group_version: gv,
                message: crate::kube_error::text(&e),
            }),
        }
    }
    out.types
        .sort_by(|a, b| (&a.api_version, &a.resource).cmp(&(&b.api_version, &b.resource)));
    out.failures
        .sort_by(|a, b| a.group_version.cmp(&b.group_version));
    Ok(out)
}

/// What a collection cost, for reports and the benchmark.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct CollectStats {
    pub types_listed: usize,
    pub objects_seen: usize,
    pub duration: Duration,
    /// What could not be read (a 403, a timeout): the report lists these
    /// first, since every conclusion is drawn without them.
    pub blind_spots: Vec<BlindSpot>,
}

/// One list the collector could not read.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct BlindSpot {
    /// e.g. `events (v1), all namespaces`.
    pub what: String,
    /// The server's or the client's words.
    pub why: String,
}

/// Where the collector looks.
#[derive(Clone, Debug, Default)]
pub enum CollectScope {
    /// Every namespace and every cluster-scoped type.
    #[default]
    Cluster,
    /// Namespaced types only in these namespaces. Cluster-scoped types are
    /// not listed, except the kinds that can block a namespace (APIServices,
    /// webhook configurations, CRDs converting through a webhook) and the
    /// liveness sources (leases, pods,
    /// events, read cluster-wide: an operator lives in a namespace of its own).
    Namespaces(Vec<String>),
}

#[derive(Debug, thiserror::Error)]
pub enum CollectError {
    #[error("discovery failed entirely (is the API server reachable?): {0}")]
    Discovery(#[source] kube::Error),
}

/// A resource as kubectl spells it: `pods`, `leases.coordination.k8s.io`.
fn kubectl_resource(plural: &str, group_version: &str) -> String {
    match group_version.split_once('/') {
        Some((group, _)) => format!("{plural}.{group}"),
        None => plural.to_owned(),
    }
}

/// Where a failed typed list is recorded.
struct Unread<'a> {
    blind_spots: &'a mut Vec<BlindSpot>,
    unreadable: &'a mut Vec<Unreadable>,
    failures: &'a mut Vec<DiscoveryFailure>,
}

impl Unread<'_> {
    fn read<K>(&mut self, resource: &str, gv: &str, r: Result<Vec<K>, kube::Error>) -> Vec<K> {
        r.unwrap_or_else(|e| {
            self.blind_spots.push(BlindSpot {
                what: format!("{resource} ({gv}), all namespaces"),
                why: crate::kube_error::text(&e),
            });
            self.unreadable.push(Unreadable {
                resource: kubectl_resource(resource, gv),
                message: crate::kube_error::text(&e),
            });
            self.failures.push(DiscoveryFailure {
                group_version: gv.to_string(),
                message: format!("list {resource}: {}", crate::kube_error::text(&e)),
            });
            Vec::new()
        })
    }
}

/// Reads the whole cluster into a [`Snapshot`].
pub async fn collect(client: &Client) -> Result<(Snapshot, CollectStats), CollectError> {
    collect_in(client, &CollectScope::Cluster).await
}

/// Reads the cluster, as far as `scope` reaches, into a [`Snapshot`].
/// Nothing but a failed discovery aborts: a list that cannot be read is a
/// blind spot, recorded in the stats and in [`Snapshot::unreadable`].
pub async fn collect_in(
    client: &Client,
    scope: &CollectScope,
) -> Result<(Snapshot, CollectStats), CollectError> {
    // Boxed: the reads below run together, and their joined future is too
    // large for a tokio worker's stack in debug builds.
    Box::pin(collect_boxed(client, scope)).await
}

async fn collect_boxed(
    client: &Client,
    scope: &CollectScope,
) -> Result<(Snapshot, CollectStats), CollectError> {
    let start = Instant::now();
    let taken_at = Timestamp::now();
    let discovered = Box::pin(discover(client))
        .await
        .map_err(CollectError::Discovery)?;
    let mut failures = discovered.failures;
    let mut blind_spots = Vec::new();
    let mut unreadable = Vec::new();

    let (namespaces, api_services, pods, leases, events, pvs, webhooks, nodes, crds) = tokio::join!(
        Box::pin(list_all(Api::<Namespace>::all(client.clone()))),
        Box::pin(list_all(Api::<APIService>::all(client.clone()))),
        Box::pin(list_all(Api::<Pod>::all(client.clone()))),
        Box::pin(list_all(Api::<Lease>::all(client.clone()))),
        Box::pin(list_all(Api::<Event>::all(client.clone()))),
        Box::pin(list_all(Api::<PersistentVolume>::all(client.clone()))),
        Box::pin(collect_webhooks(client)),
        Box::pin(list_all(Api::<Node>::all(client.clone()))),
        Box::pin(super::collect_conversion::webhook_crds(client)),
    );
    let mut unread = Unread {
        blind_spots: &mut blind_spots,
        unreadable: &mut unreadable,
        failures: &mut failures,
    };
    let namespaces: Vec<Namespace> = unread.read("namespaces", "v1", namespaces);
    let api_services: Vec<APIService> =
        unread.read("apiservices", "apiregistration.k8s.io/v1", api_services);
    let pods: Vec<Pod> = unread.read("pods", "v1", pods);
    let leases: Vec<Lease> = unread.read("leases", "coordination.k8s.io/v1", leases);
    let events: Vec<Event> = unread.read("events", "v1", events);
    let persistent_volumes: Vec<PersistentVolume> = unread.read("persistentvolumes", "v1", pvs);
    let nodes: Vec<Node> = unread.read("nodes", "v1", nodes);
    let conversion_webhook_crds =
        unread.read("customresourcedefinitions", "apiextensions.k8s.io/v1", crds);

    let terminating_ns: std::sync::Arc<BTreeSet<String>> = std::sync::Arc::new(
        namespaces
            .iter()
            .filter(|n| n.metadata.deletion_timestamp.is_some())
            .filter_map(|n| n.metadata.name.clone())
            .collect(),
    );

    // Pods come from the full list above, not a second metadata list: the
    // kubelet's final delete (grace 0) moves a pod's deletionTimestamp to
    // the time of that delete, so two lists a few milliseconds apart can
    // disagree on how long one pod has been terminating.
    let is_pods = |t: &ListableType| t.api_version == "v1" && t.resource == "pods";
    let pod_type = discovered.types.iter().find(|t| is_pods(t)).cloned();
    let mut lists: Vec<(ListableType, Option<String>)> = Vec::new();
    for t in discovered.types.iter().filter(|t| !is_pods(t)) {
        match scope {
            CollectScope::Cluster => lists.push((t.clone(), None)),
            CollectScope::Namespaces(names) if t.namespaced => {
                lists.extend(names.iter().map(|ns| (t.clone(), Some(ns.clone()))))
            }
            CollectScope::Namespaces(_) => {}
        }
    }
    let listed: Vec<_> = stream::iter(lists)
        .map(|(t, ns)| Box::pin(list_kept(client.clone(), t, ns, terminating_ns.clone())))
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;

    let mut kept = Kept {
        seen: 0,
        terminating: Vec::new(),
        namespace_content: Vec::new(),
    };
    if let Some(t) = pod_type {
        for p in pods.iter().filter(|p| match scope {
            CollectScope::Cluster => true,
            CollectScope::Namespaces(names) => p
                .metadata
                .namespace
                .as_ref()
                .is_some_and(|n| names.contains(n)),
        }) {
            kept.seen += 1;
            let item = PartialObjectMeta {
                types: None,
                metadata: p.metadata.clone(),
                _phantom: Default::default(),
            };
            keep(&t, item, &terminating_ns, &mut kept);
        }
    }
    for (t, ns, r) in listed {
        match r {
            Ok(k) => {
                kept.seen += k.seen;
                kept.terminating.extend(k.terminating);
                kept.namespace_content.extend(k.namespace_content);
            }
            Err(e) => {
                if is_blind(&e) {
                    blind_spots.push(BlindSpot {
                        what: format!(
                            "{} ({}), {}",
                            t.resource,
                            t.api_version,
                            ns.as_deref()
                                .map_or("all namespaces".to_string(), |n| format!("namespace {n}"))
                        ),
                        why: crate::kube_error::text(&e),
                    });
                    unreadable.push(Unreadable {
                        resource: kubectl_resource(&t.resource, &t.api_version),
                        message: crate::kube_error::text(&e),
                    });
                }
                failures.push(DiscoveryFailure {
                    group_version: t.api_version.clone(),
                    message: format!("list {}: {}", t.resource, crate::kube_error::text(&e)),
                });
            }
        }
    }
    let Kept {
        seen: objects_seen,
        terminating,
        namespace_content,
    } = kept;
    let sort = |v: &mut Vec<ObjectRecord>| {
        v.sort_by(|a, b| {
            (
                &a.api_version,
                &a.resource,
                &a.metadata.namespace,
                &a.metadata.name,
            )
                .cmp(&(
                    &b.api_version,
                    &b.resource,
                    &b.metadata.namespace,
                    &b.metadata.name,
                ))
        })
    };
    // Every version was listed: an object served in several is kept once.
    let mut terminating = one_per_object(terminating, &discovered.preferred);
    let mut namespace_content = one_per_object(namespace_content, &discovered.preferred);
    sort(&mut terminating);
    sort(&mut namespace_content);

    let mut webhooks = webhooks.unwrap_or_else(|failure| {
        blind_spots.push(BlindSpot {
            what: "webhook configurations (admissionregistration.k8s.io/v1)".into(),
            why: failure.message.clone(),
        });
        failures.push(failure);
        Webhooks::default()
    });
    let conversion_services = super::collect_conversion::look_up_services(
        client,
        &conversion_webhook_crds,
        &webhooks.services,
    )
    .await;
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
    unreadable.sort_by(|a, b| a.resource.cmp(&b.resource));
    unreadable.dedup_by(|a, b| a.resource == b.resource);
    let mut snapshot = Snapshot {
        taken_at,
        namespaces,
        api_services,
        terminating,
        namespace_content,
        pods,
        leases,
        discovery_failures: failures,
        events,
        persistent_volumes,
        nodes,
        validating_webhooks: webhooks.validating,
        mutating_webhooks: webhooks.mutating,
        webhook_services: webhooks.services,
        api_service_backends,
        unreadable,
        conversion_webhook_crds,
        // Filled by the doctor on a local cluster (kcm_metrics), not here.
        controller_manager_metrics: None,
        ..Snapshot::default()
    };
    // Boxed: this future would otherwise sit inside collect's own.
    let read_before = snapshot.unreadable.len();
    Box::pin(super::collect_owners::collect(client, &mut snapshot)).await;
    for u in &snapshot.unreadable[read_before..] {
        blind_spots.push(BlindSpot {
            what: format!("{}, all namespaces", u.resource),
            why: u.message.clone(),
        });
    }
    let stats = CollectStats {
        types_listed: discovered.types.len(),
        objects_seen,
        duration: start.elapsed(),
        blind_spots,
    };
    Ok((snapshot, stats))
}

/// The admission webhooks and what backs them.
#[derive(Default)]
struct Webhooks {
    validating: Vec<ValidatingWebhookConfiguration>,
    mutating: Vec<MutatingWebhookConfiguration>,
    services: Vec<ServiceLookup>,
}

/// Both kinds of webhook configuration, then a lookup of every Service
/// they call (GET the Service, count ready endpoints over its
/// EndpointSlices), in parallel. A failed list is recorded, not fatal:
/// without it no webhook is judged dead.
async fn collect_webhooks(client: &Client) -> Result<Webhooks, DiscoveryFailure> {
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

/// GET the Service and record what it is (type, externalName, selector),
/// then count its EndpointSlices' endpoints. For a Service that selects
/// pods and has no ready endpoint, the pods its selector matches are read
/// too and, unless one is coming back, the slices again
/// [`backend::SUSTAINED`] later: "no ready endpoint" counts as proof
/// ([`backend::judge`]) only when sustained, with both reads recorded.
pub(super) async fn look_up_service(client: &Client, key: ServiceKey) -> ServiceLookup {
    let svc: Api<Service> = Api::namespaced(client.clone(), &key.namespace);
    let mut lookup = ServiceLookup {
        service: key,
        ..ServiceLookup::default()
    };
    let spec = match svc.get_opt(&lookup.service.name).await {
        Ok(None) => return lookup,
        Ok(Some(s)) => s.spec.unwrap_or_default(),
        Err(e) => {
            lookup.error = Some(crate::kube_error::text(&e));
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
        lookup.error = Some(e);
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
            lookup.error = Some(e);
            return lookup;
        }
        // Pods made since the first read would show up now.
        read_backend_pods(client, &mut lookup).await;
    }
    lookup
}

/// One read of the Service's EndpointSlices, appended to `lookup.reads`.
async fn read_slices(client: &Client, lookup: &mut ServiceLookup) -> Result<(), String> {
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), &lookup.service.namespace);
    let lp = ListParams::default().labels(&format!(
        "kubernetes.io/service-name={}",
        lookup.service.name
    ));
    let list = slices.list(&lp).await.map_err(|e| {
        format!(
            "listing its EndpointSlices: {}",
            crate::kube_error::text(&e)
        )
    })?;
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
