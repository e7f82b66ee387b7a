//! `doctor`: the doctor, told nothing about the scenario, on the run's
//! objects and then on its pods stuck on a node; the step passes when it
//! found what the scenario expects and its remedies worked. The work is in
//! `runner/doctor_step.rs`.

use unstuck_core::scenario::DoctorCheck;

use super::{Evidence, ScenarioRun, StepError};

pub(super) async fn run(run: &mut ScenarioRun<'_>, d: &DoctorCheck) -> Result<Evidence, StepError> {
    run.doctor(d).await
}
