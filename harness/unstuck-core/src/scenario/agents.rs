//! The steps that start something of the harness's own: the doctor
//! (`doctor`) and a live controller (`controller`).

use std::fmt;

use serde::{Deserialize, Serialize};

use super::located::Located;
use crate::duration::Duration;

/// What a harness controller's cleanup does once an object has been
/// deleting for `finishAfter`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub enum ControllerCleanup {
    /// Succeeds and removes the finalizer.
    #[default]
    Finish,
    /// Fails every time (chaos-mesh/chaos-mesh#3929: recovering the
    /// target is impossible): the finalizer stays and the controller
    /// reports a Warning event with this reason and message on the object
    /// at each retry, as a real controller's requeue does.
    Fail {
        /// The event's reason, such as `ChaosRecoverFailed`.
        reason: Located<String>,
        /// The event's message.
        message: Located<String>,
    },
    /// Must create a ConfigMap `cleanup-<name>` in the object's namespace
    /// first, and removes the finalizer only once that worked
    /// (openstack-k8s-operators/nova-operator#500). In a Terminating
    /// namespace NamespaceLifecycle forbids it: the controller reports the
    /// API's refusal as a Warning event `CleanupFailed` and retries.
    CreateConfigMap,
}

/// A live controller run by the harness (see `Step::Controller`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ControllerSpec {
    /// The finalizer key it serves, `domain/path`.
    pub finalizer: Located<String>,
    /// The logical namespace it runs in and holds its Lease in. When that
    /// namespace is deleted, the controller stops, as its pod would.
    pub namespace: Located<String>,
    /// Logical namespaces whose objects it serves (default: its own).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub watches: Vec<Located<String>>,
    /// What its cleanup of a due object does (default `finish`).
    #[serde(default)]
    pub cleanup: ControllerCleanup,
    /// How long an object stays deleting before the controller finishes
    /// its cleanup and removes the finalizer (default 30s).
    #[serde(default = "default_finish_after")]
    pub finish_after: Duration,
    /// Whether it holds a leader-election Lease (default `true`). Without
    /// one it shows it is alive only the way a controller without leader
    /// election does: by writing to the objects it serves.
    #[serde(default = "default_true")]
    pub lease: bool,
}

fn default_finish_after() -> Duration {
    Duration::from_secs(30)
}

/// Runs the doctor, which is told nothing about the scenario, and checks
/// that it found what the scenario broke.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DoctorCheck {
    /// Finding kinds (such as `OrphanFinalizer`) that must all be among the
    /// doctor's findings. Other findings are allowed.
    #[serde(default)]
    pub expect_findings: Vec<Located<String>>,
    /// Words that must each be in some finding's summary or evidence, in a
    /// "terminating, normal so far" line or in the first plan (after the
    /// run's renames, like an expected message): the cause named, not only
    /// the kind of finding.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expect_saying: Vec<Located<String>>,
    /// Finding kinds that must not be among the doctor's findings: what a
    /// scenario of a normal state proves the doctor does not blame (a
    /// namespace waiting on a pod's grace period is no
    /// `NamespaceNotProgressing`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub forbid_findings: Vec<Located<String>>,
    /// Apply the remedy plan (default `true`); `false` only diagnoses.
    #[serde(default = "default_true")]
    pub apply: bool,
    /// Let the doctor change admission webhooks (make a dead one fail
    /// open), as `unstuck doctor --allow-webhook-changes` does. Default
    /// `false`: the plan shows the step, the doctor skips it.
    #[serde(default)]
    pub allow_webhook_changes: bool,
    /// Let the doctor switch a CRD whose conversion webhook is dead to
    /// conversion strategy `None` when that is proven lossless, as
    /// `unstuck doctor --allow-crd-conversion-changes` does. Default
    /// `false`: the plan shows the step, the doctor skips it. Needs `apply`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_conversion_changes: Vec<Located<String>>,
    /// Finalizer keys whose owner the operator has checked is gone, as
    /// `unstuck doctor --assume-dead KEY` names them: an `Unknown` owner
    /// of such a key counts as dead, an `Alive` one never does. For
    /// incidents where the doctor rightly refuses on its own evidence and
    /// a person's check is the safe way on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub assume_dead: Vec<Located<String>>,
    /// APIServices the doctor may remove once their installed backend has
    /// not served past the bound (the harness's stuck-after), as
    /// `unstuck doctor --allow-apiservice-removal NAME` names them.
    /// Needs `apply`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_api_service_removal: Vec<Located<String>>,
}

impl fmt::Display for DoctorCheck {
    /// `doctor: expect OrphanFinalizer, then apply the plan`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("doctor: ")?;
        if self.expect_findings.is_empty() {
            f.write_str("diagnose")?;
        } else {
            f.write_str("expect ")?;
            for (i, kind) in self.expect_findings.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                f.write_str(kind)?;
            }
        }
        if !self.assume_dead.is_empty() {
            f.write_str(", assuming the owner of ")?;
            for (i, key) in self.assume_dead.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                f.write_str(key)?;
            }
            f.write_str(" dead")?;
        }
        f.write_str(match (self.apply, self.allow_webhook_changes) {
            (true, false) => ", then apply the plan",
            (true, true) => ", then apply the plan, webhook changes allowed",
            (false, _) => " (diagnose only)",
        })?;
        if self.apply && !self.allow_conversion_changes.is_empty() {
            f.write_str(", conversion changes to CRD ")?;
            for (i, name) in self.allow_conversion_changes.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                f.write_str(name)?;
            }
            f.write_str(" allowed")?;
        }
        if self.apply && !self.allow_api_service_removal.is_empty() {
            f.write_str(", removal of APIService ")?;
            for (i, name) in self.allow_api_service_removal.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                f.write_str(name)?;
            }
            f.write_str(" allowed")?;
        }
        Ok(())
    }
}

fn default_true() -> bool {
    true
}
