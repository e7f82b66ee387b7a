//! What a scenario's cleanup did, as reports show it.

use serde::{Deserialize, Serialize};

/// What cleanup did.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct CleanupReport {
    /// Node faults undone before anything else.
    pub reverted: Vec<String>,
    pub deleted: Vec<String>,
    /// Finalizer keys of the run's own that cleanup removed, each with the
    /// object (a failed scenario leaves them; a passing one rarely does).
    pub forced: Vec<String>,
    /// Keys on the run's objects that the run did not add, left in place
    /// with the object they hold: their owner removes them, not cleanup.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left: Vec<String>,
    /// What is still there that the run made: objects, and node faults
    /// whose revert failed.
    pub leaked: Vec<String>,
    /// Requests of cleanup's that failed, with the answer (a delete a
    /// webhook refused, a read that errored). Cleanup goes on after each;
    /// what they kept in place is in `leaked`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed: Vec<String>,
}

impl CleanupReport {
    /// Nothing of the run's is left that the run could have removed.
    /// Objects held only by others' keys are `left`, not leaked.
    pub fn is_clean(&self) -> bool {
        self.leaked.is_empty()
    }
}
