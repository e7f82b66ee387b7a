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
    Created, Evidence, RunContext, controller, finally, names::Names, progress, step,
    step::StepError,
};
use crate::{
    faults::Injected,
    report::{Outcome, ScenarioReport, StepRecord},
};

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
    pub(super) registries: Vec<super::step::registry::ScenarioRegistry>,
    /// Live controllers the scenario started; they run through cleanup.
    pub(super) controllers: Vec<controller::LiveController>,
    /// What this scenario adds to a cluster unstuck did not create,
    /// written before it is added ([`RunContext::journal`]).
    pub(super) journal: Option<super::journal::Journal>,
}

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
    /// Writes down what the run created, and `about_to`, before it is
    /// created (on a cluster unstuck did not create; a no-op otherwise).
    pub(super) fn journal(&mut self, about_to: Option<&Created>) -> Result<(), StepError> {
        match &mut self.journal {
            Some(j) => j.record(&self.created, about_to).map_err(StepError::from),
            None => Ok(()),
        }
    }

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

/// The message a panic was raised with.
pub(super) fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
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
