//! One scenario's run: the steps (try), then cleanup (finally), whatever
//! way the steps ended.

use std::{
    panic::AssertUnwindSafe,
    time::{Duration, Instant},
};

use futures::FutureExt;
use tokio::sync::watch;
use unstuck_core::scenario::{Scenario, Step};

use super::{
    Evidence, RunContext, finally,
    names::Names,
    progress,
    scenario_state::{ScenarioRun, panic_text},
    step,
    step::StepError,
};
use crate::report::{Outcome, ScenarioReport, StepRecord};

/// Runs one scenario to its verdict; cleanup always runs.
pub async fn run_scenario(ctx: &RunContext, scenario: &Scenario) -> ScenarioReport {
    let (_keep, never) = watch::channel(false);
    run_scenario_until(ctx, scenario, never).await
}

/// Like [`run_scenario`], but stops early (still cleaning up) once
/// `cancel` turns true: Ctrl-C of a whole run.
pub async fn run_scenario_until(
    ctx: &RunContext,
    scenario: &Scenario,
    cancel: watch::Receiver<bool>,
) -> ScenarioReport {
    let started = Instant::now();
    let exits_before = ctx.cluster_exits.len();
    let names = Names::for_scenario(scenario, &ctx.fixtures_dir, &super::run_id());
    let ns = names.namespaces().clone();
    let journal = ctx
        .journal
        .as_ref()
        .map(|t| super::journal::Journal::new(&t.dir, &t.cluster, names.run(), &scenario.name));
    let mut run = ScenarioRun {
        ctx,
        scenario,
        names,
        created: Vec::new(),
        report: ScenarioReport::start(scenario, ns, ctx.out_dir.clone(), Outcome::Passed),
        doctor_started: None,
        last_injection: None,
        deleting_since: None,
        injected: Vec::new(),
        backends: Vec::new(),
        registries: Vec::new(),
        controllers: Vec::new(),
        journal,
    };
    if let Err(e) = std::fs::create_dir_all(&ctx.out_dir) {
        run.report
            .note_unwritten(format!("could not create {}: {e}", ctx.out_dir.display()));
    }
    // try
    run.report.outcome = run.steps_until(cancel).await;
    // finally: every way out of the steps reaches this line (a panic in
    // a step was caught as that step's failure).
    finally::run(&mut run).await;
    run.report.duration_ms = started.elapsed().as_millis();
    run.report.cluster_exits = ctx.cluster_exits.since(exits_before);
    run.report.save();
    run.report
}

impl ScenarioRun<'_> {
    /// The steps, within the scenario's timeout and until `cancel`.
    async fn steps_until(&mut self, mut cancel: watch::Receiver<bool>) -> Outcome {
        let deadline = self.scenario.timeout.as_std();
        let timeout = *self.scenario.timeout;
        let interrupted = async move {
            while !*cancel.borrow() {
                if cancel.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
            }
        };
        // The step that was running when time ran out or the run was stopped.
        tokio::select! {
            r = tokio::time::timeout(deadline, self.steps()) => match r {
                Ok(outcome) => outcome,
                Err(_) => Outcome::Failed {
                    step: self.report.steps.len() + 1,
                    reason: format!("the scenario's {timeout} timeout ran out"),
                },
            },
            _ = interrupted => Outcome::Interrupted {
                step: self.report.steps.len() + 1,
                reason: "the run was interrupted (Ctrl-C or SIGTERM) while this scenario ran; its cleanup ran".to_string(),
            },
        }
    }

    async fn steps(&mut self) -> Outcome {
        if let Err(e) = guarded(step::namespaces::create(self)).await {
            return Outcome::Failed {
                step: 0,
                reason: e.to_string(),
            };
        }
        for (i, step) in self.scenario.steps.iter().enumerate() {
            let index = i + 1;
            let t = Instant::now();
            progress::set(
                self.scenario.name.as_str(),
                format!("step {index}: {}", step.summary()),
            );
            let result = guarded(step::run(self, step)).await;
            self.record(index, step, t.elapsed(), &result);
            if let Err(reason) = result {
                return Outcome::Failed {
                    step: index,
                    reason: format!("step {index} ({}): {reason}", step.summary()),
                };
            }
        }
        Outcome::Passed
    }

    fn record(
        &mut self,
        index: usize,
        step: &Step,
        took: Duration,
        result: &Result<Evidence, StepError>,
    ) {
        let (ok, evidence) = match result {
            Ok(ev) => (true, ev.clone()),
            Err(why) => (false, vec![why.to_string()]),
        };
        self.report.steps.push(StepRecord {
            index,
            kind: step.kind().to_string(),
            summary: step.summary(),
            duration_ms: took.as_millis(),
            ok,
            evidence,
        });
    }
}

/// Runs `f`, turning a panic into [`StepError::Panicked`]: a bug in one
/// step fails that step, and cleanup still runs.
async fn guarded<T>(f: impl Future<Output = Result<T, StepError>>) -> Result<T, StepError> {
    match AssertUnwindSafe(f).catch_unwind().await {
        Ok(r) => r,
        Err(panic) => Err(StepError::Panicked(panic_text(panic.as_ref()))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_step_that_panics_is_a_failed_step_with_the_message() {
        let r: Result<(), StepError> = guarded(async { panic!("boom in step") }).await;
        match r {
            Err(StepError::Panicked(m)) => assert_eq!(m, "boom in step"),
            other => panic!("not a panicked step: {other:?}"),
        }
        let r: Result<(), StepError> =
            guarded(async { panic!("{} formatted", String::from("also")) }).await;
        assert_eq!(
            r.unwrap_err().to_string(),
            "the step panicked: also formatted"
        );
        let ok: Result<u8, StepError> = guarded(async { Ok(7) }).await;
        assert_eq!(ok.unwrap(), 7);
    }
}
