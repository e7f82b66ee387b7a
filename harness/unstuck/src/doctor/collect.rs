//! Collect: one [`Snapshot`] of a live cluster, read from the outside as a
//! person's kubectl would, only faster: discovery of every group/version in
//! parallel, then metadata-only LISTs of every listable type in parallel.
//! A group/version that cannot be discovered or listed is recorded in the
//! snapshot (partial discovery is data, not an abort); a list refused or
//! timed out is also a blind spot the report names first. Lists are paged
//! (`super::pages`); with a namespace scope, namespaced types are listed
//! only in those namespaces.

mod conversion;
mod discover;
mod lists;
mod load_balancers;
mod services;
pub(super) mod types;

use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;
use kube::Client;
use unstuck_core::doctor::Snapshot;

pub use super::pages::PAGE;
pub use discover::{Discovered, discover};
use lists::Unread;
pub use types::{ListableType, api_resource};

/// How many requests collect keeps in flight at once.
const CONCURRENCY: usize = 16;

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
    let skew = super::clock::server_skew(client).await;
    let taken_at = Timestamp::now();
    let discovered = Box::pin(discover(client))
        .await
        .map_err(CollectError::Discovery)?;
    let mut failures = discovered.failures;
    let mut blind_spots = Vec::new();
    let mut unreadable = Vec::new();

    let mut unread = Unread {
        blind_spots: &mut blind_spots,
        unreadable: &mut unreadable,
        failures: &mut failures,
    };
    let typed = Box::pin(lists::read_typed(client, &mut unread)).await;
    let kept = Box::pin(lists::list_discovered(
        client,
        scope,
        &discovered.types,
        &discovered.preferred,
        &typed,
        &mut unread,
    ))
    .await;
    let lists::Typed {
        namespaces,
        api_services,
        pods,
        leases,
        events,
        persistent_volumes,
        nodes,
        conversion_webhook_crds,
        webhooks,
    } = typed;

    let (webhooks, api_service_backends) = services::backends(
        client,
        webhooks,
        &conversion_webhook_crds,
        &api_services,
        &mut blind_spots,
        &mut failures,
    )
    .await;
    let load_balancer_services = load_balancers::read(
        client,
        &kept.terminating,
        &kept.namespace_content,
        &mut blind_spots,
    )
    .await;
    unreadable.sort_by(|a, b| a.resource.cmp(&b.resource));
    unreadable.dedup_by(|a, b| a.resource == b.resource);
    let mut snapshot = Snapshot {
        taken_at,
        namespaces,
        api_services,
        terminating: kept.terminating,
        namespace_content: kept.namespace_content,
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
        load_balancer_services,
        // Filled by the doctor from the node where it offers them, not here.
        controller_manager_metrics: None,
        ..Snapshot::default()
    };
    // Boxed: this future would otherwise sit inside collect's own.
    let read_before = snapshot.unreadable.len();
    Box::pin(super::collect_owners::collect(client, &mut snapshot)).await;
    Box::pin(super::probe::probe(client, &mut snapshot)).await;
    for u in &snapshot.unreadable[read_before..] {
        blind_spots.push(BlindSpot {
            what: format!("{}, all namespaces", u.resource),
            why: u.message.clone(),
        });
    }
    if let Some(skew) = skew {
        on_server_clock(&mut snapshot, skew);
    }
    let stats = CollectStats {
        types_listed: discovered.types.len(),
        objects_seen: kept.seen,
        duration: start.elapsed(),
        blind_spots,
    };
    Ok((snapshot, stats))
}

/// Moves the times this machine's clock gave the snapshot (when it was
/// taken, when each Service's endpoints were read) onto the API server's
/// clock, which wrote every other timestamp in it ([`super::clock`]).
fn on_server_clock(snapshot: &mut Snapshot, skew: k8s_openapi::jiff::SignedDuration) {
    let shift = |t: &mut Timestamp| {
        if let Ok(moved) = t.checked_add(skew) {
            *t = moved;
        }
    };
    shift(&mut snapshot.taken_at);
    for lookup in snapshot
        .webhook_services
        .iter_mut()
        .chain(snapshot.api_service_backends.iter_mut())
    {
        for read in &mut lookup.reads {
            shift(&mut read.at);
        }
    }
}
