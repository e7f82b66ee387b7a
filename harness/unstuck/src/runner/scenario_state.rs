//! What the steps of a running scenario share ([`ScenarioRun`]): its own
//! file, below the steps, the cleanup and the run loop that all take it,
//! so none of them imports another to reach it.

use std::time::Instant;

use unstuck_core::scenario::Scenario;

use super::{
    Created, RunContext, controller,
    journal::{Journal, JournalError},
    names::Names,
};
use crate::{containers::registry::Registry, faults::Injected, report::ScenarioReport};

/// A scenario while it runs: what the steps share.
pub(super) struct ScenarioRun<'a> {
    pub(super) ctx: &'a RunContext,
    pub(super) scenario: &'a Scenario,
    pub(super) names: Names,
    pub(super) created: Vec<Created>,
    pub(super) report: ScenarioReport,
    pub(super) doctor_started: Option<Instant>,
    /// When the stuck state was last known to be in place: the last
    /// injection (delete or fault) or symptom gate. The doctor looks only
    /// once that state has aged [`STUCK_AFTER`](super::STUCK_AFTER): a
    /// namespace's content, for instance, starts deleting only when the
    /// namespace controller gets to it, seconds after the namespace itself.
    pub(super) last_injection: Option<Instant>,
    /// The latest deletionTimestamp a symptom gate saw on an object it
    /// expected terminating. A pod's deletionTimestamp lies its grace
    /// period in the future, and the kubelet can fail before that: the
    /// symptom is there, but the doctor (rightly) does not call the pod
    /// stuck until it is STUCK_AFTER past that time.
    pub(super) deleting_since: Option<k8s_openapi::jiff::Timestamp>,
    /// Node faults in place; reverted before cleanup on every path out.
    pub(super) injected: Vec<Box<dyn Injected>>,
    /// Backend containers (`container:` steps); removed by the finally,
    /// or when dropped.
    pub(super) backends: Vec<crate::containers::Backend>,
    /// Registries (`registry:` steps); removed by the finally, or (their
    /// containers) when dropped.
    pub(super) registries: Vec<ScenarioRegistry>,
    /// Live controllers the scenario started; they run through cleanup.
    pub(super) controllers: Vec<controller::LiveController>,
    /// What this scenario adds to a cluster unstuck did not create,
    /// written before it is added ([`RunContext::journal`]).
    pub(super) journal: Option<Journal>,
}

/// A registry of this scenario run.
pub(crate) struct ScenarioRegistry {
    /// The scenario's name for it.
    pub name: String,
    /// The host pods pull from, renamed for this run.
    pub host: String,
    pub registry: Registry,
}

impl ScenarioRun<'_> {
    /// Writes down what the run created, and `about_to`, before it is
    /// created (on a cluster unstuck did not create; a no-op otherwise).
    pub(super) fn journal(&mut self, about_to: Option<&Created>) -> Result<(), JournalError> {
        match &mut self.journal {
            Some(j) => j.record(&self.created, about_to),
            None => Ok(()),
        }
    }
}

/// The message a panic was raised with.
pub(super) fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}
