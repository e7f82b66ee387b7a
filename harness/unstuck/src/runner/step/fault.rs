//! `fault`: a failure injected on the node, kept for the *finally* to
//! revert. The step is a thin call into `faults/`; which injector a fault
//! takes is decided in `faults`' table alone.

use std::time::Instant;

use unstuck_core::scenario::Fault;

use super::{Evidence, ScenarioRun, StepError};
use crate::faults;

pub(super) async fn run(run: &mut ScenarioRun<'_>, f: &Fault) -> Result<Evidence, StepError> {
    let node = run.ctx.node.clone().ok_or_else(|| StepError::NoNode {
        fault: f.kind().to_string(),
    })?;
    let ns = run.names.namespace(&f.pod().namespace);
    let injected = faults::inject(&run.ctx.client, node.as_ref(), f, &ns)
        .await
        .map_err(|source| StepError::Fault {
            fault: f.to_string(),
            source: Box::new(source),
        })?;
    let evidence = vec![injected.describe()];
    tracing::debug!(target: crate::STEP_LOG, "fault in place: {}", evidence[0]);
    run.injected.push(injected);
    run.last_injection = Some(Instant::now());
    Ok(evidence)
}
