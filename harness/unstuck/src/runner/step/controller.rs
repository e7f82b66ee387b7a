//! `controller`: a small live controller of the harness's own for a
//! finalizer, running until the scenario's *finally* stops it.

use unstuck_core::scenario::{ControllerCleanup, ControllerSpec, Located};

use super::{Evidence, ScenarioRun, StepError};
use crate::runner::controller::{ControllerConfig, start};

pub(super) fn run(run: &mut ScenarioRun<'_>, c: &ControllerSpec) -> Result<Evidence, StepError> {
    let namespace = run.names.namespace(&c.namespace);
    let watches = if c.watches.is_empty() {
        vec![namespace.clone()]
    } else {
        c.watches.iter().map(|w| run.names.namespace(w)).collect()
    };
    // The failure message may name the scenario's groups.
    let cleanup = match &c.cleanup {
        ControllerCleanup::Fail { reason, message } => ControllerCleanup::Fail {
            reason: reason.clone(),
            message: Located::unlocated(run.names.text(message)),
        },
        other => other.clone(),
    };
    let started = start(
        run.ctx.client.clone(),
        ControllerConfig {
            namespace,
            watches,
            finalizer: run.names.text(&c.finalizer),
            finish_after: c.finish_after.as_std(),
            lease: c.lease,
            cleanup,
        },
    );
    let line = started.describe();
    run.controllers.push(started);
    Ok(vec![line])
}
