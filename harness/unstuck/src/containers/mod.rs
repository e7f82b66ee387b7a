//! Containers a scenario needs outside the cluster (the backend of a
//! webhook or an aggregated API that is alive but broken, an image
//! registry), run on the local Docker engine through the `testcontainers`
//! crate: a typed request, a wait for the ready line, removal on drop.
//! What the crate does not do — labelled networks, the sweep's listings —
//! goes through the same engine client it uses ([`engine`]).
//!
//! testcontainers 0.26 (bollard 0.19) speaks Docker API 1.49: Docker
//! Engine 28.1 or newer. `ci/kind/setup.sh` builds and starts 28.5.2
//! (`ci/kind/engine.sh`), as Debian's docker.io 20.10 answers 1.41 at most.
//!
//! Every container and network is labelled with the run and its owning
//! process ([`labels`]), removed when its handle is dropped, and removed
//! by [`sweep_stale`] (`unstuck cluster gc`) once its owner is gone: a
//! harness killed with SIGKILL never runs its drops. On the local provider
//! a backend gets a network of its own (the engine runs with `bridge:
//! none`, so there is no default bridge); on kind it joins the cluster's
//! network, which is the cluster's to remove.

pub mod backend;
pub mod engine;
pub mod labels;
pub mod managed;
pub mod registry;
pub mod sweep;
pub mod tls;

pub use backend::{Backend, BackendFault, BackendRole, BackendSpec, start_backend};
pub use sweep::{gc, leftovers, sweep_stale};

/// Why a container could not be had.
#[derive(Debug, thiserror::Error)]
pub enum ContainerError {
    #[error("the Docker engine does not answer (is it running? ci/kind/setup.sh starts it): {0}")]
    NoEngine(#[source] testcontainers::bollard::errors::Error),
    #[error(
        "the Docker engine is too old for testcontainers, which speaks Docker API 1.49 (Docker Engine 28.1 or newer); ci/kind/setup.sh builds and starts 28.5.2. The engine said: {said}"
    )]
    EngineTooOld { said: String },
    #[error("image {image} is not in the Docker engine; build it with {build}")]
    ImageMissing { image: String, build: &'static str },
    #[error("container {name} did not get ready within {:.1} s: {why}; its log:\n{log}", waited.as_secs_f64())]
    NotReady {
        name: String,
        waited: std::time::Duration,
        why: String,
        log: String,
    },
    #[error("container {name} has no address on network {network} (the engine gave '{said}')")]
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
    #[error("the Docker engine refused: {0}")]
    Engine(#[source] testcontainers::bollard::errors::Error),
}
