//! Cleanup of what a scenario created, on every path out. It acts only on
//! objects this run created, matched by UID: every delete carries a UID
//! precondition. It removes only finalizer keys the scenario itself added
//! ([`keys`]: those in its own manifests, recorded with the UID at
//! creation, and the template keys controllers copied from them onto the
//! run's pods), each with a JSON patch that `test`s the UID and the list
//! it replaces. Keys anyone else added — another controller on a cluster
//! unstuck did not create, Kubernetes' own — are never removed: they are
//! waited on for a bounded time and then reported as `left`.
//!
//! The same rule holds on every cluster, throwaway ones included: a
//! scenario's leftovers are the scenario's keys, and Kubernetes' own keys
//! resolve by themselves once the run's content is gone, so nothing needs
//! a forced strip (which would hide a controller that failed to finish).
//!
//! Order: registrations that block deletion go first (a dead APIService
//! blocks every namespace deletion, a dead webhook rejects the deletes it
//! matches), then the scenario's namespaces, and last the cluster-scoped
//! types (a CRD deleted while its objects still carry finalizers would
//! itself get stuck). Waiting is a bounded poll of the run's own objects,
//! each read by name; only a scenario whose manifests put keys in
//! templates lists its namespaces' content, a few times at most, to find
//! the pods made from them.

pub mod keys;
mod release;

use std::time::Duration;

use kube::{
    Client,
    api::{DeleteParams, DynamicObject},
};

use super::{
    Created,
    objects::{ResolveError, api_for, resolve_if_served},
};
use keys::Holder;
use release::{release, release_in_namespaces, release_spec};

/// What cleanup did: the report side's type, filled here.
pub use crate::report::CleanupReport;

/// Why cleanup could not tell whether an object of the run's is there.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("discovery of {api_version} failed: {source}")]
    Discovery {
        api_version: String,
        source: ResolveError,
    },
    #[error("reading it failed: {}", crate::kube_error::text(source))]
    Read { source: kube::Error },
}

/// One second between reads of the run's objects.
const TICK: Duration = Duration::from_secs(1);
/// Bound on waiting for the run's namespaces to go.
const NAMESPACE_ROUNDS: usize = 60;
/// Bound on waiting for everything else, after the namespaces.
const FINAL_ROUNDS: usize = 30;
/// Rounds of the namespace wait in which the run's own keys are removed:
/// first after a few seconds (the deletes have had time to act on
/// their own), then again for what controllers made meanwhile.
const RELEASE_ROUNDS: [usize; 3] = [3, 15, 35];
/// How long an object held only by others' keys is still waited on (their
/// owner may be finishing) before it is reported as left.
const OTHERS_GRACE: usize = 10;

/// The object of `c`, read by name, if it is still the one this run
/// created; for an entry written before its create returned (no UID yet)
/// whatever holds the name, for the caller to judge by its label. `Err`
/// says what kept cleanup from telling.
pub(super) async fn read(client: &Client, c: &Created) -> Result<Option<DynamicObject>, ReadError> {
    // A type no longer served (its CRD deleted) has no objects left; a
    // failed discovery is asked again on the next round.
    let (ar, caps) = match resolve_if_served(client, &c.api_version, &c.kind).await {
        Ok(Some(found)) => found,
        Ok(None) => return Ok(None),
        Err(source) => {
            return Err(ReadError::Discovery {
                api_version: c.api_version.clone(),
                source,
            });
        }
    };
    match api_for(client, &ar, &caps, c.namespace.as_deref())
        .get_opt(&c.name)
        .await
    {
        Ok(Some(o)) if c.uid.is_empty() || o.metadata.uid.as_deref() == Some(c.uid.as_str()) => {
            Ok(Some(o))
        }
        // Gone, or the name now holds another object: ours is gone.
        Ok(_) => Ok(None),
        Err(source) => Err(ReadError::Read { source }),
    }
}

async fn delete(client: &Client, c: &Created, report: &mut CleanupReport) {
    let obj = match read(client, c).await {
        Ok(Some(obj)) => obj,
        Ok(None) => return,
        // Unreadable: said, and a leak is caught by the final check.
        Err(e) => {
            report.failed.push(format!("deleting {c}: {e}"));
            return;
        }
    };
    if obj.metadata.deletion_timestamp.is_some() {
        return;
    }
    let (ar, caps) = match resolve_if_served(client, &c.api_version, &c.kind).await {
        Ok(Some(found)) => found,
        Ok(None) => return,
        Err(e) => {
            report.failed.push(format!("deleting {c}: {e}"));
            return;
        }
    };
    let dp = DeleteParams {
        preconditions: Some(kube::api::Preconditions {
            uid: Some(c.uid.clone()),
            resource_version: None,
        }),
        ..DeleteParams::background()
    };
    match api_for(client, &ar, &caps, c.namespace.as_deref())
        .delete(&c.name, &dp)
        .await
    {
        Ok(_) => report.deleted.push(c.to_string()),
        // Gone meanwhile, or the name holds another object now (the UID
        // precondition): nothing of the run's to delete.
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
        Err(e) => report
            .failed
            .push(format!("deleting {c}: {}", crate::kube_error::text(&e))),
    }
}

/// A registration that can block deletes: removed before anything else.
fn is_blocker(c: &Created) -> bool {
    matches!(
        c.kind.as_str(),
        "APIService" | "ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration"
    )
}

/// Every key and token the run added to anything: what [`keys::holder`]
/// counts as the run's own.
fn all_keys(created: &[Created]) -> Vec<String> {
    let mut all = Vec::new();
    for c in created {
        keys::merge(&mut all, &c.keys.own);
        keys::merge(&mut all, &c.keys.spec);
        keys::merge(&mut all, &c.keys.template);
    }
    all
}

pub async fn cleanup(client: &Client, created: &[Created]) -> CleanupReport {
    let mut report = CleanupReport::default();
    let ours = all_keys(created);
    // 1. Registrations that block deletes.
    for c in created.iter().rev().filter(|c| is_blocker(c)) {
        delete(client, c, &mut report).await;
    }
    // 2. Namespaced objects, then the namespaces.
    for c in created.iter().rev().filter(|c| c.namespace.is_some()) {
        delete(client, c, &mut report).await;
    }
    for c in created.iter().filter(|c| c.kind == "Namespace") {
        delete(client, c, &mut report).await;
    }
    wait_for_namespaces(client, created, &ours, &mut report).await;
    // 3. The rest (CRDs and other cluster-scoped objects), newest first.
    for c in created
        .iter()
        .rev()
        .filter(|c| c.namespace.is_none() && c.kind != "Namespace" && !is_blocker(c))
    {
        delete(client, c, &mut report).await;
    }
    wait_for_all(client, created, &ours, &mut report).await;
    report
}

/// What holds an object of the run's that is still there.
fn holder_of(obj: &DynamicObject, ours: &[String]) -> Holder {
    if obj.metadata.deletion_timestamp.is_none() {
        return Holder::NotOnlyOthers;
    }
    let finalizers = obj.metadata.finalizers.clone().unwrap_or_default();
    let spec: Vec<String> = obj.data["spec"]["finalizers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t.as_str().map(str::to_owned))
        .collect();
    let remaining = obj.data["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "NamespaceFinalizersRemaining" && c["status"] == "True")
        .and_then(|c| c["message"].as_str());
    keys::holder(&finalizers, &spec, remaining, ours)
}

async fn wait_for_namespaces(
    client: &Client,
    created: &[Created],
    ours: &[String],
    report: &mut CleanupReport,
) {
    let mut pending: Vec<&Created> = created.iter().filter(|c| c.kind == "Namespace").collect();
    let mut last_release = 0;
    for round in 0..NAMESPACE_ROUNDS {
        let mut still = Vec::new();
        let mut held_by_others = 0;
        for c in pending {
            match read(client, c).await {
                Ok(None) => continue,
                Ok(Some(obj)) => {
                    if matches!(holder_of(&obj, ours), Holder::Others(_)) {
                        held_by_others += 1;
                    }
                    if round > RELEASE_ROUNDS[0] {
                        release_spec(client, c, &obj, report).await;
                    }
                }
                Err(_) => {}
            }
            still.push(c);
        }
        pending = still;
        if pending.is_empty() {
            return;
        }
        if RELEASE_ROUNDS.contains(&round) {
            release_in_namespaces(client, created, &pending, report).await;
            last_release = round;
        }
        // Held only by keys of others' since the last release, for a
        // while: waiting on is waiting for their owner.
        if held_by_others == pending.len() && round >= last_release + OTHERS_GRACE {
            return;
        }
        tokio::time::sleep(TICK).await;
    }
}

/// Waits (bounded) for every object of the run to go, removing the run's
/// own keys once more from what stays; then reports what is left to
/// others and what leaked.
async fn wait_for_all(
    client: &Client,
    created: &[Created],
    ours: &[String],
    report: &mut CleanupReport,
) {
    let mut pending: Vec<(&Created, Result<DynamicObject, ReadError>)> = Vec::new();
    let mut others_since: Option<usize> = None;
    for round in 0..FINAL_ROUNDS {
        let candidates: Vec<&Created> = if round == 0 {
            created.iter().collect()
        } else {
            pending.iter().map(|(c, _)| *c).collect()
        };
        pending.clear();
        for c in candidates {
            match read(client, c).await {
                Ok(None) => {}
                Ok(Some(obj)) => pending.push((c, Ok(obj))),
                Err(e) => pending.push((c, Err(e))),
            }
        }
        if pending.is_empty() {
            return;
        }
        if round == 3 {
            for (c, seen) in pending.iter_mut() {
                if let Some(after) = release(client, c, &c.keys.own, report).await {
                    *seen = Ok(after);
                }
            }
        }
        let only_others = pending
            .iter()
            .all(|(_, o)| matches!(o, Ok(o) if matches!(holder_of(o, ours), Holder::Others(_))));
        others_since = if only_others {
            others_since.or(Some(round))
        } else {
            None
        };
        if others_since.is_some_and(|since| round >= since + OTHERS_GRACE) {
            break;
        }
        tokio::time::sleep(TICK).await;
    }
    for (c, seen) in pending {
        match seen {
            Ok(obj) => match holder_of(&obj, ours) {
                Holder::Others(keys) => report.left.push(format!(
                    "{c}: held by finalizer(s) {} that this run did not add; left in place for their owner{}",
                    keys.join(", "),
                    if c.kind == "Namespace" {
                        " (the namespace goes once they are removed)"
                    } else {
                        ""
                    }
                )),
                Holder::NotOnlyOthers => report.leaked.push(format!(
                    "{c}: still there (deletionTimestamp {}, finalizers {})",
                    crate::text::or_none(
                        obj.metadata
                            .deletion_timestamp
                            .map(|t| t.0.to_string())
                            .as_deref()
                    ),
                    crate::text::list(&obj.metadata.finalizers.unwrap_or_default())
                )),
            },
            Err(e) => report.leaked.push(format!("{c}: {e}")),
        }
    }
}
