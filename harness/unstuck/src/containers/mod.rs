//! Containers a scenario needs outside the cluster (today: the backend of
//! a webhook or an aggregated API that is alive but broken), run on the
//! local Docker engine through the `docker` CLI ([`Docker`]).
//!
//! Not the `testcontainers` crate: it resolves here (0.28.0, bollard
//! 0.21.1), but bollard pins Docker API 1.53 and the engine
//! `ci/kind/setup.sh` installs (Debian's docker.io 20.10) answers
//! "client version 1.53 is too new. Maximum supported API version is
//! 1.41" to every call; the CLI negotiates the version. What the crate
//! would give is kept: a typed request, a wait for the ready line, removal
//! on drop.
//!
//! Every container and network is labelled with the run and its owning
//! process ([`labels`]), removed when its handle is dropped, and removed
//! by [`sweep_stale`] (`unstuck cluster gc`) once its owner is gone: a
//! harness killed with SIGKILL never runs its drops. On the local provider
//! a backend gets a network of its own (the engine runs with `bridge:
//! none`, so there is no default bridge); on kind it joins the cluster's
//! network, which is the cluster's to remove.
//!
//! [`Docker`]: crate::docker::Docker

pub mod backend;
pub mod labels;
pub mod managed;
pub mod registry;
pub mod sweep;
pub mod tls;

pub use backend::{Backend, BackendFault, BackendRole, BackendSpec, start_backend};
pub use sweep::{gc, leftovers, sweep_stale};

use crate::exec::RunError;

/// Why a container could not be had.
#[derive(Debug, thiserror::Error)]
pub enum ContainerError {
    #[error("the Docker engine does not answer (is it running? ci/kind/setup.sh starts it): {0}")]
    NoEngine(#[source] RunError),
    #[error("image {image} is not in the Docker engine; build it with {build}")]
    ImageMissing { image: String, build: &'static str },
    #[error("container {name} did not get ready within {waited:?}: {why}; its log:\n{log}")]
    NotReady {
        name: String,
        waited: std::time::Duration,
        why: String,
        log: String,
    },
    #[error("container {name} has no address on network {network} (docker inspect said {said:?})")]
    Address {
        name: String,
        network: String,
        said: String,
    },
    #[error("making the certificates for {what}: {source}")]
    Certificate {
        what: String,
        #[source]
        source: rcgen::Error,
    },
    #[error("taking the container sweep's lock {}: {source}", path.display())]
    Lock {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Docker(#[from] RunError),
}
