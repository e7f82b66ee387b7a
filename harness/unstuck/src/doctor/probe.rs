//! The collector's timed calls to backends that are there but failing:
//! for a webhook ([`unstuck_core::doctor::backend::probe_targets`] chooses
//! what) a `dryRun=All` DELETE with a UID precondition, which goes through
//! admission and writes nothing; for an aggregated API
//! ([`unstuck_core::doctor::backend::api_service_probe_targets`]) the
//! discovery GET of its group/version, which reads nothing but the
//! backend's answer.

use std::time::{Duration, Instant};

use kube::{
    Api, Client,
    api::{ApiResource, DeleteParams, DynamicObject, Preconditions},
};
use unstuck_core::doctor::{
    Snapshot,
    backend::{ApiServiceProbe, WebhookProbe, api_service_probe_targets, probe_targets},
};

/// Longer than any webhook's `timeoutSeconds` (at most 30).
const PROBE_TIMEOUT: Duration = Duration::from_secs(35);
/// How long a discovery call to an aggregated API is waited for. Measured
/// on v1.34.4: the aggregator answers 503 at once for an APIService it
/// holds unavailable, so the call shows that clients fail now (the
/// condition may be older than the backend's repair), not how long the
/// backend takes; the limit only bounds an aggregator that does proxy.
const DISCOVERY_PROBE_LIMIT: Duration = Duration::from_secs(10);

/// Times each failing webhook once: the first of its candidates the
/// apiserver rejects (or the last tried) is kept in the snapshot.
pub async fn probe(client: &Client, snapshot: &mut Snapshot) {
    let mut probes: Vec<WebhookProbe> = Vec::new();
    for (webhook, r) in probe_targets(snapshot) {
        let ns = r.namespace().unwrap_or_default();
        let name = r.metadata.name.clone().unwrap_or_default();
        // One per webhook and namespace: the first object it rejects.
        let same = |p: &WebhookProbe| p.webhook == webhook && p.object.contains(&format!(" {ns}/"));
        if probes.iter().any(|p| same(p) && p.error.is_some()) {
            continue;
        }
        let (group, version) = match r.api_version.split_once('/') {
            Some((g, v)) => (g.to_string(), v.to_string()),
            None => (String::new(), r.api_version.clone()),
        };
        let ar = ApiResource {
            group,
            version,
            api_version: r.api_version.clone(),
            kind: r.kind.clone(),
            plural: r.resource.clone(),
        };
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &ar);
        let dp = DeleteParams {
            dry_run: true,
            preconditions: r.metadata.uid.clone().map(|uid| Preconditions {
                uid: Some(uid),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        let started = Instant::now();
        let answer = tokio::time::timeout(PROBE_TIMEOUT, api.delete(&name, &dp)).await;
        let error = match answer {
            Ok(Ok(_)) => None,
            Ok(Err(e)) => Some(crate::kube_error::text(&e)),
            Err(_) => Some(format!(
                "no answer within {}",
                unstuck_core::duration::Duration::from(PROBE_TIMEOUT)
            )),
        };
        probes.retain(|p| !same(p));
        probes.push(WebhookProbe {
            webhook,
            object: format!("{} {ns}/{name}", r.kind),
            elapsed_ms: started.elapsed().as_millis() as u64,
            error,
        });
    }
    snapshot.webhook_probes = probes;
    snapshot.api_service_probes = probe_api_services(client, snapshot).await;
}

/// Times the discovery call of each aggregated API whose backend is there
/// but whose APIService is unavailable.
async fn probe_api_services(client: &Client, snapshot: &Snapshot) -> Vec<ApiServiceProbe> {
    let mut out = Vec::new();
    for (api_service, group_version) in api_service_probe_targets(snapshot) {
        let request = http::Request::get(format!("/apis/{group_version}"))
            .body(Vec::new())
            .expect("a GET of a path is a request");
        let started = Instant::now();
        let answer =
            tokio::time::timeout(DISCOVERY_PROBE_LIMIT, client.request_text(request)).await;
        let error = match answer {
            Ok(Ok(_)) => None,
            Ok(Err(e)) => Some(crate::kube_error::text(&e)),
            Err(_) => Some(format!(
                "no answer within {}",
                unstuck_core::duration::Duration::from(DISCOVERY_PROBE_LIMIT)
            )),
        };
        out.push(ApiServiceProbe {
            api_service,
            group_version,
            elapsed_ms: started.elapsed().as_millis() as u64,
            error,
        });
    }
    out
}
