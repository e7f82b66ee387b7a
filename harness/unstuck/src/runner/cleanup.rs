//! Cleanup of what a scenario created, on every path out. It acts only on
//! objects this run created, matched by UID: every delete carries a UID
//! precondition and every finalizer strip is a JSON patch that `test`s
//! the UID and the list it replaces, so an object that took the name
//! since (or was never this run's) is left alone. Registrations
//! that block deletion go first (a dead APIService blocks every namespace
//! deletion, a dead webhook rejects the deletes it matches), then the scenario's namespaces — stripping finalizers from
//! the harness's own leftovers where a failed run left them stuck — and
//! last the cluster-scoped types (a CRD deleted while its objects still
//! carry finalizers would itself get stuck).

use std::time::Duration;

use kube::{
    Client,
    api::{DeleteParams, Patch, PatchParams},
};
use serde::Serialize;

use super::{
    Created,
    objects::{api_for, resolve_if_served},
};
use crate::doctor::collect;

/// What cleanup did; `forced` lists what needed its finalizers stripped.
#[derive(Clone, Debug, Default, Serialize, serde::Deserialize)]
pub struct CleanupReport {
    /// Node faults undone before anything else.
    pub reverted: Vec<String>,
    pub deleted: Vec<String>,
    pub forced: Vec<String>,
    pub leaked: Vec<String>,
}

impl CleanupReport {
    pub fn is_clean(&self) -> bool {
        self.leaked.is_empty()
    }
}

async fn delete(client: &Client, c: &Created, force: bool, report: &mut CleanupReport) {
    // A type no longer served (its CRD deleted) has no objects left to
    // delete; a failed discovery is asked again, briefly.
    let mut served = resolve_if_served(client, &c.api_version, &c.kind).await;
    for _ in 0..5 {
        if served.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        served = resolve_if_served(client, &c.api_version, &c.kind).await;
    }
    let Ok(Some((ar, caps))) = served else {
        return;
    };
    let api = api_for(client, &ar, &caps, c.namespace.as_deref());
    let label = c.to_string();
    // Already gone, or unreadable: nothing cleanup can do here; a leak is
    // caught by the final check that everything is gone.
    let Ok(Some(obj)) = api.get_opt(&c.name).await else {
        return;
    };
    if obj.metadata.uid.as_deref() != Some(c.uid.as_str()) {
        // Not (or no longer) the object this run created.
        return;
    }
    let finalizers = obj.metadata.finalizers.clone().unwrap_or_default();
    if force && !finalizers.is_empty() {
        let patch = serde_json::json!([
            {"op": "test", "path": "/metadata/uid", "value": c.uid},
            {"op": "test", "path": "/metadata/finalizers", "value": finalizers},
            {"op": "replace", "path": "/metadata/finalizers", "value": []},
        ]);
        if let Ok(patch) = serde_json::from_value::<json_patch::Patch>(patch)
            && api
                .patch(&c.name, &PatchParams::default(), &Patch::<()>::Json(patch))
                .await
                .is_ok()
        {
            report.forced.push(label.clone());
        }
    }
    let dp = DeleteParams {
        preconditions: Some(kube::api::Preconditions {
            uid: Some(c.uid.clone()),
            resource_version: None,
        }),
        ..DeleteParams::background()
    };
    if obj.metadata.deletion_timestamp.is_none() && api.delete(&c.name, &dp).await.is_ok() {
        report.deleted.push(label);
    }
}

/// Whether the object this run created is gone; `Err` says what was
/// seen instead (the object, or the error that kept cleanup from telling).
async fn gone(client: &Client, c: &Created) -> Result<(), String> {
    let (ar, caps) = match resolve_if_served(client, &c.api_version, &c.kind).await {
        Ok(Some(found)) => found,
        // Its type is not served any more: no object of it exists.
        Ok(None) => return Ok(()),
        // Discovery failed: ask again on the next round.
        Err(e) => return Err(format!("discovery of {} failed: {e}", c.api_version)),
    };
    // An object of that name with another UID is not ours: ours is gone.
    match api_for(client, &ar, &caps, c.namespace.as_deref())
        .get_opt(&c.name)
        .await
    {
        Ok(None) => Ok(()),
        Ok(Some(o)) if o.metadata.uid.as_deref() != Some(c.uid.as_str()) => Ok(()),
        Ok(Some(o)) => Err(format!(
            "still there (deletionTimestamp {:?}, finalizers {:?})",
            o.metadata.deletion_timestamp.map(|t| t.0.to_string()),
            o.metadata.finalizers.unwrap_or_default()
        )),
        Err(e) => Err(format!("reading it failed: {e}")),
    }
}

/// A registration that can block deletes: removed before anything else.
fn is_blocker(c: &Created) -> bool {
    matches!(
        c.kind.as_str(),
        "APIService" | "ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration"
    )
}

pub async fn cleanup(client: &Client, created: &[Created]) -> CleanupReport {
    let mut report = CleanupReport::default();
    // 1. Registrations that block deletes.
    for c in created.iter().rev().filter(|c| is_blocker(c)) {
        delete(client, c, false, &mut report).await;
    }
    // 2. Namespaced objects and the namespaces, forcing the harness's own stuck leftovers.
    for c in created.iter().rev().filter(|c| c.namespace.is_some()) {
        delete(client, c, false, &mut report).await;
    }
    for c in created.iter().filter(|c| c.kind == "Namespace") {
        delete(client, c, false, &mut report).await;
    }
    let namespaces: Vec<&Created> = created.iter().filter(|c| c.kind == "Namespace").collect();
    for round in 0..60 {
        let mut pending = Vec::new();
        for c in &namespaces {
            if gone(client, c).await.is_err() {
                pending.push(*c);
            }
        }
        if pending.is_empty() {
            break;
        }
        if round >= 3 {
            // Still there after a few seconds: something inside holds a
            // finalizer no one will remove (a failed scenario's fault).
            force_namespace_content(client, &pending, &mut report).await;
        }
        if round >= 10 {
            // A metadata finalizer the run's own manifest put on the
            // namespace (a failed namespace-finalizer scenario): the
            // namespace is this run's (its UID is checked), so is the
            // finalizer. spec.finalizers stays the namespace
            // controller's to clear once the content is gone.
            for c in &pending {
                delete(client, c, true, &mut report).await;
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    // 3. The rest (CRDs and other cluster-scoped objects), newest first.
    for c in created
        .iter()
        .rev()
        .filter(|c| c.namespace.is_none() && c.kind != "Namespace" && !is_blocker(c))
    {
        delete(client, c, true, &mut report).await;
    }
    for c in created {
        let mut left = gone(client, c).await;
        for _ in 0..30 {
            if left.is_ok() {
                break;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
            left = gone(client, c).await;
        }
        if let Err(seen) = left {
            report.leaked.push(format!("{c}: {seen}"));
        }
    }
    report
}

async fn force_namespace_content(
    client: &Client,
    pending: &[&Created],
    report: &mut CleanupReport,
) {
    let Ok((snapshot, _)) = collect::collect(client).await else {
        return;
    };
    for c in pending {
        for rec in snapshot.content_of(&c.name) {
            if rec
                .metadata
                .finalizers
                .as_ref()
                .is_some_and(|f| !f.is_empty())
            {
                let created = Created {
                    api_version: rec.api_version.clone(),
                    kind: rec.kind.clone(),
                    namespace: rec.metadata.namespace.clone(),
                    name: rec.metadata.name.clone().unwrap_or_default(),
                    // Content of this run's namespace (checked by UID
                    // above), created by it or by controllers for it.
                    uid: rec.metadata.uid.clone().unwrap_or_default(),
                };
                delete(client, &created, true, report).await;
            }
        }
    }
}
