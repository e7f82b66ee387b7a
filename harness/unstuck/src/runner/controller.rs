//! A small live controller of the harness's own, for scenarios that must
//! prove the doctor leaves a finalizer with a live owner alone. It behaves
//! like a real operator in the ways the doctor can see from outside: it
//! holds a fresh leader-election Lease named after its finalizer's domain
//! (unless told to run without one, as a controller without leader
//! election does), it writes to the objects it is cleaning up under a
//! field manager named for its product, and it does finish its finalizer,
//! only slowly.

use std::time::Duration;

use k8s_openapi::{
    api::{
        coordination::v1::Lease,
        core::v1::{ConfigMap, Event, Namespace},
    },
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
    jiff::Timestamp,
};
use kube::{
    Api, Client,
    api::{DynamicObject, ListParams, Patch, PatchParams, PostParams},
};
use tokio::task::JoinHandle;
use unstuck_core::scenario::ControllerCleanup;

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

/// What the controller is told; namespaces are the run's real ones.
pub struct ControllerConfig {
    /// Where it runs and holds its Lease; it stops once this namespace is
    /// being deleted.
    pub namespace: String,
    /// Namespaces whose objects it serves.
    pub watches: Vec<String>,
    pub finalizer: String,
    pub finish_after: Duration,
    pub lease: bool,
    /// What its cleanup does, its text in the run's names.
    pub cleanup: ControllerCleanup,
}

/// Starts the controller.
pub fn start(client: Client, config: ControllerConfig) -> LiveController {
    let what = description(&config);
    let task = tokio::spawn(serve(client, config));
    LiveController { task, what }
}

/// What the controller is, in a line for the step's evidence.
fn description(config: &ControllerConfig) -> String {
    let ControllerConfig {
        namespace,
        watches,
        finalizer,
        lease,
        cleanup,
        ..
    } = config;
    let domain = finalizer.split('/').next().unwrap_or_default();
    let serves = if *watches == [namespace.clone()] {
        String::new()
    } else {
        format!(", serving {}", watches.join(", "))
    };
    let how = match cleanup {
        ControllerCleanup::Finish => String::new(),
        ControllerCleanup::Fail { reason, .. } => {
            format!("; its cleanup always fails (Warning {reason} at each retry)")
        }
        ControllerCleanup::CreateConfigMap => {
            "; its cleanup must first create a ConfigMap in the object's namespace".to_string()
        }
    };
    if *lease {
        format!(
            "live controller for {finalizer} running in {namespace}{serves}, holding Lease {namespace}/{domain}{how}"
        )
    } else {
        format!(
            "live controller for {finalizer} running in {namespace}{serves} without a Lease, writing to what it cleans up as field manager {}{how}",
            manager_of(finalizer)
        )
    }
}

/// The controller's loop, until its namespace goes or the task is aborted.
async fn serve(client: Client, config: ControllerConfig) {
    let ControllerConfig {
        namespace,
        watches,
        finalizer,
        finish_after,
        lease,
        cleanup,
    } = config;
    let domain = finalizer.split('/').next().unwrap_or_default().to_string();
    let leases: Api<Lease> = Api::namespaced(client.clone(), &namespace);
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let holder = format!("unstuck-live-controller-{namespace}");
    let mut types: Vec<collect::ListableType> = Vec::new();
    // Paced by the clock, not by passes: one pass lists every namespaced
    // type and takes far longer than 2 s on a loaded machine, and a
    // cadence counted in passes then stretched a 10 s retry to minutes.
    let mut last_discovery: Option<std::time::Instant> = None;
    let mut last_retry: Option<std::time::Instant> = None;
    let due = |last: Option<std::time::Instant>| {
        last.is_none_or(|t| t.elapsed() >= Duration::from_secs(10))
    };
    loop {
        // Its pod dies with its namespace (pixie-io/pixie#1917: the
        // owner deleted together with what it must finalize).
        if let Ok(ns) = namespaces.get_opt(&namespace).await
            && ns.is_none_or(|n| n.metadata.deletion_timestamp.is_some())
        {
            tracing::debug!("live controller in {namespace}: its namespace is going, it stops");
            return;
        }
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
        if (due(last_discovery) || types.is_empty())
            && let Ok(d) = collect::discover(&client).await
        {
            types = d.types.into_iter().filter(|t| t.namespaced).collect();
            last_discovery = Some(std::time::Instant::now());
        }
        // Every 10 s, as a controller requeueing its work would; a
        // failing cleanup is retried at the same pace. The heartbeat
        // only without a Lease: the Lease case stays the plain one.
        let retry = due(last_retry);
        if retry {
            last_retry = Some(std::time::Instant::now());
        }
        let beat = !lease && retry;
        let job = Job {
            client: &client,
            finalizer: &finalizer,
            after: finish_after,
            now,
            beat,
            retry,
            cleanup: &cleanup,
        };
        for ns in &watches {
            for t in &types {
                job.finish_due(ns, t).await;
            }
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

/// One pass of the controller over one type in one namespace.
struct Job<'a> {
    client: &'a Client,
    finalizer: &'a str,
    after: Duration,
    now: Timestamp,
    beat: bool,
    retry: bool,
    cleanup: &'a ControllerCleanup,
}

impl Job<'_> {
    async fn finish_due(&self, ns: &str, t: &collect::ListableType) {
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), ns, &t.api_resource());
        let Ok(list) = api.list_metadata(&ListParams::default()).await else {
            return;
        };
        for item in list.items {
            let finalizers = item.metadata.finalizers.clone().unwrap_or_default();
            if !finalizers.iter().any(|f| f == self.finalizer) {
                continue;
            }
            let Some(name) = item.metadata.name.as_deref() else {
                continue;
            };
            // Reconciling what it owns, deleting or not, leaves a write.
            let due = item.metadata.deletion_timestamp.as_ref().is_some_and(|d| {
                self.now.duration_since(d.0).as_secs_f64() >= self.after.as_secs_f64()
            });
            if !due {
                if self.beat {
                    heartbeat(&api, name, self.finalizer, self.now).await;
                }
                continue;
            }
            let done = match self.cleanup {
                ControllerCleanup::Finish => Ok(()),
                ControllerCleanup::Fail { reason, message } => {
                    Err((reason.to_string(), message.to_string()))
                }
                ControllerCleanup::CreateConfigMap => self.create_config_map(ns, name).await,
            };
            match done {
                Ok(()) => remove_finalizer(&api, name, &finalizers, self.finalizer).await,
                Err((reason, message)) if self.retry => {
                    self.warn(ns, t, &item.metadata, &reason, &message).await;
                    // In a Terminating namespace an Event is new content
                    // and refused too; the object's own status is where
                    // the error stays visible, as operators report it.
                    set_failed_condition(&api, name, &reason, &message, self.now).await;
                }
                Err(_) => {}
            }
        }
    }

    /// The cleanup step of nova-operator#500: a ConfigMap in the object's
    /// namespace. `Err` carries the event to report.
    async fn create_config_map(&self, ns: &str, name: &str) -> Result<(), (String, String)> {
        let cms: Api<ConfigMap> = Api::namespaced(self.client.clone(), ns);
        let cm: ConfigMap = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("cleanup-{name}")},
            "data": {"finalizer": self.finalizer}
        }))
        .map_err(|e| ("CleanupFailed".to_string(), e.to_string()))?;
        match cms.create(&PostParams::default(), &cm).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(ae)) if ae.code == 409 => Ok(()),
            Err(kube::Error::Api(ae)) => Err((
                "CleanupFailed".to_string(),
                format!("creating ConfigMap cleanup-{name}: {}", ae.message),
            )),
            Err(e) => Err((
                "CleanupFailed".to_string(),
                format!(
                    "creating ConfigMap cleanup-{name}: {}",
                    crate::kube_error::text(&e)
                ),
            )),
        }
    }

    /// Reports a Warning event on the object, from a component named for
    /// the controller's product (what `kubectl describe` shows).
    async fn warn(
        &self,
        ns: &str,
        t: &collect::ListableType,
        meta: &ObjectMeta,
        reason: &str,
        message: &str,
    ) {
        let events: Api<Event> = Api::namespaced(self.client.clone(), ns);
        let component = manager_of(self.finalizer);
        let now = self.now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
        let event = serde_json::json!({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"generateName": format!("{}.", meta.name.as_deref().unwrap_or("object"))},
            "involvedObject": {
                "apiVersion": t.api_version, "kind": t.kind, "namespace": ns,
                "name": meta.name, "uid": meta.uid
            },
            "type": "Warning", "reason": reason, "message": message,
            "source": {"component": component},
            "reportingComponent": component,
            "firstTimestamp": now, "lastTimestamp": now, "count": 1
        });
        match serde_json::from_value::<Event>(event) {
            Ok(e) => {
                if let Err(err) = events.create(&PostParams::default(), &e).await {
                    tracing::debug!("live controller: reporting {reason} failed: {err}");
                }
            }
            Err(err) => tracing::debug!("live controller: event {reason}: {err}"),
        }
    }
}

/// Sets `status.conditions[type=Ready]` to False with the cleanup's error.
async fn set_failed_condition(
    api: &Api<DynamicObject>,
    name: &str,
    reason: &str,
    message: &str,
    now: Timestamp,
) {
    let patch = serde_json::json!({"status": {"conditions": [{
        "type": "Ready", "status": "False", "reason": reason, "message": message,
        "lastTransitionTime": now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
    }]}});
    if let Err(e) = api
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        tracing::debug!("live controller: status of {name}: {e}");
    }
}

async fn remove_finalizer(
    api: &Api<DynamicObject>,
    name: &str,
    finalizers: &[String],
    finalizer: &str,
) {
    let kept: Vec<&String> = finalizers.iter().filter(|f| *f != finalizer).collect();
    let patch = serde_json::json!([
        {"op": "test", "path": "/metadata/finalizers", "value": finalizers},
        {"op": "replace", "path": "/metadata/finalizers", "value": kept},
    ]);
    // As a real controller does, a failed write is logged and tried again
    // on its next pass (the `test` fails when the list changed meanwhile).
    match serde_json::from_value::<json_patch::Patch>(patch) {
        Ok(p) => {
            if let Err(e) = api
                .patch(name, &PatchParams::default(), &Patch::<()>::Json(p))
                .await
            {
                tracing::debug!("live controller: removing {finalizer} from {name}: {e}");
            }
        }
        Err(e) => tracing::warn!("live controller: the patch for {name} is malformed: {e}"),
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
