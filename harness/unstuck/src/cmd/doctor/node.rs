//! The node half of `unstuck doctor --local-cluster NAME` (or
//! `--kind-cluster`): the cluster unstuck made that is named, and its
//! node's stuck pods, looked at and, with consent, healed.

use std::{path::PathBuf, sync::Arc};

use anyhow::Result;
use unstuck::cluster::provider::{AnyProvider, CreateOptions, ProviderKind};
use unstuck::cluster::providers::provider;
use unstuck::components::DEFAULT_K8S_VERSION;
use unstuck::doctor::node::{
    HealOptions, HealOutcome, NodeDoctorReport, ShownPod, StuckPod, heal_pod, heal_stuck,
};
use unstuck::node::AnyNode;

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

/// The node of the cluster `--local-cluster`/`--kind-cluster` names.
pub(super) async fn named_node(args: &DoctorArgs) -> Result<Option<Arc<AnyNode>>> {
    let Some((p, name)) = named_cluster(args) else {
        return Ok(None);
    };
    Ok(Some(p.node(name).await?))
}

/// Whether a stuck pod is within `-n` (all are when none was given).
fn within_namespaces(args: &DoctorArgs) -> impl Fn(&StuckPod) -> bool + '_ {
    |p| args.namespaces.is_empty() || args.namespaces.contains(&p.namespace)
}

/// The node half of `unstuck doctor --local-cluster NAME`, looking
/// only: each stuck pod's diagnosis and ladder.
pub(super) async fn node_look(
    client: &kube::Client,
    args: &DoctorArgs,
    stuck_after: std::time::Duration,
) -> Result<Vec<NodeDoctorReport>> {
    let Some(node) = named_node(args).await? else {
        return Ok(Vec::new());
    };
    let opts = HealOptions {
        stuck_after,
        ..HealOptions::default()
    };
    let mut reports = Vec::new();
    for (_, healed) in heal_stuck(client, node.as_ref(), &opts, within_namespaces(args)).await? {
        reports.push(healed?);
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
    let Some(node) = named_node(args).await? else {
        return Ok(Vec::new());
    };
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
    // Stuck now, after the heals: a pod nobody was shown is only said.
    let look = HealOptions {
        stuck_after,
        ..HealOptions::default()
    };
    let healed: Vec<Option<String>> = reports.iter().map(|r| r.uid.clone()).collect();
    let not_shown = |p: &StuckPod| {
        within_namespaces(args)(p) && !healed.iter().any(|u| u.as_deref() == Some(p.uid.as_str()))
    };
    for (_, looked) in heal_stuck(client, node.as_ref(), &look, not_shown).await? {
        let mut r = looked?;
        if r.outcome == HealOutcome::DryRun {
            r.outcome = HealOutcome::NotShown;
        }
        reports.push(r);
    }
    Ok(reports)
}
