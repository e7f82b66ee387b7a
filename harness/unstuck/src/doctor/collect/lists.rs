//! Listing: the typed lists diagnosis reads whole, then the paged
//! metadata lists of every discovered type, keeping only what is stuck.
//! A list that cannot be read is recorded ([`Unread`]), never fatal.

use std::{collections::BTreeSet, sync::Arc};

use futures::{StreamExt, stream};
use k8s_openapi::{
    api::{
        coordination::v1::Lease,
        core::v1::{Event, Namespace, Node, PersistentVolume, Pod},
    },
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    kube_aggregator::pkg::apis::apiregistration::v1::APIService,
};
use kube::{Api, Client, core::PartialObjectMeta};
use unstuck_core::doctor::{DiscoveryFailure, ObjectRecord, snapshot::Unreadable};

use super::services::{Webhooks, collect_webhooks};
use super::{BlindSpot, CONCURRENCY, CollectScope, ListableType};
use crate::doctor::pages::{Kept, is_blind, keep, list_all, list_kept};
use crate::doctor::versions::one_per_object;

/// A resource as kubectl spells it: `pods`, `leases.coordination.k8s.io`.
fn kubectl_resource(plural: &str, group_version: &str) -> String {
    match group_version.split_once('/') {
        Some((group, _)) => format!("{plural}.{group}"),
        None => plural.to_owned(),
    }
}

/// Where a failed typed list is recorded.
pub(super) struct Unread<'a> {
    pub blind_spots: &'a mut Vec<BlindSpot>,
    pub unreadable: &'a mut Vec<Unreadable>,
    pub failures: &'a mut Vec<DiscoveryFailure>,
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

    /// A paged metadata list of `t` (in `ns`, or everywhere) that failed:
    /// a blind spot when refused or timed out, a discovery failure always.
    fn list_failed(&mut self, t: &ListableType, ns: Option<&str>, e: &kube::Error) {
        if is_blind(e) {
            self.blind_spots.push(BlindSpot {
                what: format!(
                    "{} ({}), {}",
                    t.resource,
                    t.api_version,
                    ns.map_or("all namespaces".to_string(), |n| format!("namespace {n}"))
                ),
                why: crate::kube_error::text(e),
            });
            self.unreadable.push(Unreadable {
                resource: kubectl_resource(&t.resource, &t.api_version),
                message: crate::kube_error::text(e),
            });
        }
        self.failures.push(DiscoveryFailure {
            group_version: t.api_version.clone(),
            message: format!("list {}: {}", t.resource, crate::kube_error::text(e)),
        });
    }
}

/// The lists diagnosis reads whole (typed), each empty when unreadable.
pub(super) struct Typed {
    pub namespaces: Vec<Namespace>,
    pub api_services: Vec<APIService>,
    pub pods: Vec<Pod>,
    pub leases: Vec<Lease>,
    pub events: Vec<Event>,
    pub persistent_volumes: Vec<PersistentVolume>,
    pub nodes: Vec<Node>,
    pub conversion_webhook_crds: Vec<CustomResourceDefinition>,
    /// The admission webhooks and their Services, or why they could not
    /// be listed.
    pub webhooks: Result<Webhooks, DiscoveryFailure>,
}

/// Reads the typed lists together, recording each one that fails.
pub(super) async fn read_typed(client: &Client, unread: &mut Unread<'_>) -> Typed {
    let (namespaces, api_services, pods, leases, events, pvs, webhooks, nodes, crds) = tokio::join!(
        Box::pin(list_all(Api::<Namespace>::all(client.clone()))),
        Box::pin(list_all(Api::<APIService>::all(client.clone()))),
        Box::pin(list_all(Api::<Pod>::all(client.clone()))),
        Box::pin(list_all(Api::<Lease>::all(client.clone()))),
        Box::pin(list_all(Api::<Event>::all(client.clone()))),
        Box::pin(list_all(Api::<PersistentVolume>::all(client.clone()))),
        Box::pin(collect_webhooks(client)),
        Box::pin(list_all(Api::<Node>::all(client.clone()))),
        Box::pin(super::conversion::webhook_crds(client)),
    );
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
    Typed {
        namespaces,
        api_services,
        pods,
        leases,
        events,
        persistent_volumes,
        nodes,
        conversion_webhook_crds,
        webhooks,
    }
}

/// Lists every discovered type (pods: see [`keep_pods`]) as far as
/// `scope` reaches, keeping the objects being deleted and those in a
/// Terminating namespace, each object once (under its group's `preferred`
/// version when served in several), sorted.
pub(super) async fn list_discovered(
    client: &Client,
    scope: &CollectScope,
    types: &[ListableType],
    preferred: &BTreeSet<String>,
    typed: &Typed,
    unread: &mut Unread<'_>,
) -> Kept {
    let terminating_ns: Arc<BTreeSet<String>> = Arc::new(
        typed
            .namespaces
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
    let pod_type = types.iter().find(|t| is_pods(t)).cloned();
    let mut lists: Vec<(ListableType, Option<String>)> = Vec::new();
    for t in types.iter().filter(|t| !is_pods(t)) {
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
        keep_pods(&t, &typed.pods, scope, &terminating_ns, &mut kept);
    }
    for (t, ns, r) in listed {
        match r {
            Ok(k) => {
                kept.seen += k.seen;
                kept.terminating.extend(k.terminating);
                kept.namespace_content.extend(k.namespace_content);
            }
            Err(e) => unread.list_failed(&t, ns.as_deref(), &e),
        }
    }
    // Every version was listed: an object served in several is kept once.
    let mut terminating = one_per_object(kept.terminating, preferred);
    let mut namespace_content = one_per_object(kept.namespace_content, preferred);
    sort_records(&mut terminating);
    sort_records(&mut namespace_content);
    Kept {
        seen: kept.seen,
        terminating,
        namespace_content,
    }
}

/// Keeps what diagnosis needs of the pods in scope, from the typed list.
fn keep_pods(
    t: &ListableType,
    pods: &[Pod],
    scope: &CollectScope,
    terminating_ns: &BTreeSet<String>,
    kept: &mut Kept,
) {
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
        keep(t, item, terminating_ns, kept);
    }
}

fn sort_records(v: &mut [ObjectRecord]) {
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
}
