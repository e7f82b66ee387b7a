//! A starting point for a scenario from what the doctor saw on a real
//! cluster (`unstuck doctor --save-snapshot`): the stuck objects become
//! fixtures (metadata only, finalizers kept), the blockers the doctor
//! proved (a dead APIService, a dead webhook) become fixtures too, and the
//! steps re-create them, delete what was Terminating, wait for the same
//! symptoms, run the doctor expecting the same findings and require
//! everything gone. Pure: the caller writes the files.
//!
//! What a snapshot cannot give is left to the person writing the scenario
//! and said in [`Scaffold::notes`]: a spec (the snapshot holds metadata
//! only), node-level faults for pods stuck on their node, and the message
//! texts worth asserting.

mod blockers;
mod fixtures;

use std::collections::BTreeSet;
use std::fmt::Write as _;

use k8s_openapi::api::core::v1::Namespace;

use super::fault_catalogue::CATALOGUE;
use crate::doctor::model::NodeCause;
use crate::doctor::{
    DiagnoseOptions, Finding, FindingKind, ObjectRecord, Snapshot, diagnose, snapshot::display_name,
};
use crate::text::quoted;

/// The files of a new scenario, paths relative to the scenarios and the
/// fixtures directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scaffold {
    /// `<name>.yaml` and its text.
    pub scenario: (String, String),
    /// `<name>/<file>.yaml` and its text, in apply order.
    pub fixtures: Vec<(String, String)>,
    /// What the snapshot could not give, for the person to finish.
    pub notes: Vec<String>,
}

/// Why no scaffold could be made.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ScaffoldError {
    #[error(
        "the snapshot shows nothing Terminating (no object or namespace with a deletionTimestamp); save it while the incident is happening"
    )]
    NothingStuck,
    #[error(
        "scenario name {} is not a DNS label (lowercase letters, digits and '-', at most 40 characters)",
        quoted(.0)
    )]
    BadName(String),
}

/// The scenario's parts as they are built: fixtures, and the lines of the
/// steps and of the symptom and recovered gates.
struct Draft<'a> {
    name: &'a str,
    taken: String,
    fixtures: Vec<(String, String)>,
    steps: String,
    symptoms: String,
    recovered: String,
    /// `delete` steps, which go after every `apply`.
    deletes: String,
    allow_webhooks: bool,
}

/// Builds the scenario `name` from `snapshot`.
pub fn scaffold(name: &str, snapshot: &Snapshot) -> Result<Scaffold, ScaffoldError> {
    let label_ok = !name.is_empty()
        && name.len() <= super::MAX_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-');
    if !label_ok {
        return Err(ScaffoldError::BadName(name.to_owned()));
    }
    // What the doctor says now: every finding, however young the deletion.
    let findings = diagnose(
        snapshot,
        &DiagnoseOptions {
            stuck_after: std::time::Duration::ZERO,
            ..Default::default()
        },
    );
    let mut notes = Vec::new();
    let stuck = Stuck::of(snapshot, &mut notes);
    if stuck.objects.is_empty() && stuck.namespaces.is_empty() {
        return Err(ScaffoldError::NothingStuck);
    }
    let mut draft = Draft {
        name,
        taken: snapshot.taken_at.to_string(),
        fixtures: Vec::new(),
        steps: String::new(),
        symptoms: String::new(),
        recovered: String::new(),
        deletes: String::new(),
        allow_webhooks: false,
    };
    draft.crds(&stuck.objects);
    draft.namespace_objects(&stuck.namespaces);
    draft.objects(&stuck.objects, &stuck.namespace_names);
    draft.blockers(&findings, snapshot);
    draft.namespace_deletes(&stuck.namespaces);
    let text = draft.text(&findings, &stuck);
    notes.push(format!(
        "findings at the snapshot: {}",
        if findings.is_empty() {
            "none".to_owned()
        } else {
            findings
                .iter()
                .map(|f: &Finding| format!("{} ({})", f.kind().as_str(), f.subject))
                .collect::<Vec<_>>()
                .join(", ")
        }
    ));
    Ok(Scaffold {
        scenario: (format!("{name}.yaml"), text),
        fixtures: draft.fixtures,
        notes,
    })
}

/// What the snapshot shows stuck: namespaces being deleted, and the
/// objects to re-create.
struct Stuck<'s> {
    namespaces: Vec<&'s Namespace>,
    namespace_names: BTreeSet<String>,
    objects: Vec<&'s ObjectRecord>,
}

impl<'s> Stuck<'s> {
    /// Terminating objects, and in a terminating namespace whatever still
    /// carries a finalizer. Pods are left to a node fault, in `notes`.
    fn of(snapshot: &'s Snapshot, notes: &mut Vec<String>) -> Self {
        let namespaces: Vec<&Namespace> = snapshot
            .namespaces
            .iter()
            .filter(|n| n.metadata.deletion_timestamp.is_some())
            .collect();
        let namespace_names: BTreeSet<String> = namespaces
            .iter()
            .filter_map(|n| n.metadata.name.clone())
            .collect();
        let mut objects: Vec<&ObjectRecord> = Vec::new();
        for r in snapshot
            .terminating
            .iter()
            .chain(snapshot.namespace_content.iter())
        {
            if r.kind == "Namespace" || r.kind == "Event" {
                continue;
            }
            if r.kind == "Pod" {
                notes.push(pod_note(r));
                continue;
            }
            let in_stuck_ns = r.namespace().is_some_and(|ns| namespace_names.contains(ns));
            let held = !fixtures::kept_finalizers(&r.metadata).is_empty();
            let terminating = r.metadata.deletion_timestamp.is_some();
            // Terminating and held, cluster-scoped, or in a stuck namespace;
            // or, in a stuck namespace, held though not deleted yet.
            let keep = (terminating && (held || in_stuck_ns || r.namespace().is_none()))
                || (in_stuck_ns && held);
            if keep && !objects.iter().any(|o| o.metadata.uid == r.metadata.uid) {
                objects.push(r);
            }
        }
        Stuck {
            namespaces,
            namespace_names,
            objects,
        }
    }
}

/// Why a stuck pod is not re-created: it needs a node fault, one of the
/// catalogue's, picked by the finding the node doctor names.
fn pod_note(pod: &ObjectRecord) -> String {
    let mut by_finding: Vec<(NodeCause, Vec<String>)> = Vec::new();
    for f in CATALOGUE.iter().filter(|f| f.node_level) {
        let mut fault = f.name.to_owned();
        for p in f.params.iter().filter(|p| p.required) {
            let _ = write!(fault, " (with {})", p.name);
        }
        match by_finding.iter_mut().find(|(c, _)| *c == f.reproduces) {
            Some((_, faults)) => faults.push(fault),
            None => by_finding.push((f.reproduces, vec![fault])),
        }
    }
    let faults: Vec<String> = by_finding
        .iter()
        .map(|(cause, faults)| format!("{cause}: {}", faults.join(", ")))
        .collect();
    format!(
        "pod {} is left out: a pod stuck on its node needs a node fault, picked by the node doctor's finding; {}",
        display_name(&pod.metadata),
        faults.join("; ")
    )
}

impl Draft<'_> {
    /// The scenario file.
    fn text(&self, findings: &[Finding], stuck: &Stuck) -> String {
        let name = self.name;
        let mut namespaces = stuck.namespace_names.clone();
        for o in &stuck.objects {
            if let Some(ns) = o.namespace() {
                namespaces.insert(ns.to_owned());
            }
        }
        let kinds: BTreeSet<&str> = findings
            .iter()
            .filter(|f| f.kind() != FindingKind::PodStuckTerminating)
            .map(|f| f.kind().as_str())
            .collect();
        let mut text = String::new();
        let _ = writeln!(
            text,
            "# Made by `unstuck new-scenario` from a doctor snapshot taken at {}.\n# Finish it: give the fixtures the spec they need, assert the messages\n# you saw (messageContains), then `unstuck run --filter {name}`.",
            self.taken
        );
        let _ = writeln!(text, "name: {name}");
        let _ = writeln!(
            text,
            "description: >-\n  TODO: which incident this is, what a person saw, and what the doctor\n  should do. Reproduced from a snapshot of {} stuck object(s).",
            stuck.objects.len() + stuck.namespaces.len()
        );
        let _ = writeln!(
            text,
            "# incident: owner/repo#number   (the public thread, if there is one)"
        );
        let _ = writeln!(
            text,
            "namespaces: [{}]",
            namespaces.into_iter().collect::<Vec<_>>().join(", ")
        );
        let _ = writeln!(text, "timeout: 4m");
        let _ = writeln!(text, "steps:");
        text.push_str(&self.steps);
        if !self.symptoms.is_empty() {
            let _ = writeln!(
                text,
                "  - expect:\n      phase: symptom\n      timeout: 90s\n      that:\n{}",
                self.symptoms.trim_end_matches('\n')
            );
        }
        let _ = writeln!(text, "  - doctor:");
        let _ = writeln!(
            text,
            "      expectFindings: [{}]",
            kinds.into_iter().collect::<Vec<_>>().join(", ")
        );
        if self.allow_webhooks {
            let _ = writeln!(text, "      allowWebhookChanges: true");
        }
        if !self.recovered.is_empty() {
            let _ = writeln!(
                text,
                "  - expect:\n      phase: recovered\n      timeout: 2m\n      that:\n{}",
                self.recovered.trim_end_matches('\n')
            );
        }
        text
    }
}
