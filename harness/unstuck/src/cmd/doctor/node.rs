//! The node half of `unstuck doctor --local-cluster NAME` (or
//! `--kind-cluster`): the cluster unstuck made that is named, and its
//! node's stuck pods, looked at and, with consent, healed.

use std::path::PathBuf;

use anyhow::Result;
use unstuck::cluster::provider::{AnyProvider, CreateOptions, ProviderKind, provider};
use unstuck::components::DEFAULT_K8S_VERSION;
use unstuck::doctor::node::{HealOutcome, NodeDoctorReport};

use super::DoctorArgs;

/// The cluster unstuck made that `--local-cluster`/`--kind-cluster`
/// names, with its provider; `None` for neither.
fn named_cluster(args: &DoctorArgs) -> Option<(AnyProvider, &str)> {
    let (kind, name) = match (&args.local_cluster, &args.kind_cluster) {
        (Some(name), _) => (ProviderKind::Local, name),
        (None, Some(name)) => (ProviderKind::Kind, name),
        (None, None) => return None,
    };
    let p = provider(kind, CreateOptions::owned(DEFAULT_K8S_VERSION, None));
    Some((p, name.as_str()))
}

/// The kubeconfig of the cluster `--local-cluster`/`--kind-cluster` names.
pub(super) fn named_kubeconfig(args: &DoctorArgs) -> Result<Option<PathBuf>> {
    let Some((p, name)) = named_cluster(args) else {
        return Ok(None);
    };
    let c = p.status(name).ok_or_else(|| {
        anyhow::anyhow!(
            "no {} cluster named '{name}' made by unstuck; `unstuck cluster list` shows them",
            p.kind()
        )
    })?;
    Ok(Some(c.kubeconfig))
}

/// The node half of `unstuck doctor --local-cluster NAME`, looking
/// only: each stuck pod's diagnosis and ladder.
pub(super) async fn node_look(
    client: &kube::Client,
    args: &DoctorArgs,
    stuck_after: std::time::Duration,
) -> Result<Vec<NodeDoctorReport>> {
    use unstuck::doctor::node::{HealOptions, heal_pod, stuck_pods};
    let Some((p, name)) = named_cluster(args) else {
        return Ok(Vec::new());
    };
    let node = p.node(name).await?;
    let opts = HealOptions {
        stuck_after,
        ..HealOptions::default()
    };
    let mut reports = Vec::new();
    for p in stuck_pods(client, node.name(), stuck_after).await? {
        if !args.namespaces.is_empty() && !args.namespaces.contains(&p.namespace) {
            continue;
        }
        reports.push(heal_pod(client, node.as_ref(), &p.namespace, &p.name, &opts).await?);
    }
    Ok(reports)
}

/// The node half with `--apply`: the node is a person's own machine, so
/// consent is what [`node_look`] showed. Each pod shown is healed with
/// only the rungs its shown ladder covers; a pod stuck now that was not
/// shown is diagnosed and said, and nothing is done to it.
pub(super) async fn node_apply(
    client: &kube::Client,
    args: &DoctorArgs,
    stuck_after: std::time::Duration,
    shown: &[NodeDoctorReport],
) -> Result<Vec<NodeDoctorReport>> {
    use unstuck::doctor::node::{HealOptions, ShownPod, heal_pod, stuck_pods};
    let Some((p, name)) = named_cluster(args) else {
        return Ok(Vec::new());
    };
    let node = p.node(name).await?;
    let mut reports = Vec::new();
    for (pod, consent) in shown
        .iter()
        .filter_map(|r| Some((r.pod.as_str(), ShownPod::of(r)?)))
    {
        let Some((ns, pod_name)) = pod.split_once('/') else {
            continue;
        };
        let opts = HealOptions {
            apply: true,
            stuck_after,
            shown: Some(consent),
            ..HealOptions::default()
        };
        reports.push(heal_pod(client, node.as_ref(), ns, pod_name, &opts).await?);
    }
    let look = HealOptions {
        stuck_after,
        ..HealOptions::default()
    };
    for p in stuck_pods(client, node.name(), stuck_after).await? {
        let known = |r: &NodeDoctorReport| r.uid.as_deref() == Some(p.uid.as_str());
        if (!args.namespaces.is_empty() && !args.namespaces.contains(&p.namespace))
            || reports.iter().any(known)
        {
            continue;
        }
        let mut r = heal_pod(client, node.as_ref(), &p.namespace, &p.name, &look).await?;
        if r.outcome == HealOutcome::DryRun {
            r.outcome = HealOutcome::NotShown;
        }
        reports.push(r);
    }
    Ok(reports)
}
