//! Control-plane components that exited while a cluster ran, and what
//! brought them back: the local provider's supervisor, or the kubelet of a
//! kind node (static pods). A scenario's report names the exits that
//! happened during it, so a failure the cluster caused is not blamed on
//! the scenario.

use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

/// One exit of a control-plane component.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ComponentExit {
    pub component: String,
    /// When it ended (RFC 3339).
    pub at: String,
    /// How it ended (`exit status: 1`, `signal: 9 (SIGKILL)`, `exit code
    /// 137 (Error)`).
    pub status: String,
    /// The last lines of its log: usually why (`"leaderelection lost"`).
    pub log_tail: String,
    pub restart: Restart,
}

/// What was done about an exit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "by", rename_all = "camelCase")]
pub enum Restart {
    /// Waiting for its back-off.
    Pending,
    /// Started again by the local provider's supervisor.
    Supervisor { pid: i32 },
    /// Started again by the node's kubelet (a static pod's container).
    Kubelet {
        #[serde(rename = "restartCount")]
        restart_count: i32,
    },
    /// Not started again, and why.
    Failed { error: String },
}

impl std::fmt::Display for ComponentExit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} exited at {} ({})",
            self.component, self.at, self.status
        )?;
        match &self.restart {
            Restart::Pending => write!(f, "; not restarted yet")?,
            Restart::Supervisor { pid } => write!(f, "; restarted as pid {pid}")?,
            Restart::Kubelet { restart_count } => write!(
                f,
                "; restarted by the node's kubelet (restart {restart_count})"
            )?,
            Restart::Failed { error } => write!(f, "; not restarted: {error}")?,
        }
        let last = self.log_tail.lines().rev().find(|l| !l.trim().is_empty());
        if let Some(line) = last {
            write!(f, "; its log ended: {}", line.trim())?;
        }
        Ok(())
    }
}

/// The exits seen so far, shared with whoever reports on the cluster.
#[derive(Clone, Debug, Default)]
pub struct ExitLog(Arc<Mutex<Vec<ComponentExit>>>);

impl ExitLog {
    pub fn all(&self) -> Vec<ComponentExit> {
        self.0.lock().expect("exit log lock").clone()
    }
    /// The exits seen at or after `since` (an index from [`ExitLog::len`]).
    pub fn since(&self, since: usize) -> Vec<ComponentExit> {
        self.all().into_iter().skip(since).collect()
    }
    pub fn len(&self) -> usize {
        self.0.lock().expect("exit log lock").len()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Adds an exit; returns its index, for [`ExitLog::set_restart`].
    pub(crate) fn push(&self, exit: ComponentExit) -> usize {
        let mut all = self.0.lock().expect("exit log lock");
        all.push(exit);
        all.len() - 1
    }
    pub(crate) fn set_restart(&self, index: usize, restart: Restart) {
        if let Some(e) = self.0.lock().expect("exit log lock").get_mut(index) {
            e.restart = restart;
        }
    }
}
