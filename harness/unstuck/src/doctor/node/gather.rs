//! Gathering what a node shows about one stuck pod: the pod and its
//! events from the API, the node's standing (Ready condition, Lease), its
//! mounts, processes, runtime view, kubelet log and CNI configuration,
//! into the [`NodeFacts`] the pure diagnosis reads.

use k8s_openapi::{
    api::{
        coordination::v1::Lease,
        core::v1::{Event, Node as K8sNode, NodeCondition, Pod},
    },
    jiff::Timestamp,
};
use kube::{Api, Client, api::ListParams};
use unstuck_core::doctor::node::{CniFacts, NodeFacts, klog_records, pod_dir};

use unstuck_core::doctor::snapshot::status_container_ids;

use crate::node::{Node, runtime_facts};

use super::{NodeDoctorError, api, freezer};

/// Collects what the node shows about one pod; `None` when the pod is not
/// in the API.
pub async fn gather(
    client: &Client,
    node: &dyn Node,
    namespace: &str,
    name: &str,
    log_tail_bytes: u64,
) -> Result<Option<NodeFacts>, NodeDoctorError> {
    let taken_at = Timestamp::now();
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let Some(pod) = pods
        .get_opt(name)
        .await
        .map_err(api(format!("reading pod {namespace}/{name}")))?
    else {
        return Ok(None);
    };
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let events: Api<Event> = Api::namespaced(client.clone(), namespace);
    let pod_events = events
        .list(&ListParams::default().fields(&format!("involvedObject.uid={uid}")))
        .await
        .map_err(api(format!("listing events of pod {namespace}/{name}")))?
        .items;
    let from_status = status_container_ids(&pod);
    let runtime = runtime_facts(node, &uid, &from_status).await;
    let mut ids = runtime.ids();
    ids.extend(from_status);
    let key = format!("{namespace}/{name}");
    let log = node.kubelet_log_tail(log_tail_bytes).await?;
    let kubelet_log_available = log.is_some();
    let quoted_key = format!("\"{key}\"");
    let kubelet_log: Vec<String> = klog_records(&log.unwrap_or_default())
        .into_iter()
        .filter(|l| {
            (!uid.is_empty() && l.contains(&uid))
                || l.contains(&quoted_key)
                || ids.iter().any(|id| l.contains(id.as_str()))
        })
        .collect();
    let dir = pod_dir(node.kubelet_dir(), &uid);
    let mounts = node
        .mounts()
        .await?
        .into_iter()
        .filter(|m| m.mount_point.starts_with(&dir))
        .collect();
    let holders = node.holders_of(&dir).await?;
    let processes = node.pod_processes(&uid).await?;
    let kubelet_running = match node.kubelet_running().await {
        Ok(r) => Some(r),
        Err(e) => {
            tracing::warn!("cannot tell whether the kubelet runs: {e}");
            None
        }
    };
    let (node_ready, node_lease_renewed) = node_standing(client, node.name()).await;
    let cni = cni_facts(node).await;
    let cgroups = freezer::cgroup_facts(node, &uid).await;
    Ok(Some(NodeFacts {
        taken_at,
        node: node.name().to_owned(),
        kubelet_dir: node.kubelet_dir().to_path_buf(),
        pod,
        pod_events,
        kubelet_log,
        kubelet_log_available,
        mounts,
        holders,
        runtime,
        kubelet_running,
        node_ready,
        node_lease_renewed,
        processes,
        cni,
        cgroups,
    }))
}

/// The node's CNI configuration directory and what is in it (best effort:
/// a node that cannot say gives `None`).
async fn cni_facts(node: &dyn Node) -> Option<CniFacts> {
    let place = node.cni_config()?;
    let configs = match node.list_dir(&place.conf_dir).await {
        Ok(names) => names
            .into_iter()
            .filter(|n| n.ends_with(".conf") || n.ends_with(".conflist") || n.ends_with(".json"))
            .collect(),
        Err(e) => {
            tracing::warn!("cannot list {}: {e}", place.conf_dir.display());
            return None;
        }
    };
    Some(CniFacts {
        conf_dir: place.conf_dir,
        configs,
        own: place.own,
    })
}

/// The node's `Ready` condition and its Lease's last renewal, as the API
/// shows them. Best effort: a doctor that may not read Nodes or Leases
/// still diagnoses from the rest.
async fn node_standing(
    client: &Client,
    node_name: &str,
) -> (Option<NodeCondition>, Option<Timestamp>) {
    let nodes: Api<K8sNode> = Api::all(client.clone());
    let ready = match nodes.get_opt(node_name).await {
        Ok(n) => n
            .and_then(|n| n.status)
            .and_then(|s| s.conditions)
            .and_then(|cs| cs.into_iter().find(|c| c.type_ == "Ready")),
        Err(e) => {
            tracing::warn!("reading node {node_name}: {e}");
            None
        }
    };
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let renewed = match leases.get_opt(node_name).await {
        Ok(l) => l
            .and_then(|l| l.spec)
            .and_then(|s| s.renew_time)
            .map(|t| t.0),
        Err(e) => {
            tracing::warn!("reading lease kube-node-lease/{node_name}: {e}");
            None
        }
    };
    (ready, renewed)
}
