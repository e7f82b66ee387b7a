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

mod error;

pub use self::error::ClusterError;
