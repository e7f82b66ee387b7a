//! The steps of a scenario, one file each, dispatched from [`run`]. A new
//! step kind is a variant of the core's `scenario::Step`, a file here and
//! an arm in [`run`]; its failures are variants of [`StepError`].

mod apply;
pub(super) mod container;
mod controller;
mod delete;
mod doctor;
mod expect;
mod fault;
pub(super) mod namespaces;
pub(super) mod registry;

use std::path::PathBuf;

use unstuck_core::scenario::Step;

use super::{
    create::CreateError,
    objects::{FixtureError, ResolveError},
    scenario_state::ScenarioRun,
};
use crate::{doctor::DoctorError, faults::FaultError, wait::WaitTimeout};

/// What a step shows when it passes: facts quoted from the cluster.
pub type Evidence = Vec<String>;

/// Why a step failed, with what it was doing.
#[derive(Debug, thiserror::Error)]
pub enum StepError {
    #[error(transparent)]
    Journal(#[from] crate::runner::journal::JournalError),
    #[error("creating namespace {name}: {}", crate::kube_error::text(source))]
    CreateNamespace { name: String, source: kube::Error },
    #[error(transparent)]
    Fixture(#[from] FixtureError),
    #[error("{}: a document has no {field}", path.display())]
    NoField { path: PathBuf, field: &'static str },
    #[error("{}: a {kind} has no metadata.name", path.display())]
    NoName { path: PathBuf, kind: String },
    #[error("{}: {kind} {name} is namespaced; give the apply step a `namespace:`", path.display())]
    NeedsNamespace {
        path: PathBuf,
        kind: String,
        name: String,
    },
    #[error(transparent)]
    Resolve(#[from] ResolveError),
    #[error(transparent)]
    Create(#[from] CreateError),
    #[error("no apiVersion for {kind}")]
    NoApiVersion { kind: String },
    #[error(
        "{kind} {name} is not an object this run created; a scenario deletes only its own cluster-scoped objects"
    )]
    NotOurs { kind: String, name: String },
    #[error("deleting {what}: {}", crate::kube_error::text(source))]
    Delete { what: String, source: kube::Error },
    #[error(
        "fault '{fault}' needs node access; this cluster provider gives none (use the local or kind provider)"
    )]
    NoNode { fault: String },
    #[error("asking node {node} where its cluster's containers go: {source}")]
    ContainerNetwork {
        node: String,
        source: crate::node::NodeError,
    },
    #[error("injecting {fault}: {source}")]
    Fault {
        /// The fault as the scenario wrote it.
        fault: String,
        source: Box<FaultError>,
    },
    /// An `expect` gate that did not hold by its deadline.
    #[error(transparent)]
    Gate(#[from] WaitTimeout),
    #[error(transparent)]
    Doctor(#[from] DoctorError),
    #[error(
        "the doctor did not find {} (found {})",
        crate::text::list(missing),
        crate::text::list(found)
    )]
    NotFound {
        missing: Vec<String>,
        found: Vec<String>,
    },
    #[error(
        "the doctor found {}, which this scenario forbids (found {})",
        crate::text::list(forbidden),
        crate::text::list(found)
    )]
    Forbidden {
        forbidden: Vec<String>,
        found: Vec<String>,
    },
    #[error(
        "no finding of the doctor says {} (it said {})",
        crate::text::list(missing),
        crate::text::list(said)
    )]
    NotSaid {
        missing: Vec<String>,
        said: Vec<String>,
    },
    #[error("remedy steps failed: {}", .0.join("; "))]
    RemediesFailed(Vec<String>),
    #[error("container {name}: {source}")]
    Container {
        name: String,
        source: crate::containers::ContainerError,
    },
    #[error("registry {name}: {source}")]
    Registry {
        name: String,
        source: Box<crate::containers::registry::RegistryError>,
    },
    #[error("writing {}: {source}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A bug in the step's code; the scenario still cleans up.
    #[error("the step panicked: {0}")]
    Panicked(String),
}

/// Runs one step.
pub(super) async fn run(run: &mut ScenarioRun<'_>, step: &Step) -> Result<Evidence, StepError> {
    match step {
        Step::Apply(a) => apply::run(run, a).await,
        Step::Delete(d) => delete::run(run, d).await,
        Step::Fault(f) => fault::run(run, f).await,
        Step::Expect(e) => expect::run(run, e).await,
        Step::Doctor(d) => doctor::run(run, d).await,
        Step::Controller(c) => controller::run(run, c),
        Step::Container(c) => container::run(run, c).await,
        Step::Registry(r) => registry::run(run, r).await,
    }
}
