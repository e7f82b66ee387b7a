//! What both providers wait for before a new cluster is handed out: the
//! node Ready, the `default` ServiceAccount (pods are refused until the
//! service account controller has made it) and unstuck's identity mark.
//! Each probe answers once; the provider's own wait loop asks again and
//! names what it was waiting for when time runs out.

use k8s_openapi::api::core::v1::{Node, ServiceAccount};
use kube::{Api, Client};

use crate::wait::Poll;

/// Whether node `name` is registered with `Ready=True`; else what it shows.
pub async fn node_ready(client: &Client, name: &str) -> Poll<()> {
    let nodes: Api<Node> = Api::all(client.clone());
    match nodes.get_opt(name).await {
        Ok(Some(node)) => match ready_condition(&node) {
            Ok(()) => Poll::Ready(()),
            Err(why) => Poll::Pending(why.to_string()),
        },
        Ok(None) => Poll::Pending(format!("node {name} not registered yet")),
        Err(e) => Poll::Pending(e.to_string()),
    }
}

/// Whether the `default` ServiceAccount of namespace `default` exists.
pub async fn default_service_account(client: &Client) -> Poll<()> {
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), "default");
    match sas.get_opt("default").await {
        Ok(Some(_)) => Poll::Ready(()),
        Ok(None) => Poll::Pending("not created yet".into()),
        Err(e) => Poll::Pending(e.to_string()),
    }
}

/// Marks the cluster as unstuck's (`kube-system/unstuck-cluster`), so the
/// identity guard of `unstuck run` and the doctor knows it.
pub async fn marked(client: &Client) -> Poll<()> {
    match super::identity::mark(client).await {
        Ok(()) => Poll::Ready(()),
        Err(e) => Poll::Pending(e.to_string()),
    }
}

/// Why a node is not Ready yet.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum NotReady {
    #[error("no Ready condition yet")]
    NoCondition,
    #[error("Ready={status} ({reason}): {message}")]
    Condition {
        status: String,
        reason: String,
        message: String,
    },
}

/// `Ok` for a node whose `Ready` condition is `True`; else the condition.
pub fn ready_condition(node: &Node) -> Result<(), NotReady> {
    let conds = node.status.as_ref().and_then(|s| s.conditions.as_ref());
    match conds.and_then(|c| c.iter().find(|c| c.type_ == "Ready")) {
        Some(c) if c.status == "True" => Ok(()),
        Some(c) => Err(NotReady::Condition {
            status: c.status.clone(),
            reason: c.reason.clone().unwrap_or_default(),
            message: c.message.clone().unwrap_or_default(),
        }),
        None => Err(NotReady::NoCondition),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(conditions: serde_json::Value) -> Node {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "n"},
            "status": {"conditions": conditions}
        }))
        .unwrap()
    }

    #[test]
    fn a_node_is_ready_only_with_ready_true_and_says_why_not() {
        assert_eq!(
            ready_condition(&node(serde_json::json!([
                {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory"},
                {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status"}
            ]))),
            Ok(())
        );
        // The kubelet's wording while no CNI configuration is loaded.
        assert_eq!(
            ready_condition(&node(serde_json::json!([
                {"type": "Ready", "status": "False", "reason": "KubeletNotReady",
                 "message": "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized"}
            ])))
            .unwrap_err()
            .to_string(),
            "Ready=False (KubeletNotReady): container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized"
        );
        assert_eq!(
            ready_condition(&node(serde_json::json!([])))
                .unwrap_err()
                .to_string(),
            "no Ready condition yet"
        );
    }
}
