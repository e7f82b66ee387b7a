//! Cluster providers. `local` (the default) runs real components on this
//! machine; `kind` runs a kind cluster from an offline node image. Both
//! sit behind [`provider::Provider`]; the CLI and the runner use only
//! that. Each provider also implements [`crate::node::Node`] for its node
//! (`local/node/`, `kind/node/`): this layer depends on `node`, never the
//! reverse.

pub mod exits;
pub mod identity;
pub mod kind;
pub mod local;
pub mod provider;
pub mod readiness;

use std::path::PathBuf;

use self::{kind::KindError, local::LocalError, provider::ProviderKind};
use crate::node::NodeError;

/// The error of the provider interface: which provider and what failed,
/// with the provider's own error as the source.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error(transparent)]
    Local(#[from] LocalError),
    #[error(transparent)]
    Kind(#[from] KindError),
    #[error(
        "no {provider} cluster named '{name}' made by unstuck; `unstuck cluster list` shows the clusters it made"
    )]
    NotFound {
        provider: ProviderKind,
        name: String,
    },
    #[error("the node of {provider} cluster '{name}': {source}")]
    Node {
        provider: ProviderKind,
        name: String,
        #[source]
        source: NodeError,
    },
    #[error("copying {from} to {to}: {source}")]
    Logs {
        from: PathBuf,
        to: PathBuf,
        #[source]
        source: std::io::Error,
    },
}
