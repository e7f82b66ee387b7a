//! The runner: one scenario from setup to cleanup, as try/finally.
//!
//! - *try* (`scenario_run`): the steps in order, one file each under
//!   `step`, each returning a [`StepError`]; every wait has a deadline
//!   that names what it waited for. A step that panics is a failed step.
//! - *finally* (`finally`): on every way out (success, failure,
//!   timeout, Ctrl-C, a panic), node faults are reverted, the run's
//!   objects cleaned up, its controllers stopped; whatever cleanup could
//!   not do is in the report, never dropped.
//!
//! The runner produces a [`ScenarioReport`], a type of the report side
//! (`crate::report`): reports are read, merged and rendered without the
//! runner (`unstuck report merge`, a matrix of runs from disk), so the
//! runner depends on the report module and never the other way round.

mod cleanup;
pub mod conditions;
mod controller;
pub mod create;
mod doctor_step;
mod finally;
pub mod journal;
pub mod names;
pub mod objects;
pub mod progress;
pub mod reach;
mod scenario_run;
mod scenario_state;
mod step;
pub mod suite;

use std::{path::PathBuf, sync::Arc, time::Duration};

use kube::Client;

pub use self::{
    scenario_run::{run_scenario, run_scenario_until},
    step::{Evidence, StepError},
};
// The report's types, named where the runner's callers have always found
// them.
pub use crate::report::{Outcome, ScenarioReport, StepGraph, StepRecord};
use crate::{cluster::exits::ExitLog, node::AnyNode};
use scenario_state::ScenarioRun;

/// How long a deletion must hang before the doctor in a scenario calls it
/// stuck. Short, because the symptom gate has already shown it hangs.
pub const STUCK_AFTER: Duration = Duration::from_secs(3);

/// The longest the doctor step waits for late deletions (a grace period in
/// the future) to age, beyond [`STUCK_AFTER`].
const MAX_SETTLE: Duration = Duration::from_secs(30);

/// Where and against what a scenario runs.
#[derive(Clone)]
pub struct RunContext {
    pub client: Client,
    pub fixtures_dir: PathBuf,
    /// This scenario's output folder (evidence, backups, doctor report).
    pub out_dir: PathBuf,
    /// The node, for node-level faults, kubelet log conditions and the
    /// node doctor (any provider that gives node access).
    pub node: Option<Arc<AnyNode>>,
    /// The cluster's control-plane components that exit while it runs
    /// (restarted by the local provider's supervisor): a scenario's report
    /// names the ones that exited during it.
    pub cluster_exits: ExitLog,
    /// On a cluster unstuck did not create: where each scenario writes
    /// down what it is about to add ([`journal`]), so that a killed run's
    /// objects can be found and removed.
    pub journal: Option<journal::JournalTarget>,
}

/// A short random id for this run's namespaces.
pub fn run_id() -> String {
    let n = k8s_openapi::jiff::Timestamp::now().as_nanosecond() as u64
        ^ (u64::from(std::process::id()) << 20);
    let mut x = n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (0..6)
        .map(|_| {
            let c = b"abcdefghijklmnopqrstuvwxyz0123456789"[(x % 36) as usize] as char;
            x /= 36;
            c
        })
        .collect()
}

/// An object this run created, for cleanup: cleanup acts on it only
/// while the object of that name still has this UID, and removes only
/// the finalizer keys its manifest carried.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Created {
    pub api_version: String,
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
    pub uid: String,
    /// The finalizer keys the run's manifest put on it (and in its
    /// templates), over every apply of it.
    pub keys: cleanup::keys::ManifestKeys,
}

impl std::fmt::Display for Created {
    /// `Kind namespace/name`, or `Kind name` when cluster-scoped.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} {ns}/{}", self.kind, self.name),
            None => write!(f, "{} {}", self.kind, self.name),
        }
    }
}
