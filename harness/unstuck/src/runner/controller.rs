//! A small live controller of the harness's own, for scenarios that must
//! prove the doctor leaves a finalizer with a live owner alone. It behaves
//! like a real operator in the ways the doctor can see from outside: it
//! holds a fresh leader-election Lease named after its finalizer's domain
//! (unless told to run without one, as a controller without leader
//! election does), it writes to the objects it is cleaning up under a
//! field manager named for its product, and it does finish its finalizer,
//! only slowly.

use std::time::Duration;

use k8s_openapi::{api::coordination::v1::Lease, jiff::Timestamp};
use kube::{
    Api, Client,
    api::{DynamicObject, ListParams, Patch, PatchParams},
};
use tokio::task::JoinHandle;

use crate::doctor::collect;

/// A running controller; dropping it stops it.
pub struct LiveController {
    task: JoinHandle<()>,
    what: String,
}

impl LiveController {
    /// What it is and what it leaves behind, for the step's evidence.
    pub fn describe(&self) -> String {
        self.what.clone()
    }
}

/// The field manager it writes under: its product's name (the first label
/// of the finalizer's domain), as `cert-manager` or `argocd-controller`
/// write under theirs.
fn manager_of(finalizer: &str) -> String {
    let domain = finalizer.split('/').next().unwrap_or_default();
    format!(
        "{}-controller",
        domain.split('.').next().unwrap_or_default()
    )
}

impl Drop for LiveController {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Starts the controller for `finalizer` in `namespace`.
pub fn start(
    client: Client,
    namespace: String,
    finalizer: String,
    finish_after: Duration,
    lease: bool,
) -> LiveController {
    let domain = finalizer.split('/').next().unwrap_or_default().to_string();
    let what = if lease {
        format!(
            "live controller for {finalizer} running in {namespace}, holding Lease {namespace}/{domain}"
        )
    } else {
        format!(
            "live controller for {finalizer} running in {namespace} without a Lease, writing to what it cleans up as field manager {}",
            manager_of(&finalizer)
        )
    };
    let task = tokio::spawn(async move {
        let leases: Api<Lease> = Api::namespaced(client.clone(), &namespace);
        let holder = format!("unstuck-live-controller-{namespace}");
        let mut tick = 0u64;
        let mut types: Vec<collect::ListableType> = Vec::new();
        loop {
            let now = Timestamp::now();
            let lease_object = serde_json::json!({
                "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": domain, "namespace": namespace},
                "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15,
                         "renewTime": now.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()}
            });
            if lease
                && let Err(e) = leases
                    .patch(
                        &domain,
                        &PatchParams::apply("unstuck-live-controller").force(),
                        &Patch::Apply(&lease_object),
                    )
                    .await
            {
                tracing::debug!("live controller: lease renewal failed: {e}");
            }
            if tick.is_multiple_of(5)
                && let Ok(d) = collect::discover(&client).await
            {
                types = d.types.into_iter().filter(|t| t.namespaced).collect();
            }
            // Every 10 s, as a controller requeueing its work would. Only
            // without a Lease: the Lease case stays the plain one.
            let beat = !lease && tick.is_multiple_of(5);
            for t in &types {
                finish_due(&client, &namespace, t, &finalizer, finish_after, now, beat).await;
            }
            tick += 1;
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
    });
    LiveController { task, what }
}

async fn finish_due(
    client: &Client,
    ns: &str,
    t: &collect::ListableType,
    finalizer: &str,
    after: Duration,
    now: Timestamp,
    beat: bool,
) {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &t.api_resource());
    let Ok(list) = api.list_metadata(&ListParams::default()).await else {
        return;
    };
    for item in list.items {
        let finalizers = item.metadata.finalizers.clone().unwrap_or_default();
        if !finalizers.iter().any(|f| f == finalizer) {
            continue;
        }
        // Reconciling what it owns, deleting or not, leaves a write.
        let due = item
            .metadata
            .deletion_timestamp
            .as_ref()
            .is_some_and(|d| now.duration_since(d.0).as_secs_f64() >= after.as_secs_f64());
        if !due {
            if beat && let Some(name) = item.metadata.name.as_deref() {
                heartbeat(&api, name, finalizer, now).await;
            }
            continue;
        }
        let kept: Vec<&String> = finalizers.iter().filter(|f| *f != finalizer).collect();
        let patch = serde_json::json!([
            {"op": "test", "path": "/metadata/finalizers", "value": finalizers},
            {"op": "replace", "path": "/metadata/finalizers", "value": kept},
        ]);
        if let (Some(name), Ok(p)) = (
            item.metadata.name.as_deref(),
            serde_json::from_value::<json_patch::Patch>(patch),
        ) {
            let _ = api
                .patch(name, &PatchParams::default(), &Patch::<()>::Json(p))
                .await;
        }
    }
}

/// Records progress on an object it is cleaning up: the write lands in the
/// object's managedFields under this controller's field manager.
async fn heartbeat(api: &Api<DynamicObject>, name: &str, finalizer: &str, now: Timestamp) {
    let domain = finalizer.split('/').next().unwrap_or_default();
    let patch = serde_json::json!({"metadata": {"annotations": {
        format!("{domain}/cleanup-progress"): now.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
    }}});
    let pp = PatchParams {
        field_manager: Some(manager_of(finalizer)),
        ..PatchParams::default()
    };
    if let Err(e) = api.patch(name, &pp, &Patch::Merge(&patch)).await {
        tracing::debug!("live controller: heartbeat on {name} failed: {e}");
    }
}
