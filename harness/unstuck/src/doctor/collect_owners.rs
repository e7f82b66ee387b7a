//! Reads what the finalizer-owner evidence needs beyond the core snapshot:
//! every Deployment, StatefulSet and DaemonSet. A list that fails (a 403
//! for an RBAC-limited user, a timeout) is recorded in
//! `Snapshot::unreadable`, never an error: the doctor then keeps such
//! keys `Unknown` instead of arguing their owner dead.

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
use kube::{Api, Client, api::ListParams};
use serde::de::DeserializeOwned;
use unstuck_core::doctor::snapshot::{Snapshot, Unreadable};

/// Lists one type across the cluster, page by page.
async fn list_all<K>(client: &Client) -> Result<Vec<K>, kube::Error>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    let api: Api<K> = Api::all(client.clone());
    let mut lp = ListParams::default().limit(500);
    let mut out = Vec::new();
    loop {
        let page = api.list(&lp).await?;
        out.extend(page.items);
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => lp = lp.continue_token(&token),
            _ => return Ok(out),
        }
    }
}

fn keep<K>(
    resource: &str,
    r: Result<Vec<K>, kube::Error>,
    unreadable: &mut Vec<Unreadable>,
) -> Vec<K> {
    r.unwrap_or_else(|e| {
        unreadable.push(Unreadable {
            resource: resource.to_owned(),
            message: e.to_string(),
        });
        Vec::new()
    })
}

/// Fills the snapshot's workload lists; failures become `unreadable`.
pub async fn collect(client: &Client, snapshot: &mut Snapshot) {
    let (deployments, stateful_sets, daemon_sets) = tokio::join!(
        list_all::<Deployment>(client),
        list_all::<StatefulSet>(client),
        list_all::<DaemonSet>(client),
    );
    let u = &mut snapshot.unreadable;
    snapshot.deployments = keep("deployments.apps", deployments, u);
    snapshot.stateful_sets = keep("statefulsets.apps", stateful_sets, u);
    snapshot.daemon_sets = keep("daemonsets.apps", daemon_sets, u);
}
