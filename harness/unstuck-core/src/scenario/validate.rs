//! Checks that need the whole parsed scenario, each reported at the line a
//! person has to change.
//!
//! The parser already rejects what does not fit the format. What is left is
//! well-formed text that cannot work: a step that names a namespace the
//! scenario never declared would run in whatever namespace happened to
//! exist, a misspelled condition type would wait until the timeout for
//! something that can never appear. Catching these before a cluster is even
//! started saves a slow, confusing failure later.

use std::path::{Component, Path};

use super::{
    condition::{
        API_SERVICE_CONDITION_TYPES, Condition, NAMESPACE_CONDITION_TYPES, NODE_CONDITION_TYPES,
    },
    error::{Diagnostic, LoadError},
    kinds::{default_api_version, is_namespaced},
    located::{Located, Position},
    model::{DoctorCheck, Expect, Fault, ObjectRef, Phase, Scenario, Step},
};
use crate::doctor::{FindingKind, node::diagnose::NodeCause};
use crate::duration::Duration;

/// Longest scenario name, leaving room in a 63-character namespace name for
/// a logical namespace and a per-run suffix.
pub const MAX_NAME_LEN: usize = 40;

/// One validation failure.
pub(crate) struct Problem {
    pub(crate) position: Position,
    pub(crate) message: String,
}

type Check = Result<(), Problem>;

fn problem(position: Position, message: impl Into<String>) -> Problem {
    Problem {
        position,
        message: message.into(),
    }
}

/// Validates a freshly parsed scenario and fills in defaults that depend on
/// other fields (the apiVersion of well-known kinds). Stops at the first
/// problem, checking in file order.
pub(crate) fn scenario(s: &mut Scenario) -> Check {
    dns_label("scenario name", &s.name)?;
    if s.description.trim().is_empty() {
        return Err(problem(
            s.description.position,
            "description is empty; say in a sentence which incident this scenario reproduces",
        ));
    }
    for seed in &s.seeds {
        if seed.len() != 3 || !seed.bytes().all(|b| b.is_ascii_digit()) {
            return Err(problem(
                seed.position,
                format!(
                    "seed id {:?} should be the three-digit number of a seed document, like \"001\"",
                    seed.as_str()
                ),
            ));
        }
    }
    if let Some(incident) = &s.incident
        && super::model::incident_url(incident).is_none()
    {
        return Err(problem(
            incident.position,
            format!(
                "incident {:?} should name a public thread as owner/repo#number, like \"kubescape/kubescape#1571\"",
                incident.as_str()
            ),
        ));
    }
    for (i, ns) in s.namespaces.iter().enumerate() {
        dns_label("namespace name", ns)?;
        if s.namespaces[..i]
            .iter()
            .any(|earlier| earlier.value == ns.value)
        {
            return Err(problem(
                ns.position,
                format!("namespace {:?} is declared twice", ns.as_str()),
            ));
        }
    }
    positive_timeout(&s.timeout, s.steps.position)?;
    if s.steps.is_empty() {
        return Err(problem(
            s.steps.position,
            "steps is empty; a scenario needs at least one step",
        ));
    }

    let ctx = Context {
        namespaces: s.namespaces.iter().map(|ns| ns.value.clone()).collect(),
        timeout: s.timeout.value,
    };
    let mut doctor_seen = false;
    for step in s.steps.value.iter_mut() {
        let at = step.position;
        match &mut step.value {
            Step::Apply(apply) => {
                fixture_path(&apply.file)?;
                if let Some(ns) = &apply.namespace {
                    ctx.declared(ns)?;
                }
            }
            Step::Delete(d) => ctx.object(&mut d.object)?,
            Step::Fault(fault) => ctx.fault(fault)?,
            Step::Expect(expect) => ctx.expect(expect, at, doctor_seen)?,
            Step::Doctor(doctor) => {
                doctor_check(doctor, at)?;
                doctor_seen = true;
            }
            Step::Container(c) => {
                dns_label("container name", &c.name)?;
                ctx.declared(&c.service.namespace)?;
                fixture_path(&c.register)?;
                c.check().map_err(|(at, why)| problem(at, why))?;
            }
            Step::Controller(c) => {
                ctx.declared(&c.namespace)?;
                for ns in &c.watches {
                    ctx.declared(ns)?;
                }
                if let super::model::ControllerCleanup::Fail { reason, message } = &c.cleanup {
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
            }
        }
    }
    Ok(())
}

/// What the steps are checked against.
struct Context {
    namespaces: Vec<String>,
    timeout: Duration,
}

impl Context {
    /// `ns` must be one of the scenario's logical namespaces.
    fn declared(&self, ns: &Located<String>) -> Check {
        if self.namespaces.contains(&ns.value) {
            return Ok(());
        }
        let known = if self.namespaces.is_empty() {
            "the scenario declares none".to_owned()
        } else {
            format!("declared: {}", self.namespaces.join(", "))
        };
        Err(problem(
            ns.position,
            format!(
                "namespace {:?} is not declared in the scenario's `namespaces` ({known})",
                ns.as_str()
            ),
        ))
    }

    /// An object, or objects named by a prefix (`name: job-x-*`) of a
    /// namespaced kind.
    fn object_or_prefix(&self, object: &mut ObjectRef) -> Check {
        let Some(prefix) = object.name_prefix() else {
            return self.object(object);
        };
        if prefix.is_empty() || prefix.contains('*') {
            return Err(problem(
                object.name.position,
                format!(
                    "name pattern {:?} must be a prefix followed by one `*`, like cron-job-*",
                    object.name.as_str()
                ),
            ));
        }
        if is_namespaced(&object.kind) == Some(false) {
            return Err(problem(
                object.name.position,
                format!(
                    "a name pattern needs a namespaced kind; a {} is cluster-scoped (name it exactly)",
                    object.kind
                ),
            ));
        }
        let exact = object.name.clone();
        object.name.value = prefix.to_string();
        let checked = self.object(object);
        object.name = exact;
        checked
    }

    fn object(&self, object: &mut ObjectRef) -> Check {
        nonempty("kind", &object.kind)?;
        nonempty("name", &object.name)?;
        if object.name.contains('*') {
            return Err(problem(
                object.name.position,
                format!(
                    "name {:?}: a name pattern (prefix-*) is only allowed in `terminating` and `gone` conditions",
                    object.name.as_str()
                ),
            ));
        }
        if object.api_version.is_none() {
            match default_api_version(&object.kind) {
                Some(api_version) => object.api_version = Some(api_version.to_owned()),
                None => {
                    return Err(problem(
                        object.kind.position,
                        format!(
                            "kind {} is not a well-known kind, so its apiVersion must be given \
                             (such as apiVersion: example.com/v1)",
                            object.kind
                        ),
                    ));
                }
            }
        }

        if object.kind.as_str() == "Namespace" {
            // The name of a Namespace object is a logical namespace name.
            self.declared(&object.name)?;
        }
        match (is_namespaced(&object.kind), &object.namespace) {
            (Some(true), None) => Err(problem(
                object.kind.position,
                format!(
                    "a {} lives in a namespace; add `namespace:` with one of the scenario's namespaces",
                    object.kind
                ),
            )),
            (Some(false), Some(ns)) => Err(problem(
                ns.position,
                format!("a {} is cluster-scoped and takes no namespace", object.kind),
            )),
            (_, Some(ns)) => self.declared(ns),
            (_, None) => Ok(()),
        }
    }

    fn fault(&self, fault: &Fault) -> Check {
        if let Fault::HoldVolume(v) = fault {
            nonempty("volume", &v.volume)?;
        }
        let pod = fault.pod();
        nonempty("pod", &pod.pod)?;
        self.declared(&pod.namespace)
    }

    fn expect(&self, expect: &mut Expect, at: Position, doctor_seen: bool) -> Check {
        if expect.phase == Phase::Recovered && !doctor_seen {
            return Err(problem(
                at,
                "an expect with phase: recovered must come after a doctor step (recovered means \
                 recovered by the doctor); use phase: symptom before it",
            ));
        }
        let timeout_at = expect.timeout.position.or(at);
        positive_timeout(&expect.timeout, at)?;
        if expect.timeout.value > self.timeout {
            return Err(problem(
                timeout_at,
                format!(
                    "this expect waits up to {}, longer than the whole scenario's timeout of {}",
                    expect.timeout, self.timeout
                ),
            ));
        }
        if expect.that.is_empty() {
            return Err(problem(
                expect.that.position.or(at),
                "`that` is empty; an expect needs at least one condition",
            ));
        }
        for condition in expect.that.value.iter_mut() {
            self.condition(condition)?;
        }
        Ok(())
    }

    fn condition(&self, condition: &mut Condition) -> Check {
        match condition {
            Condition::Terminating(object) | Condition::Gone(object) => {
                self.object_or_prefix(object)
            }
            Condition::Running(object) => {
                if object.kind.as_str() != "Pod" {
                    return Err(problem(
                        object.kind.position,
                        format!("`running` applies to Pods only, not to {}", object.kind),
                    ));
                }
                self.object(object)
            }
            Condition::Ready(object) => {
                if !matches!(
                    object.kind.as_str(),
                    "Deployment" | "ReplicaSet" | "StatefulSet"
                ) {
                    return Err(problem(
                        object.kind.position,
                        format!(
                            "`ready` applies to Deployments, ReplicaSets and StatefulSets, not to {}",
                            object.kind
                        ),
                    ));
                }
                self.object(object)
            }
            Condition::NamespaceCondition(check) => {
                self.declared(&check.namespace)?;
                known_condition_type(
                    &check.condition_type,
                    NAMESPACE_CONDITION_TYPES,
                    "a namespace",
                )?;
                if let Some(message) = &check.message_contains {
                    nonempty("messageContains", message)?;
                }
                Ok(())
            }
            Condition::ApiServiceCondition(check) => {
                nonempty("name", &check.name)?;
                known_condition_type(
                    &check.condition_type,
                    API_SERVICE_CONDITION_TYPES,
                    "an APIService",
                )?;
                if let Some(message) = &check.message_contains {
                    nonempty("messageContains", message)?;
                }
                Ok(())
            }
            Condition::Condition(check) => {
                let mut object = check.object();
                self.object(&mut object)?;
                check.api_version = object.api_version;
                nonempty("type", &check.condition_type)?;
                if let Some(message) = &check.message_contains {
                    nonempty("messageContains", message)?;
                }
                Ok(())
            }
            Condition::NodeCondition(check) => {
                nonempty("pod", &check.pod)?;
                self.declared(&check.namespace)?;
                known_condition_type(&check.condition_type, NODE_CONDITION_TYPES, "a node")?;
                if let Some(message) = &check.message_contains {
                    nonempty("messageContains", message)?;
                }
                Ok(())
            }
            Condition::NoContentLeft(ns) => self.declared(&ns.namespace),
            Condition::DiscoveryComplete {} => Ok(()),
            Condition::KubeletLog(check) => {
                nonempty("contains", &check.contains)?;
                match (&check.pod, &check.namespace) {
                    (Some(pod), None) => Err(problem(
                        pod.position,
                        "`pod` needs `namespace` too (a logical namespace of the scenario)",
                    )),
                    (None, Some(ns)) => Err(problem(
                        ns.position,
                        "`namespace` without `pod` says nothing: name the pod whose node's log to read",
                    )),
                    (Some(pod), Some(ns)) => {
                        nonempty("pod", pod)?;
                        self.declared(ns)
                    }
                    (None, None) => Ok(()),
                }
            }
            Condition::Event(check) => {
                if let Some(message) = &check.message_contains {
                    nonempty("messageContains", message)?;
                }
                self.declared(&check.namespace)
            }
        }
    }
}

/// A DNS label (RFC 1123): lowercase letters, digits and `-`, starting and
/// ending with a letter or digit, at most [`MAX_NAME_LEN`] characters here.
fn dns_label(what: &str, value: &Located<String>) -> Check {
    let s = value.as_str();
    let rule = format!(
        "lowercase letters, digits and '-', starting and ending with a letter or digit, \
         at most {MAX_NAME_LEN} characters"
    );
    let fail = |why: String| {
        Err(problem(
            value.position,
            format!("invalid {what} {s:?}: {why}; use {rule}"),
        ))
    };
    if s.is_empty() {
        return fail("it is empty".into());
    }
    if s.chars().count() > MAX_NAME_LEN {
        return fail(format!("it has {} characters", s.chars().count()));
    }
    if let Some(bad) = s
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-'))
    {
        return fail(format!("{bad:?} is not allowed"));
    }
    if s.starts_with('-') || s.ends_with('-') {
        return fail("it starts or ends with '-'".into());
    }
    Ok(())
}

fn nonempty(field: &str, value: &Located<String>) -> Check {
    if value.trim().is_empty() {
        return Err(problem(value.position, format!("`{field}` is empty")));
    }
    Ok(())
}

fn positive_timeout(timeout: &Located<Duration>, fallback: Position) -> Check {
    if timeout.is_zero() {
        return Err(problem(
            timeout.position.or(fallback),
            "a timeout of zero can never be met",
        ));
    }
    Ok(())
}

fn known_condition_type(value: &Located<String>, known: &[&str], owner: &str) -> Check {
    if known.contains(&value.as_str()) {
        return Ok(());
    }
    Err(problem(
        value.position,
        format!(
            "{:?} is not a condition type of {owner}; expected one of: {}",
            value.as_str(),
            known.join(", ")
        ),
    ))
}

/// A fixture path must stay inside the fixtures directory, so scenarios are
/// portable and the fixtures directory is the one place to look.
fn fixture_path(file: &Located<std::path::PathBuf>) -> Check {
    if file.as_os_str().is_empty() {
        return Err(problem(file.position, "the fixture path is empty"));
    }
    if file.is_absolute()
        || file
            .components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Err(problem(
            file.position,
            format!(
                "fixture path {} must be relative to the fixtures directory and stay inside it",
                file.display()
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

fn doctor_check(doctor: &DoctorCheck, at: Position) -> Check {
    if doctor.allow_conversion_changes && !doctor.apply {
        return Err(problem(
            at,
            "allowConversionChanges needs apply: true (a doctor that only diagnoses changes nothing)",
        ));
    }
    for kind in &doctor.expect_findings {
        if !is_finding_name(kind.as_str()) {
            let known: Vec<&str> = FindingKind::ALL.iter().map(|k| k.as_str()).collect();
            return Err(problem(
                kind.position,
                format!(
                    "{:?} is not a finding the doctor reports; API findings: {}; node findings: the causes of the node doctor (BusyVolume, WedgedRuntime, KubeletDown, ...)",
                    kind.as_str(),
                    known.join(", ")
                ),
            ));
        }
    }
    for key in &doctor.assume_dead {
        nonempty("assumeDead", key)?;
        if key.contains(char::is_whitespace) {
            return Err(problem(
                key.position,
                format!(
                    "assumeDead {:?} is not a finalizer key (keys have no spaces, like example.com/cleanup)",
                    key.as_str()
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
