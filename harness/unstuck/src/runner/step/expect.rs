//! `expect`: a gate that holds when every condition holds at once, polled
//! until its timeout. A symptom gate records its evidence and when the
//! stuck state was last seen in place; a recovered gate, the time to
//! recover.

use std::time::{Duration, Instant};

use unstuck_core::scenario::{Condition, Expect, Phase};

use super::{Evidence, ScenarioRun, StepError};
use crate::{
    runner::conditions::{CheckContext, check, get},
    wait::{self, Poll},
};

pub(super) async fn run(run: &mut ScenarioRun<'_>, e: &Expect) -> Result<Evidence, StepError> {
    let ctx = CheckContext {
        client: &run.ctx.client,
        names: &run.names,
        node: run.ctx.node.as_deref(),
    };
    let conds: &[Condition] = &e.that;
    let what = format!(
        "{} gate: {}",
        e.phase,
        conds
            .iter()
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join("; ")
    );
    let mut evidence = wait::until(what, e.timeout.as_std(), Duration::from_millis(500), || {
        let ctx = &ctx;
        async move {
            let mut held = Vec::new();
            for c in conds {
                match check(ctx, c).await {
                    Ok(ev) => held.push(ev),
                    Err(seen) => return Poll::Pending(format!("{c}: {seen}")),
                }
            }
            Poll::Ready(held)
        }
    })
    .await?;
    match e.phase {
        Phase::Symptom => {
            for e in &evidence {
                // Two conditions may quote the same line.
                if !run.report.symptoms.contains(e) {
                    run.report.symptoms.push(e.clone());
                }
            }
            run.last_injection = Some(Instant::now());
            // When the objects began deleting: the doctor waits until they
            // have been stuck long enough to call them so.
            let mut since = run.deleting_since;
            for c in conds {
                if let Condition::Terminating(r) = c {
                    match get(&ctx, r).await {
                        Ok(obj) => {
                            // A pod's deletionTimestamp is the end of its
                            // grace period: it began deleting that long
                            // before.
                            let ts = obj.and_then(|o| {
                                let grace = o.metadata.deletion_grace_period_seconds.unwrap_or(0);
                                o.metadata.deletion_timestamp.map(|t| {
                                    t.0 - k8s_openapi::jiff::SignedDuration::from_secs(grace)
                                })
                            });
                            since = since.max(ts);
                        }
                        Err(err) => evidence.push(format!(
                            "(could not read when {c} began deleting: {err}; the doctor may look too early)"
                        )),
                    }
                }
            }
            run.deleting_since = since;
        }
        Phase::Recovered => {
            if let Some(t) = run.doctor_started {
                run.report.time_to_recover_ms = Some(t.elapsed().as_millis());
            }
        }
    }
    Ok(evidence)
}
