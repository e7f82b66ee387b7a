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

use super::condition::Condition;
use super::located::Located;
use crate::duration::Duration;

/// The overall deadline of a scenario that does not set `timeout`.
pub const DEFAULT_SCENARIO_TIMEOUT: Duration = Duration::from_mins(5);

/// How long an `expect` step waits when it does not set `timeout`.
pub const DEFAULT_EXPECT_TIMEOUT: Duration = Duration::from_secs(60);

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
    /// API's backend, with a fault ([`super::container`]).
    Container(super::container::ContainerSpec),
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
                Some(p) => write!(f, "delete {} (propagationPolicy {p:?})", d.object),
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
        }
    }
}

/// What a `delete` step deletes: an object reference, written inline
/// (`delete: {kind: ConfigMap, name: mymap, namespace: app}`), plus how
/// its dependents go (`propagationPolicy`, as in `DeleteOptions`; the
/// server's default for the kind when left out).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "DeleteWire", into = "DeleteWire")]
pub struct DeleteSpec {
    /// The object.
    pub object: ObjectRef,
    /// `Foreground`, `Background` or `Orphan`.
    pub propagation_policy: Option<PropagationPolicy>,
}

/// `DeleteOptions.propagationPolicy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PropagationPolicy {
    /// The owner waits (finalizer `foregroundDeletion`) until every
    /// dependent with `blockOwnerDeletion` is gone.
    Foreground,
    /// The owner goes at once; the garbage collector deletes dependents.
    Background,
    /// Dependents are left, their ownerReferences removed.
    Orphan,
}

/// The written form of a [`DeleteSpec`]: the object reference's keys and
/// `propagationPolicy` side by side.
#[derive(Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct DeleteWire {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    api_version: Option<String>,
    kind: Located<String>,
    name: Located<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    namespace: Option<Located<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    propagation_policy: Option<PropagationPolicy>,
}

impl From<DeleteWire> for DeleteSpec {
    fn from(w: DeleteWire) -> Self {
        DeleteSpec {
            object: ObjectRef {
                api_version: w.api_version,
                kind: w.kind,
                name: w.name,
                namespace: w.namespace,
            },
            propagation_policy: w.propagation_policy,
        }
    }
}

impl From<DeleteSpec> for DeleteWire {
    fn from(d: DeleteSpec) -> Self {
        DeleteWire {
            api_version: d.object.api_version,
            kind: d.object.kind,
            name: d.object.name,
            namespace: d.object.namespace,
            propagation_policy: d.propagation_policy,
        }
    }
}

/// What an `apply` step applies. Written either as a bare path
/// (`apply: crd-orphan/crd.yaml`) or as a mapping
/// (`apply: {file: crd-orphan/widget.yaml, namespace: app}`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApplySpec {
    /// Manifest file, relative to the fixtures directory. It may hold
    /// several YAML documents.
    pub file: Located<PathBuf>,
    /// Logical namespace for the file's namespaced objects that do not name
    /// one themselves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<Located<String>>,
}

impl fmt::Display for ApplySpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(ns) = &self.namespace {
            write!(f, " in namespace {ns}")?;
        }
        Ok(())
    }
}

/// The long form of [`ApplySpec`], as written.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ApplyLong {
    file: Located<PathBuf>,
    #[serde(default)]
    namespace: Option<Located<String>>,
}

/// The two ways of writing an [`ApplySpec`], before positions are settled.
enum ApplyForm {
    Short(String),
    Long(ApplyLong),
}

impl<'de> Deserialize<'de> for ApplyForm {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct FormVisitor;

        impl<'de> de::Visitor<'de> for FormVisitor {
            type Value = ApplyForm;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a fixture path, or a mapping with `file` and optional `namespace`")
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<ApplyForm, E> {
                Ok(ApplyForm::Short(v.to_owned()))
            }

            fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<ApplyForm, A::Error> {
                // Hand the same map to the derived impl, so unknown keys and
                // missing `file` are reported exactly as for any other struct.
                ApplyLong::deserialize(de::value::MapAccessDeserializer::new(map))
                    .map(ApplyForm::Long)
            }
        }

        deserializer.deserialize_any(FormVisitor)
    }
}

impl<'de> Deserialize<'de> for ApplySpec {
    /// Accepts both forms. A bare path takes the position of the `apply`
    /// value itself, so a missing fixture is reported on the step's line.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let form = Located::<ApplyForm>::deserialize(deserializer)?;
        Ok(match form.value {
            ApplyForm::Short(file) => ApplySpec {
                file: Located::new(PathBuf::from(file), form.position),
                namespace: None,
            },
            ApplyForm::Long(long) => ApplySpec {
                file: long.file,
                namespace: long.namespace,
            },
        })
    }
}

/// A reference to one Kubernetes object, by kind and name.
///
/// `namespace` and, for `kind: Namespace`, `name` are *logical* namespace
/// names from [`Scenario::namespaces`]; the runner maps them to the real
/// namespaces of the run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ObjectRef {
    /// `group/version` (or `v1` for the core group). May be left out for
    /// the well-known kinds of [`default_api_version`](super::default_api_version);
    /// the loader fills it in, so it is always `Some` in a loaded scenario.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// The object's kind, such as `ConfigMap`.
    pub kind: Located<String>,
    /// The object's name (a logical namespace name for `kind: Namespace`).
    pub name: Located<String>,
    /// Logical namespace, for namespaced kinds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<Located<String>>,
}

impl ObjectRef {
    /// For a name written as a prefix pattern (`cron-job-dashmail-*`, for
    /// objects whose names a controller generates), the prefix. Only
    /// `terminating` and `gone` take one: some object whose name starts
    /// with it is Terminating; no object whose name starts with it exists.
    pub fn name_prefix(&self) -> Option<&str> {
        self.name.strip_suffix('*')
    }

    /// The explicit apiVersion, or the well-known default for the kind.
    pub fn api_version(&self) -> Option<&str> {
        self.api_version
            .as_deref()
            .or_else(|| super::default_api_version(&self.kind))
    }
}

impl fmt::Display for ObjectRef {
    /// `ConfigMap app/mymap`, or `Namespace app` for cluster-scoped objects.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} {ns}/{}", self.kind, self.name),
            None => write!(f, "{} {}", self.kind, self.name),
        }
    }
}

/// A fault injected on a node, because it cannot be caused through the API.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub enum Fault {
    /// Keep a volume of the pod busy on its node (a nested bind mount under
    /// the pod's volume directory), so the kubelet's unmount fails with
    /// EBUSY and the pod stays Terminating. Failure catalog case 4.
    BusyMount(PodRef),
    /// Stop the pod's containerd shim, so the runtime can no longer stop
    /// its containers and the pod stays Terminating. Failure catalog case 5.
    WedgeShim(PodRef),
    /// Stop the kubelet of the node the pod runs on (the node is lost to
    /// the control plane: it goes NotReady/Unknown and nothing on it
    /// finishes a deletion). Seed 004's pods on a NotReady node. Stops
    /// every pod's progress on that node: scenarios using it must be
    /// `serial`.
    StopKubelet(PodRef),
    /// Start a process on the node whose working directory is inside one
    /// of the pod's volume mounts (a Secret's or ConfigMap's tmpfs), so
    /// the kubelet's unmount fails with "target is busy" and the pod stays
    /// Terminating (kubernetes/kubernetes#113426: a node_exporter with
    /// host mounts). Failure catalog case 4.
    HoldVolume(PodVolumeRef),
    /// Move the CNI configuration of the pod's node away, so the network
    /// plugin cannot tear down a sandbox ("failed to destroy network for
    /// sandbox ...: cni plugin not initialized") and a deleted pod stays
    /// Terminating (projectcalico/calico#7958, containerd/containerd#8774).
    /// The node turns NotReady for new pods too.
    RemoveCniConfig(PodRef),
    /// Freeze the pod's cgroup with the cgroup freezer (v1
    /// `freezer.state` FROZEN, v2 `cgroup.freeze` 1), so its processes
    /// take no signal and the runtime's kill never finishes: the deleted
    /// pod stays Terminating with `FailedKillPod ... DeadlineExceeded`.
    FreezeCgroup(PodRef),
}

impl Fault {
    /// The fault's name as written in the file.
    pub fn kind(&self) -> &'static str {
        match self {
            Fault::BusyMount(_) => "busyMount",
            Fault::WedgeShim(_) => "wedgeShim",
            Fault::StopKubelet(_) => "stopKubelet",
            Fault::HoldVolume(_) => "holdVolume",
            Fault::RemoveCniConfig(_) => "removeCniConfig",
            Fault::FreezeCgroup(_) => "freezeCgroup",
        }
    }

    /// The pod the fault targets.
    pub fn pod(&self) -> PodRef {
        match self {
            Fault::BusyMount(pod)
            | Fault::WedgeShim(pod)
            | Fault::StopKubelet(pod)
            | Fault::RemoveCniConfig(pod)
            | Fault::FreezeCgroup(pod) => pod.clone(),
            Fault::HoldVolume(v) => PodRef {
                pod: v.pod.clone(),
                namespace: v.namespace.clone(),
            },
        }
    }

    /// Whether the fault touches a node (and so may disturb other
    /// scenarios' pods on it). True for every fault there is today.
    pub fn is_node_level(&self) -> bool {
        match self {
            Fault::BusyMount(_)
            | Fault::WedgeShim(_)
            | Fault::StopKubelet(_)
            | Fault::HoldVolume(_)
            | Fault::RemoveCniConfig(_)
            | Fault::FreezeCgroup(_) => true,
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} on pod {}", self.kind(), self.pod())
    }
}

/// One volume of a pod, by its name in the pod spec.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PodVolumeRef {
    /// The pod's name.
    pub pod: Located<String>,
    /// Its logical namespace.
    pub namespace: Located<String>,
    /// The volume's name in the pod spec.
    pub volume: Located<String>,
}

/// A pod, by logical namespace and name.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PodRef {
    /// The pod's name.
    pub pod: Located<String>,
    /// Its logical namespace.
    pub namespace: Located<String>,
}

impl fmt::Display for PodRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.pod)
    }
}

/// A gate: every condition must hold at the same time before the timeout.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Expect {
    /// What the gate proves; see [`Phase`].
    pub phase: Phase,
    /// How long to wait (default 60s).
    #[serde(default = "default_expect_timeout")]
    pub timeout: Located<Duration>,
    /// The conditions. Never empty.
    pub that: Located<Vec<Condition>>,
}

impl fmt::Display for Expect {
    /// `expect symptom within 60s: ConfigMap app/mymap is Terminating; ...`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "expect {} within {}: ", self.phase, self.timeout)?;
        for (i, condition) in self.that.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            condition.fmt(f)?;
        }
        Ok(())
    }
}

/// What an `expect` step proves, which decides how its failure is reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Phase {
    /// The fidelity gate: the injected failure really shows the symptoms the
    /// seed documents describe. If this fails the harness is broken, not
    /// the doctor.
    Symptom,
    /// After the doctor: the cluster is healthy again. If this fails the
    /// doctor's remedy did not work.
    Recovered,
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Phase::Symptom => "symptom",
            Phase::Recovered => "recovered",
        })
    }
}

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

/// A live controller run by the harness (see [`Step::Controller`]).
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
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_conversion_changes: bool,
    /// Finalizer keys whose owner the operator has checked is gone, as
    /// `unstuck doctor --assume-dead KEY` names them: an `Unknown` owner
    /// of such a key counts as dead, an `Alive` one never does. For
    /// incidents where the doctor rightly refuses on its own evidence and
    /// a person's check is the safe way on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub assume_dead: Vec<Located<String>>,
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
        if self.apply && self.allow_conversion_changes {
            f.write_str(", CRD conversion changes allowed")?;
        }
        Ok(())
    }
}

fn default_scenario_timeout() -> Located<Duration> {
    Located::unlocated(DEFAULT_SCENARIO_TIMEOUT)
}

fn default_expect_timeout() -> Located<Duration> {
    Located::unlocated(DEFAULT_EXPECT_TIMEOUT)
}

fn default_true() -> bool {
    true
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
    use crate::scenario::condition::{
        ApiServiceConditionCheck, ConditionStatus, NamespaceConditionCheck,
    };

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

    #[test]
    fn status_condition_checks_print_subject_type_status_and_optional_parts() {
        let ns = |reason: Option<&str>, message: Option<&str>| {
            NamespaceConditionCheck {
                namespace: String::from("app").into(),
                condition_type: String::from("NamespaceContentRemaining").into(),
                status: ConditionStatus::True,
                reason: reason.map(String::from),
                message_contains: message.map(|m| String::from(m).into()),
            }
            .to_string()
        };
        assert_eq!(
            ns(None, None),
            "namespace app has NamespaceContentRemaining=True"
        );
        assert_eq!(
            ns(Some("R"), None),
            "namespace app has NamespaceContentRemaining=True (reason R)"
        );
        assert_eq!(
            ns(None, Some("m")),
            "namespace app has NamespaceContentRemaining=True (message contains \"m\")"
        );
        assert_eq!(
            ns(Some("R"), Some("m")),
            "namespace app has NamespaceContentRemaining=True (reason R, message contains \"m\")"
        );
        let api = ApiServiceConditionCheck {
            name: String::from("v1beta1.metrics.k8s.io").into(),
            condition_type: String::from("Available").into(),
            status: ConditionStatus::False,
            reason: Some("ServiceNotFound".into()),
            message_contains: Some(String::from("not present").into()),
        };
        assert_eq!(
            api.to_string(),
            "APIService v1beta1.metrics.k8s.io has Available=False \
             (reason ServiceNotFound, message contains \"not present\")"
        );
    }
}
