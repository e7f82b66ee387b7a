//! Collect: one [`Snapshot`] of a live cluster, read from the outside as a
//! person's kubectl would, only faster: discovery of every group/version in
//! parallel, then metadata-only LISTs of every listable type in parallel.
//! A group/version that cannot be discovered or listed is recorded in the
//! snapshot (partial discovery is data, not an abort).

use std::time::{Duration, Instant};

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
    DiscoveryFailure, ObjectRecord, ServiceKey, ServiceLookup, Snapshot, webhook::services_called,
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
}

/// Discovers every listable type, preferring nothing: every served
/// version of every group is asked, because a dead aggregated API is
/// exactly one such version.
pub async fn discover(client: &Client) -> Result<Discovered, kube::Error> {
    let mut versions: Vec<String> = client.list_core_api_versions().await?.versions;
    for g in client.list_api_groups().await?.groups {
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
                message: e.to_string(),
            }),
        }
    }
    out.types
        .sort_by(|a, b| (&a.api_version, &a.resource).cmp(&(&b.api_version, &b.resource)));
    out.failures
        .sort_by(|a, b| a.group_version.cmp(&b.group_version));
    Ok(out)
}

/// One type's metadata-only LIST, or why it failed.
type MetadataList = Result<Vec<PartialObjectMeta<kube::api::DynamicObject>>, kube::Error>;

/// What a collection cost, for reports and the benchmark.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct CollectStats {
    pub types_listed: usize,
    pub objects_seen: usize,
    pub duration: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum CollectError {
    #[error("discovery failed entirely (is the API server reachable?): {0}")]
    Discovery(#[source] kube::Error),
    #[error("listing {what} failed: {source}")]
    List {
        what: &'static str,
        #[source]
        source: kube::Error,
    },
}

/// Reads the whole cluster into a [`Snapshot`].
pub async fn collect(client: &Client) -> Result<(Snapshot, CollectStats), CollectError> {
    let start = Instant::now();
    let taken_at = Timestamp::now();
    let discovered = discover(client).await.map_err(CollectError::Discovery)?;
    let mut failures = discovered.failures;

    let lp = ListParams::default();
    let (ns_api, svc_api, pod_api, lease_api, event_api, pv_api) = (
        Api::<Namespace>::all(client.clone()),
        Api::<APIService>::all(client.clone()),
        Api::<Pod>::all(client.clone()),
        Api::<Lease>::all(client.clone()),
        Api::<Event>::all(client.clone()),
        Api::<PersistentVolume>::all(client.clone()),
    );
    let node_api = Api::<Node>::all(client.clone());
    let (namespaces, api_services, pods, leases, events, pvs, webhooks, nodes) = tokio::join!(
        ns_api.list(&lp),
        svc_api.list(&lp),
        pod_api.list(&lp),
        lease_api.list(&lp),
        event_api.list(&lp),
        pv_api.list(&lp),
        collect_webhooks(client),
        node_api.list(&lp),
    );
    let list = |what: &'static str| move |source| CollectError::List { what, source };
    let namespaces = namespaces.map_err(list("namespaces"))?.items;
    let terminating_ns: Vec<String> = namespaces
        .iter()
        .filter(|n| n.metadata.deletion_timestamp.is_some())
        .filter_map(|n| n.metadata.name.clone())
        .collect();

    let pods = pods.map_err(list("pods"))?.items;
    // Pods come from the full list above, not a second metadata list: the
    // kubelet's final delete (grace 0) moves a pod's deletionTimestamp to
    // the time of that delete, so two lists a few milliseconds apart can
    // disagree on how long one pod has been terminating.
    let is_pods = |t: &ListableType| t.api_version == "v1" && t.resource == "pods";
    let pod_type = discovered.types.iter().find(|t| is_pods(t)).cloned();
    let metadata_types: Vec<ListableType> = discovered
        .types
        .iter()
        .filter(|t| !is_pods(t))
        .cloned()
        .collect();
    let mut listed: Vec<(ListableType, MetadataList)> = stream::iter(metadata_types)
        .map(|t| {
            let client = client.clone();
            async move {
                let api: Api<kube::api::DynamicObject> = Api::all_with(client, &t.api_resource());
                let r = api
                    .list_metadata(&ListParams::default())
                    .await
                    .map(|l| l.items);
                (t, r)
            }
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    if let Some(t) = pod_type {
        let items = pods
            .iter()
            .map(|p| PartialObjectMeta {
                types: None,
                metadata: p.metadata.clone(),
                _phantom: Default::default(),
            })
            .collect();
        listed.push((t, Ok(items)));
    }

    let mut terminating = Vec::new();
    let mut namespace_content = Vec::new();
    let mut objects_seen = 0;
    for (t, r) in listed {
        match r {
            Ok(items) => {
                objects_seen += items.len();
                for item in items {
                    let in_terminating_ns = t.namespaced
                        && item
                            .metadata
                            .namespace
                            .as_ref()
                            .is_some_and(|ns| terminating_ns.contains(ns));
                    let deleting = item.metadata.deletion_timestamp.is_some();
                    if !(deleting || in_terminating_ns) {
                        continue;
                    }
                    let record = ObjectRecord {
                        api_version: t.api_version.clone(),
                        kind: t.kind.clone(),
                        resource: t.resource.clone(),
                        namespaced: t.namespaced,
                        metadata: item.metadata,
                    };
                    if in_terminating_ns {
                        namespace_content.push(record.clone());
                    }
                    if deleting {
                        terminating.push(record);
                    }
                }
            }
            Err(e) => failures.push(DiscoveryFailure {
                group_version: t.api_version.clone(),
                message: format!("list {}: {e}", t.resource),
            }),
        }
    }
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
    sort(&mut terminating);
    sort(&mut namespace_content);

    let webhooks = webhooks.unwrap_or_else(|failure| {
        failures.push(failure);
        Webhooks::default()
    });
    let mut snapshot = Snapshot {
        taken_at,
        namespaces,
        api_services: api_services.map_err(list("apiservices"))?.items,
        terminating,
        namespace_content,
        pods,
        leases: leases.map_err(list("leases"))?.items,
        discovery_failures: failures,
        events: events.map_err(list("events"))?.items,
        persistent_volumes: pvs.map_err(list("persistentvolumes"))?.items,
        nodes: nodes.map_err(list("nodes"))?.items,
        validating_webhooks: webhooks.validating,
        mutating_webhooks: webhooks.mutating,
        webhook_services: webhooks.services,
        ..Snapshot::default()
    };
    // Boxed: this future would otherwise sit inside collect's own.
    Box::pin(super::collect_owners::collect(client, &mut snapshot)).await;
    let stats = CollectStats {
        types_listed: discovered.types.len(),
        objects_seen,
        duration: start.elapsed(),
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
    let lp = ListParams::default();
    let (v_api, m_api) = (
        Api::<ValidatingWebhookConfiguration>::all(client.clone()),
        Api::<MutatingWebhookConfiguration>::all(client.clone()),
    );
    let (validating, mutating) = tokio::join!(v_api.list(&lp), m_api.list(&lp));
    let failed = |resource: &str, e: kube::Error| DiscoveryFailure {
        group_version: "admissionregistration.k8s.io/v1".into(),
        message: format!("list {resource}: {e}"),
    };
    let validating = validating
        .map_err(|e| failed("validatingwebhookconfigurations", e))?
        .items;
    let mutating = mutating
        .map_err(|e| failed("mutatingwebhookconfigurations", e))?
        .items;
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

async fn look_up_service(client: &Client, key: ServiceKey) -> ServiceLookup {
    let svc: Api<Service> = Api::namespaced(client.clone(), &key.namespace);
    let mut lookup = ServiceLookup {
        service: key,
        exists: false,
        ready_endpoints: None,
        error: None,
    };
    match svc.get_opt(&lookup.service.name).await {
        Ok(None) => return lookup,
        Ok(Some(_)) => lookup.exists = true,
        Err(e) => {
            lookup.error = Some(e.to_string());
            return lookup;
        }
    }
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), &lookup.service.namespace);
    let lp = ListParams::default().labels(&format!(
        "kubernetes.io/service-name={}",
        lookup.service.name
    ));
    match slices.list(&lp).await {
        // An endpoint whose `ready` is unset counts as ready (the API's rule).
        Ok(list) => {
            let ready = list
                .items
                .iter()
                .flat_map(|s| &s.endpoints)
                .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) != Some(false))
                .count();
            lookup.ready_endpoints = Some(u32::try_from(ready).unwrap_or(u32::MAX));
        }
        Err(e) => lookup.error = Some(format!("listing its EndpointSlices: {e}")),
    }
    lookup
}
