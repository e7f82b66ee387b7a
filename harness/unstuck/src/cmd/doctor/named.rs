//! The cluster unstuck made that `unstuck doctor --local-cluster NAME`
//! (or `--kind-cluster`) names: its kubeconfig, for the API, and its node,
//! whose stuck pods the doctor looks at and, with consent, heals.

use std::{path::PathBuf, sync::Arc};

use anyhow::Result;
use unstuck::cluster::provider::{AnyProvider, CreateOptions, ProviderKind};
use unstuck::cluster::providers::provider;
use unstuck::components::DEFAULT_K8S_VERSION;
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
