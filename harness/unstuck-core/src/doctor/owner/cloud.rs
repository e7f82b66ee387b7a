//! The owner of `service.kubernetes.io/load-balancer-cleanup`: a cloud
//! controller manager's service controller
//! ([`crate::doctor::model::load_balancer`]).
//!
//! - `Alive`: its service controller reported about the Service since the
//!   deletion began (it is working on it, or failing at it: a live
//!   controller that fails retries and reports each time), or about any
//!   object in the last two minutes, or the
//!   `kube-system/cloud-controller-manager` Lease is fresh.
//! - `Dead`: that Lease is there and stale for more than ten minutes (a
//!   cloud controller manager ran here and stopped), and the service
//!   controller reported nothing about the Service since the deletion
//!   began. A live one removes the key within seconds of the deletion or
//!   reports why not, again and again, so its silence while the Service
//!   stays stuck is evidence, not an absence.
//! - `Unknown` otherwise: without a Lease a cloud controller manager may
//!   still run where this cluster shows none (a managed control plane,
//!   `cloud-provider-kind` on the host, leader election off or another
//!   Lease name): no pod and no Lease here are not proof. A Lease stale for
//!   less than ten minutes may be a restart. Events or Leases that could
//!   not be read leave it `Unknown` too.

use k8s_openapi::api::core::v1::Event;
use k8s_openapi::jiff::Timestamp;

use super::events::{is_about, when};
use super::{INSTALLED_SECS, RECENT_SECS, fmt_secs, leases::renew_age, unreadable};
use crate::doctor::model::{
    CLOUD_CONTROLLER_LEASE, ObjectRecord, OwnerVerdict, SERVICE_CONTROLLER, Snapshot,
};

/// The service controller's events about `record` since its deletion
/// began (all of them when it is not being deleted), newest first, with
/// when each was last reported.
pub fn reports_since_deletion<'a>(
    snapshot: &'a Snapshot,
    record: &ObjectRecord,
) -> Vec<(&'a Event, Timestamp)> {
    let deleted_at = record.metadata.deletion_timestamp.as_ref().map(|t| t.0);
    let mut out: Vec<(&Event, Timestamp)> = snapshot
        .events
        .iter()
        .filter(|e| {
            reported_by_service_controller(e) && is_about(e, &record.kind, &record.metadata)
        })
        .filter_map(|e| when(e).map(|t| (e, t)))
        .filter(|(_, at)| deleted_at.is_none_or(|d| *at >= d))
        .collect();
    out.sort_by_key(|e| std::cmp::Reverse(e.1));
    out
}

/// The service controller's newest report about anything, if it is
/// recent enough to show it running ([`RECENT_SECS`]).
fn latest_report(snapshot: &Snapshot) -> Option<(&Event, Timestamp)> {
    snapshot
        .events
        .iter()
        .filter(|e| reported_by_service_controller(e))
        .filter_map(|e| when(e).map(|t| (e, t)))
        .filter(|(_, at)| snapshot.age_of(*at).as_secs() <= RECENT_SECS)
        .max_by_key(|(_, at)| *at)
}

fn reported_by_service_controller(e: &Event) -> bool {
    [
        e.source.as_ref().and_then(|s| s.component.as_deref()),
        e.reporting_component.as_deref(),
    ]
    .into_iter()
    .flatten()
    .any(|c| c == SERVICE_CONTROLLER)
}

/// The verdict on the cleanup key of `record` (a Service), or of a Service
/// not at hand (`None`: the events about it cannot be matched, so it is
/// never `Dead`).
pub(super) fn verdict(
    finalizer: &str,
    record: Option<&ObjectRecord>,
    snapshot: &Snapshot,
) -> OwnerVerdict {
    let mut evidence = vec![format!(
        "{finalizer} is removed only by a cloud controller manager's service controller, after it deleted the cloud's load balancer (kube-controller-manager has not run that controller since v1.31, KEP-2395)"
    )];
    let since_deletion = record
        .map(|r| reports_since_deletion(snapshot, r))
        .unwrap_or_default();
    if let Some((e, at)) = since_deletion.first() {
        evidence.push(format!(
            "{SERVICE_CONTROLLER} reported {} {} about it {} ago, since its deletion began: a cloud controller manager is acting on it",
            e.type_.as_deref().unwrap_or("an event"),
            e.reason.as_deref().unwrap_or_default(),
            fmt_secs(snapshot.age_of(*at).as_secs())
        ));
        return OwnerVerdict::Alive { evidence };
    }
    // A live cloud controller manager reports about the Services it works
    // on; one report about any, lately, shows one running.
    if let Some((e, at)) = latest_report(snapshot) {
        let o = &e.involved_object;
        evidence.push(format!(
            "{SERVICE_CONTROLLER} reported {} about {} {}/{} {} ago: a cloud controller manager runs (this Service may be queued or backing off)",
            e.reason.as_deref().unwrap_or("an event"),
            o.kind.as_deref().unwrap_or_default(),
            o.namespace.as_deref().unwrap_or_default(),
            o.name.as_deref().unwrap_or_default(),
            fmt_secs(snapshot.age_of(at).as_secs())
        ));
        return OwnerVerdict::Alive { evidence };
    }
    let silent = match record {
        Some(_) => format!(
            "no event from {SERVICE_CONTROLLER} about it since its deletion began ({} events checked)",
            snapshot.events.len()
        ),
        None => format!(
            "the Service is not at hand, so events from {SERVICE_CONTROLLER} about it cannot be matched"
        ),
    };
    let (ns, name) = CLOUD_CONTROLLER_LEASE;
    let lease = snapshot.leases.iter().find(|l| {
        l.metadata.namespace.as_deref() == Some(ns) && l.metadata.name.as_deref() == Some(name)
    });
    let leases_unreadable = unreadable(
        snapshot,
        "leases.coordination.k8s.io",
        "coordination.k8s.io/v1",
    );
    let Some(lease) = lease else {
        match unreadable(snapshot, "events", "v1") {
            // Silence read from nothing is not silence.
            Some(why) => evidence.push(why),
            None => evidence.push(silent),
        }
        match leases_unreadable {
            Some(why) => evidence.push(why),
            None => evidence.push(format!(
                "no {ns}/{name} lease ({} leases checked): a cloud controller manager may still run where this cluster shows no lease (a managed control plane, cloud-provider-kind on the host, leader election off or another lease name), so its absence is not proof",
                snapshot.leases.len()
            )),
        }
        evidence.push(format!(
            "to confirm: check that no cloud controller manager serves this cluster and that the load balancer is gone in the cloud, then run again with --assume-dead {finalizer}"
        ));
        return OwnerVerdict::Unknown { evidence };
    };
    let holder = lease
        .spec
        .as_ref()
        .and_then(|s| s.holder_identity.as_deref())
        .unwrap_or("nobody");
    if snapshot.lease_is_fresh(lease) {
        evidence.push(format!(
            "lease {ns}/{name} is fresh (holder {holder}, renewed {})",
            renew_age(snapshot, lease)
        ));
        return OwnerVerdict::Alive { evidence };
    }
    let renewed_secs = lease
        .spec
        .as_ref()
        .and_then(|s| s.renew_time.as_ref())
        .map(|t| snapshot.age_of(t.0).as_secs());
    let stale = format!(
        "lease {ns}/{name} is stale (holder {holder}, renewed {})",
        renew_age(snapshot, lease)
    );
    evidence.push(silent);
    let blind = unreadable(snapshot, "events", "v1").or(leases_unreadable);
    if renewed_secs.is_some_and(|s| s < INSTALLED_SECS) {
        evidence.push(format!(
            "{stale}: stale for less than 10 minutes, its holder may be restarting"
        ));
        return OwnerVerdict::Unknown { evidence };
    }
    if let Some(why) = blind {
        evidence.push(stale);
        evidence.push(why);
        return OwnerVerdict::Unknown { evidence };
    }
    if record.is_none() {
        evidence.push(stale);
        return OwnerVerdict::Unknown { evidence };
    }
    evidence.push(format!(
        "{stale}: the cloud controller manager that ran here stopped, and none has acted on this Service since"
    ));
    OwnerVerdict::Dead { evidence }
}
