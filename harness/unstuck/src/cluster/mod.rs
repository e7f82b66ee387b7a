//! Cluster providers. `local` (the default) runs real components on this
//! machine; `kind` runs a kind cluster from an offline node image. Both
//! sit behind [`provider::Provider`]; the CLI and the runner use only
//! that. Each provider also implements [`crate::node::Node`] for its node
//! (`local/node/`, `kind/node/`): this layer depends on `node`, never the
//! reverse.

pub mod client;
pub mod exits;
pub mod identity;
pub mod kind;
pub mod local;
pub mod name;
pub mod provider;
pub mod providers;
pub mod readiness;

mod error;

pub use self::error::ClusterError;

/// Where unstuck keeps the records of the clusters it made: the local
/// provider's under `$UNSTUCK_STATE_DIR` (default
/// /var/lib/unstuck/clusters), other providers' in a directory of their
/// own beside it (`sibling`).
pub fn state_dir(sibling: Option<&str>) -> std::path::PathBuf {
    let local = std::env::var_os("UNSTUCK_STATE_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from("/var/lib/unstuck/clusters"));
    match sibling {
        Some(name) => local.with_file_name(name),
        None => local,
    }
}
