//! Checks that need the whole parsed scenario, each reported at the line a
//! person has to change.
//!
//! The parser already rejects what does not fit the format. What is left is
//! well-formed text that cannot work: a step that names a namespace the
//! scenario never declared would run in whatever namespace happened to
//! exist, a misspelled condition type would wait until the timeout for
//! something that can never appear. Catching these before a cluster is even
//! started saves a slow, confusing failure later.

mod expect;
mod steps;

use std::path::Component;

use super::{
    fault::Fault,
    kinds::{default_api_version, is_namespaced},
    located::{Located, Position},
    model::{Scenario, Step},
    refs::LogicalRef,
};
use crate::duration::Duration;
use crate::text::quoted;

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
    header(s)?;
    let ctx = Context {
        namespaces: s.namespaces.iter().map(|ns| ns.value.clone()).collect(),
        timeout: s.timeout.value,
    };
    let mut doctor_seen = false;
    let mut registries: Vec<super::RegistrySpec> = Vec::new();
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
            Step::Expect(e) => ctx.expect(e, at, doctor_seen)?,
            Step::Doctor(doctor) => {
                steps::doctor_check(doctor)?;
                doctor_seen = true;
            }
            Step::Container(c) => {
                dns_label("container name", &c.name)?;
                ctx.declared(&c.service.namespace)?;
                fixture_path(&c.register)?;
                c.check().map_err(|(at, why)| problem(at, why))?;
            }
            Step::Registry(r) => {
                dns_label("registry name", &r.name)?;
                r.check().map_err(|(at, why)| problem(at, why))?;
                registry_again(&registries, r)?;
                if !registries.iter().any(|e| e.name.value == r.name.value) {
                    registries.push(r.clone());
                }
            }
            Step::Controller(c) => {
                ctx.declared(&c.namespace)?;
                for ns in &c.watches {
                    ctx.declared(ns)?;
                }
                steps::controller(c)?;
            }
        }
    }
    Ok(())
}

/// A later step naming a registry an earlier one started changes only its
/// fault: what it pushes and whether it wants credentials are the first
/// step's.
fn registry_again(started: &[super::RegistrySpec], r: &super::RegistrySpec) -> Check {
    let Some(first) = started.iter().find(|e| e.name.value == r.name.value) else {
        return Ok(());
    };
    if let Some(p) = r.push.first() {
        return Err(problem(
            p.position,
            format!(
                "registry {} was started by an earlier step, which pushes its images; a later step only changes its fault (move this push there)",
                quoted(r.name.as_str())
            ),
        ));
    }
    if r.auth != first.auth {
        return Err(problem(
            r.name.position,
            format!(
                "registry {} was started with auth {}; a later step only changes its fault (leave auth out here)",
                quoted(r.name.as_str()),
                first.auth
            ),
        ));
    }
    Ok(())
}

/// Everything before the steps: name, description, seeds, incident,
/// namespaces, timeout, and that there are steps.
fn header(s: &Scenario) -> Check {
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
                    "seed id {} should be the three-digit number of a seed document, like \"001\"",
                    quoted(seed.as_str())
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
                "incident {} should name a public thread as owner/repo#number, like \"kubescape/kubescape#1571\"",
                quoted(incident.as_str())
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
                format!("namespace {} is declared twice", quoted(ns.as_str())),
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
                "namespace {} is not declared in the scenario's `namespaces` ({known})",
                quoted(ns.as_str())
            ),
        ))
    }

    /// An object, or objects named by a prefix (`name: job-x-*`) of a
    /// namespaced kind.
    fn object_or_prefix(&self, object: &mut LogicalRef) -> Check {
        let Some(prefix) = object.name_prefix() else {
            return self.object(object);
        };
        if prefix.is_empty() || prefix.contains('*') {
            return Err(problem(
                object.name.position,
                format!(
                    "name pattern {} must be a prefix followed by one `*`, like cron-job-*",
                    quoted(object.name.as_str())
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

    fn object(&self, object: &mut LogicalRef) -> Check {
        nonempty("kind", &object.kind)?;
        nonempty("name", &object.name)?;
        if object.name.contains('*') {
            return Err(problem(
                object.name.position,
                format!(
                    "name {}: a name pattern (prefix-*) is only allowed in `terminating` and `gone` conditions",
                    quoted(object.name.as_str())
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

    /// The pod's namespace is declared, and the parameters are the ones
    /// the catalogue gives the fault, each written once and not empty.
    fn fault(&self, fault: &Fault) -> Check {
        let spec = fault.spec().ok_or_else(|| {
            problem(
                fault.kind.position,
                format!("{} is not a fault", quoted(fault.kind())),
            )
        })?;
        for (i, p) in fault.params.iter().enumerate() {
            if spec.param(&p.name).is_none() {
                return Err(problem(
                    p.name.position,
                    format!(
                        "fault {} takes no parameter `{}`; it is written {}",
                        spec.name,
                        p.name,
                        spec.usage()
                    ),
                ));
            }
            if fault.params[..i].iter().any(|q| q.name == p.name) {
                return Err(problem(
                    p.name.position,
                    format!("parameter `{}` is given twice", p.name),
                ));
            }
            nonempty(&p.name, &p.value)?;
        }
        if let Some(missing) = spec
            .params
            .iter()
            .find(|p| p.required && fault.param(p.name).is_none())
        {
            return Err(problem(
                fault.kind.position,
                format!(
                    "fault {} needs `{}` ({}); it is written {}",
                    spec.name,
                    missing.name,
                    missing.about,
                    spec.usage()
                ),
            ));
        }
        nonempty("pod", &fault.pod.pod)?;
        self.declared(&fault.pod.namespace)
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
            format!("invalid {what} {s}: {why}; use {rule}", s = quoted(s)),
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
        return fail(format!(
            "{} is not allowed",
            quoted(bad.encode_utf8(&mut [0; 4]))
        ));
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
