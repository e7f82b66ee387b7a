//! The checks of the `doctor` and `controller` steps, and of the fixtures
//! the `apply` steps name (which needs the fixtures directory, so it runs
//! after loading).

use std::path::Path;

use super::{Check, nonempty, problem};
use crate::doctor::{FindingKind, node::diagnose::NodeCause};
use crate::scenario::{
    agents::{ControllerCleanup, ControllerSpec, DoctorCheck},
    error::{Diagnostic, LoadError},
    model::{Scenario, Step},
};
use crate::text::quoted;

/// A controller's finalizer names its Lease by its domain, and a failing
/// cleanup needs the event it reports.
pub(super) fn controller(c: &ControllerSpec) -> Check {
    if let ControllerCleanup::Fail { reason, message } = &c.cleanup {
        nonempty("reason", reason)?;
        nonempty("message", message)?;
    }
    if !c.finalizer.contains('/') {
        return Err(problem(
            c.finalizer.position,
            format!(
                "controller finalizer '{}' must be domain/path (e.g. example.com/cleanup): the domain names its Lease",
                *c.finalizer
            ),
        ));
    }
    Ok(())
}

/// Whether `name` is a finding the doctor can report: an API finding
/// ([`FindingKind`]) or a node finding's cause ([`NodeCause`]).
fn is_finding_name(name: &str) -> bool {
    name.parse::<FindingKind>().is_ok()
        || serde_json::from_value::<NodeCause>(serde_json::Value::String(name.to_owned())).is_ok()
}

pub(super) fn doctor_check(doctor: &DoctorCheck) -> Check {
    if let Some(crd) = doctor.allow_conversion_changes.first()
        && !doctor.apply
    {
        return Err(problem(
            crd.position,
            "allowConversionChanges needs apply: true (a doctor that only diagnoses changes nothing)",
        ));
    }
    for crd in &doctor.allow_conversion_changes {
        nonempty("allowConversionChanges", crd)?;
        if !crd.contains('.') || crd.contains(char::is_whitespace) {
            return Err(problem(
                crd.position,
                format!(
                    "allowConversionChanges {} is not a CRD name (like meshconfigs.config.openservicemesh.io: <plural>.<group>)",
                    quoted(crd.as_str())
                ),
            ));
        }
    }
    if let Some(name) = doctor.allow_api_service_removal.first()
        && !doctor.apply
    {
        return Err(problem(
            name.position,
            "allowApiServiceRemoval needs apply: true (a doctor that only diagnoses removes nothing)",
        ));
    }
    for name in &doctor.allow_api_service_removal {
        nonempty("allowApiServiceRemoval", name)?;
        if name.contains(char::is_whitespace) || name.contains('/') {
            return Err(problem(
                name.position,
                format!(
                    "allowApiServiceRemoval {} is not an APIService name (like v1beta1.metrics.k8s.io: <version>.<group>)",
                    quoted(name.as_str())
                ),
            ));
        }
    }
    for kind in doctor.expect_findings.iter().chain(&doctor.forbid_findings) {
        if !is_finding_name(kind.as_str()) {
            let known: Vec<&str> = FindingKind::ALL.iter().map(|k| k.as_str()).collect();
            return Err(problem(
                kind.position,
                format!(
                    "{} is not a finding the doctor reports; API findings: {}; node findings: the causes of the node doctor (BusyVolume, WedgedRuntime, KubeletDown, ...)",
                    quoted(kind.as_str()),
                    known.join(", ")
                ),
            ));
        }
    }
    if let Some(both) = doctor.forbid_findings.iter().find(|f| {
        doctor
            .expect_findings
            .iter()
            .any(|e| e.as_str() == f.as_str())
    }) {
        return Err(problem(
            both.position,
            format!(
                "{} is both expected and forbidden; keep it in one of expectFindings and forbidFindings",
                quoted(both.as_str())
            ),
        ));
    }
    for key in &doctor.assume_dead {
        nonempty("assumeDead", key)?;
        if key.contains(char::is_whitespace) {
            return Err(problem(
                key.position,
                format!(
                    "assumeDead {} is not a finalizer key (keys have no spaces, like example.com/cleanup)",
                    quoted(key.as_str())
                ),
            ));
        }
    }
    Ok(())
}

impl Scenario {
    /// Checks that every fixture an `apply` step names exists under
    /// `fixtures_dir`. The error names the scenario file and the line of the
    /// step, so a typo in a path is found before a cluster is started.
    pub fn validate_fixtures(&self, fixtures_dir: &Path) -> Result<(), LoadError> {
        for step in self.steps.iter() {
            let Step::Apply(apply) = &step.value else {
                continue;
            };
            let full = fixtures_dir.join(&*apply.file);
            let why = match std::fs::metadata(&full) {
                Ok(meta) if meta.is_file() => continue,
                Ok(_) => "is not a file".to_owned(),
                Err(e) => format!("cannot be read: {e}"),
            };
            return Err(LoadError::MissingFixture(Diagnostic::new(
                self.path(),
                &self.source.text,
                apply.file.position.or(step.position),
                format!(
                    "fixture {} {why} (looked for {})",
                    apply.file.display(),
                    full.display()
                ),
            )));
        }
        Ok(())
    }
}
