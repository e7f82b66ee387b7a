//! The scenario file format, as Rust types.
//!
//! Every struct and enum denies unknown fields: a misspelled key in a test
//! that waits for a condition would otherwise be silently dropped, and the
//! test would pass while checking nothing. Keys are camelCase, as in
//! Kubernetes manifests. Step kinds and conditions are externally tagged
//! enums (`- apply: ...`, `- gone: {...}`), which is also the one enum
//! representation for which serde-saphyr keeps source locations.

use std::{
    fmt,
    path::{Path, PathBuf},
    sync::Arc,
};

use serde::{Deserialize, Deserializer, Serialize, de};

use super::agents::{ControllerSpec, DoctorCheck};
use super::condition::Condition;
use super::fault::Fault;
use super::located::Located;
use super::steps::{ApplySpec, DeleteSpec, Expect};
use crate::duration::Duration;

/// The overall deadline of a scenario that does not set `timeout`.
pub const DEFAULT_SCENARIO_TIMEOUT: Duration = Duration::from_mins(5);

/// One reproducible incident: set something up, break it the way it broke
/// for someone, check that the symptoms are real, let the doctor diagnose
/// and repair it, and check that the cluster recovered.
///
/// Built with [`load_file`](super::load_file) or [`load_str`](super::load_str),
/// which also validate it; a `Scenario` obtained that way is internally
/// consistent (every namespace it mentions is declared, every object
/// reference has an `apiVersion`, and so on).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Scenario {
    /// Short unique id, a DNS label of at most 40 characters. The runner
    /// uses it in namespace names, report names and output folders.
    pub name: Located<String>,
    /// What incident this reproduces, in a sentence or two.
    pub description: Located<String>,
    /// The case number in `failure-catalog.md`, when the scenario is one of
    /// the catalogued failures.
    #[serde(
        default,
        deserialize_with = "catalog_case",
        skip_serializing_if = "Option::is_none"
    )]
    pub catalog_case: Option<u32>,
    /// Ids of the seed documents that describe the incident (`"001"`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub seeds: Vec<Located<String>>,
    /// The public thread the scenario reproduces, as `owner/repo#number`
    /// (`kubescape/kubescape#1571`); reports link it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incident: Option<Located<String>>,
    /// Logical namespace names used by the steps. The runner maps each one
    /// to a fresh real namespace per run, so scenarios can run side by side
    /// and a failed run cannot poison the next one. Every `namespace:` in
    /// the steps (and every `Namespace` object's name) must be listed here.
    #[serde(default)]
    pub namespaces: Vec<Located<String>>,
    /// Deadline for the whole scenario (default 5m).
    #[serde(default = "default_scenario_timeout")]
    pub timeout: Located<Duration>,
    /// The scenario must not run in parallel with others, typically because
    /// it injects node-level faults. See also [`Scenario::runs_alone`].
    #[serde(default)]
    pub serial: bool,
    /// What to do, in order. Never empty.
    pub steps: Located<Vec<Located<Step>>>,
    /// Where the scenario was read from, for error messages.
    #[serde(skip)]
    pub(crate) source: Source,
}

/// The file a scenario came from and its text, kept so that errors found
/// after loading (a missing fixture) can still quote the offending line.
#[derive(Clone, Debug, Default)]
pub(crate) struct Source {
    pub(crate) path: PathBuf,
    pub(crate) text: Arc<str>,
}

impl Scenario {
    /// The web address of [`Scenario::incident`]'s thread.
    pub fn incident_url(&self) -> Option<String> {
        self.incident.as_deref().and_then(|id| incident_url(id))
    }

    /// The file this scenario was loaded from (the `origin` given to
    /// [`load_str`](super::load_str)).
    pub fn path(&self) -> &Path {
        &self.source.path
    }

    /// The logical namespace names, in declaration order.
    pub fn namespace_names(&self) -> impl Iterator<Item = &str> {
        self.namespaces.iter().map(|ns| ns.as_str())
    }

    /// Every fixture file the `apply` steps reference, relative to the
    /// fixtures directory, in order of first use and without repeats.
    pub fn fixture_files(&self) -> Vec<&Path> {
        let mut files: Vec<&Path> = Vec::new();
        for step in self.steps.iter() {
            let file = match &step.value {
                Step::Apply(apply) => apply.file.as_path(),
                Step::Container(c) => c.register.as_path(),
                _ => continue,
            };
            if !files.contains(&file) {
                files.push(file);
            }
        }
        files
    }

    /// The registries the scenario's `registry:` steps name, each once, in
    /// order of first use (the step that starts it).
    pub fn registries(&self) -> Vec<&super::registry::RegistrySpec> {
        let mut out: Vec<&super::registry::RegistrySpec> = Vec::new();
        for step in self.steps.iter() {
            if let Step::Registry(r) = &step.value
                && !out.iter().any(|o| o.name.value == r.name.value)
            {
                out.push(r);
            }
        }
        out
    }

    /// Whether the runner must give this scenario the cluster to itself:
    /// it says `serial: true`, or it injects a fault on a node, which other
    /// scenarios' pods may share.
    pub fn runs_alone(&self) -> bool {
        self.serial || self.injects_node_fault()
    }

    /// Whether the scenario injects a fault on a node.
    pub fn injects_node_fault(&self) -> bool {
        self.steps
            .iter()
            .any(|step| matches!(&step.value, Step::Fault(fault) if fault.is_node_level()))
    }

    /// Whether the scenario needs access to a node (it injects a node
    /// fault, or reads a kubelet's log): only the local provider gives
    /// that, never a cluster met through a kubeconfig.
    pub fn needs_node(&self) -> bool {
        self.injects_node_fault()
            || !self.registries().is_empty()
            || self.steps.iter().any(|step| {
                matches!(&step.value, Step::Expect(e)
                    if e.that.iter().any(|c| matches!(c, Condition::KubeletLog(_))))
            })
    }
}

impl fmt::Display for Scenario {
    /// The scenario's name.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

/// One step of a scenario. Written as a single-key mapping whose key is the
/// step kind: `- apply: ...`, `- delete: {...}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub enum Step {
    /// Create or update the objects in a manifest file.
    Apply(ApplySpec),
    /// Delete one object (without waiting for it to go: that is what an
    /// `expect` step is for).
    Delete(DeleteSpec),
    /// Inject a fault that cannot be expressed as a manifest.
    Fault(Fault),
    /// Wait until conditions hold, or fail at the timeout.
    Expect(Expect),
    /// Run the doctor and check what it found.
    Doctor(DoctorCheck),
    /// Start a small live controller of the harness's own for a finalizer:
    /// it holds a leader-election Lease named after the finalizer's domain
    /// (the evidence a real controller leaves) and removes its finalizer
    /// from objects that have been deleting for `finishAfter`. It runs
    /// until the scenario ends. Used to prove the doctor leaves finalizers
    /// with a live owner alone.
    Controller(ControllerSpec),
    /// Run a container beside the cluster: a webhook's or an aggregated
    /// API's backend, with a fault (`super::container`).
    Container(super::container::ContainerSpec),
    /// Run an image registry beside the cluster that its node pulls from,
    /// or change what is wrong with it (`super::registry`).
    Registry(super::registry::RegistrySpec),
}

impl Step {
    /// The step kind as written in the file (`apply`, `delete`, ...).
    pub fn kind(&self) -> &'static str {
        match self {
            Step::Apply(_) => "apply",
            Step::Delete(_) => "delete",
            Step::Fault(_) => "fault",
            Step::Expect(_) => "expect",
            Step::Doctor(_) => "doctor",
            Step::Controller(_) => "controller",
            Step::Container(_) => "container",
            Step::Registry(_) => "registry",
        }
    }

    /// A one-line description for progress output and reports, such as
    /// `delete ConfigMap app/mymap` or `expect symptom within 60s: ...`.
    pub fn summary(&self) -> String {
        self.to_string()
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::Apply(apply) => write!(f, "apply {apply}"),
            Step::Delete(d) => match d.propagation_policy {
                Some(p) => write!(f, "delete {} (propagationPolicy {p})", d.object),
                None => write!(f, "delete {}", d.object),
            },
            Step::Fault(fault) => write!(f, "inject {fault}"),
            Step::Expect(expect) => expect.fmt(f),
            Step::Doctor(doctor) => doctor.fmt(f),
            Step::Controller(c) => write!(
                f,
                "run a live controller for {} in {} (finishes after {})",
                *c.finalizer, *c.namespace, c.finish_after
            ),
            Step::Container(c) => write!(f, "start {c}"),
            Step::Registry(r) => write!(f, "{r}"),
        }
    }
}

fn default_scenario_timeout() -> Located<Duration> {
    Located::unlocated(DEFAULT_SCENARIO_TIMEOUT)
}

/// `owner/repo#number` → the thread's address on GitHub (an issue's
/// address also leads to a pull request of that number). `None` when `id`
/// is not of that form.
pub fn incident_url(id: &str) -> Option<String> {
    let (repo, number) = id.split_once('#')?;
    let (owner, name) = repo.split_once('/')?;
    let valid_part = |p: &str| {
        !p.is_empty()
            && p.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
    };
    if !valid_part(owner) || !valid_part(name) || number.is_empty() {
        return None;
    }
    if !number.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(format!("https://github.com/{owner}/{name}/issues/{number}"))
}

/// Reads `catalogCase` with messages that say what it is, rather than the
/// YAML library's bare "invalid u32".
fn catalog_case<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<u32>, D::Error> {
    struct CaseVisitor;

    impl de::Visitor<'_> for CaseVisitor {
        type Value = Option<u32>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a case number from failure-catalog.md (1, 2, ...)")
        }

        fn visit_u64<E: de::Error>(self, v: u64) -> Result<Option<u32>, E> {
            match u32::try_from(v) {
                Ok(0) | Err(_) => Err(E::custom(format_args!(
                    "catalogCase must be a case number from failure-catalog.md, counted from 1; got {v}"
                ))),
                Ok(case) => Ok(Some(case)),
            }
        }

        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Option<u32>, E> {
            match u64::try_from(v) {
                Ok(v) => self.visit_u64(v),
                Err(_) => Err(E::custom(format_args!(
                    "catalogCase must be a case number from failure-catalog.md, counted from 1; got {v}"
                ))),
            }
        }

        fn visit_unit<E: de::Error>(self) -> Result<Option<u32>, E> {
            Ok(None)
        }

        fn visit_none<E: de::Error>(self) -> Result<Option<u32>, E> {
            Ok(None)
        }
    }

    deserializer.deserialize_any(CaseVisitor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn incident_ids_become_thread_addresses() {
        assert_eq!(
            incident_url("kubescape/kubescape#1571").as_deref(),
            Some("https://github.com/kubescape/kubescape/issues/1571")
        );
        assert_eq!(
            incident_url("openstack-k8s-operators/nova-operator#500").as_deref(),
            Some("https://github.com/openstack-k8s-operators/nova-operator/issues/500")
        );
        for bad in [
            "kubescape#1571",
            "kubescape/kubescape",
            "kubescape/kubescape#",
            "kubescape/kubescape#12a",
            "a b/c#1",
            "https://github.com/a/b/issues/1",
        ] {
            assert_eq!(incident_url(bad), None, "{bad}");
        }
    }
}
