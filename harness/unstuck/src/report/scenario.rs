//! One scenario's report: the runner fills it, every renderer and
//! `unstuck report` read it (from memory, or back from `report.json`).
//! It lives on the report side, not in the runner, so that reading and
//! merging reports never needs the runner: the runner depends on this
//! module, never the other way round.

use std::{collections::BTreeMap, path::PathBuf};

use serde::{Deserialize, Serialize};
use unstuck_core::{
    doctor::{FindingKind, ObjectRef, node::NodeCause},
    scenario::{Scenario, ScenarioMeta},
};

use super::cleanup::CleanupReport;
use crate::{cluster::exits::ComponentExit, doctor::DoctorReport};

/// The verdict of one scenario.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "result", rename_all = "camelCase")]
pub enum Outcome {
    Passed,
    /// `step` counts from 1 as `steps` lists them; 0 is the set-up before
    /// the first step (the run's namespaces) or a scenario that never ran.
    Failed {
        step: usize,
        reason: String,
    },
    /// The run was stopped (Ctrl-C, SIGTERM) while this scenario ran: no
    /// verdict on it. Its cleanup ran. `step` as for `Failed`.
    Interrupted {
        step: usize,
        reason: String,
    },
}

impl Outcome {
    /// Why it did not pass, when it did not.
    pub fn reason(&self) -> Option<&str> {
        match self {
            Outcome::Passed => None,
            Outcome::Failed { reason, .. } | Outcome::Interrupted { reason, .. } => Some(reason),
        }
    }
}

/// What a doctor found, by which doctor: the API doctor's kinds and the
/// node doctor's causes are two vocabularies, kept apart by type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "doctor", content = "kind", rename_all = "camelCase")]
pub enum FoundKind {
    Api(FindingKind),
    Node(NodeCause),
}

impl FoundKind {
    pub fn name(self) -> &'static str {
        match self {
            FoundKind::Api(k) => k.as_str(),
            FoundKind::Node(c) => c.name(),
        }
    }
}

/// One finding of a doctor step, as data: what `report matrix` compares
/// across versions (its kind and subject; the summary's wording may
/// change between versions without a finding changing).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReportedFinding {
    #[serde(flatten)]
    pub kind: FoundKind,
    pub subject: ObjectRef,
    pub summary: String,
}

/// One step as it ran.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StepRecord {
    pub index: usize,
    pub kind: String,
    pub summary: String,
    pub duration_ms: u128,
    pub ok: bool,
    /// Quoted facts: what the cluster showed when the step passed, or why it failed.
    pub evidence: Vec<String>,
}

/// Everything a report needs about one scenario.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ScenarioReport {
    /// The scenario's own metadata, kept as the model gives it (its keys
    /// sit at the top level of the JSON, where they always have).
    #[serde(flatten)]
    pub scenario: ScenarioMeta,
    pub namespaces: NamespaceMap,
    pub outcome: Outcome,
    pub steps: Vec<StepRecord>,
    /// The symptom gate's evidence, quoted from the cluster.
    pub symptoms: Vec<String>,
    /// `Kind: summary` of each finding the doctor made before any remedy.
    pub findings: Vec<String>,
    /// The same findings as data (absent from reports written before
    /// it was kept).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub found: Vec<ReportedFinding>,
    /// Remedies the doctor carried out.
    pub remedies: Vec<String>,
    /// From the start of the doctor step to its diagnosis.
    pub time_to_detect_ms: Option<u128>,
    /// From the start of the doctor step to the recovered gate passing.
    pub time_to_recover_ms: Option<u128>,
    pub duration_ms: u128,
    pub cleanup: CleanupReport,
    pub out_dir: PathBuf,
    /// The cluster of its own the scenario ran on, when it had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isolated: Option<IsolatedCluster>,
    /// Control-plane components of its cluster that exited (and were
    /// restarted) while it ran: a failure then may be the cluster's, not
    /// the scenario's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cluster_exits: Vec<ComponentExit>,
    /// What waited on what when each doctor step looked, before any
    /// remedy: the graph of its first round, with the node doctor's causes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub graphs: Vec<StepGraph>,
    /// Evidence files of the scenario that could not be written, each
    /// with its path and why: the evidence is missing, and that is said.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unwritten: Vec<String>,
    #[serde(skip)]
    pub doctor: Option<DoctorReport>,
}

/// The blocker graph one doctor step saw.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StepGraph {
    /// The step's number in the scenario (from 1, as `steps` lists them).
    pub step: usize,
    pub graph: unstuck_core::doctor::BlockerGraph,
}

/// The cluster a scenario ran on, when it was not the shared one.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct IsolatedCluster {
    pub name: String,
    /// From `up` to node Ready.
    pub boot_ms: u128,
    /// Teardown of the scenario's own cluster, in words.
    pub teardown: String,
}

impl ScenarioReport {
    /// The scenario's name.
    pub fn name(&self) -> &str {
        &self.scenario.name
    }

    pub fn passed(&self) -> bool {
        self.outcome == Outcome::Passed
    }

    /// Stopped with the run, no verdict ([`Outcome::Interrupted`]).
    pub fn interrupted(&self) -> bool {
        matches!(self.outcome, Outcome::Interrupted { .. })
    }

    /// A report for a scenario that never produced one of its own (its
    /// task panicked): it counts as failed, with the reason.
    pub fn lost(scenario: &Scenario, out_dir: PathBuf, reason: String) -> Self {
        Self::start(
            scenario,
            NamespaceMap::default(),
            out_dir,
            Outcome::Failed { step: 0, reason },
        )
    }

    /// A report for a scenario the run was stopped before it began (its
    /// cluster was still starting): interrupted at step 0, with the reason.
    pub fn stopped_before_start(scenario: &Scenario, out_dir: PathBuf, reason: String) -> Self {
        Self::start(
            scenario,
            NamespaceMap::default(),
            out_dir,
            Outcome::Interrupted { step: 0, reason },
        )
    }

    /// A report with nothing recorded yet.
    pub fn start(
        scenario: &Scenario,
        namespaces: NamespaceMap,
        out_dir: PathBuf,
        outcome: Outcome,
    ) -> Self {
        Self {
            scenario: scenario.meta(),
            namespaces,
            outcome,
            steps: Vec::new(),
            symptoms: Vec::new(),
            findings: Vec::new(),
            found: Vec::new(),
            remedies: Vec::new(),
            time_to_detect_ms: None,
            time_to_recover_ms: None,
            duration_ms: 0,
            cleanup: Default::default(),
            out_dir,
            isolated: None,
            cluster_exits: Vec::new(),
            graphs: Vec::new(),
            unwritten: Vec::new(),
            doctor: None,
        }
    }

    /// Writes `value` as pretty JSON to `name` in the scenario's folder;
    /// a failure is said on stderr and kept in [`Self::unwritten`].
    pub fn write_evidence(&mut self, name: &str, value: &impl Serialize) {
        let path = self.out_dir.join(name);
        if let Err(e) = super::write::json(&path, value) {
            self.note_unwritten(e.to_string());
        }
    }

    /// Writes this report as `scenario.json` in its folder; a failure is
    /// said on stderr and kept in the report (which still reaches the
    /// run's `report.json`).
    pub fn save(&mut self) {
        let path = self.out_dir.join("scenario.json");
        tracing::debug!(target: crate::STEP_LOG, "writing the report of scenario {}", self.scenario.name);
        if let Err(e) = super::write::json(&path, self) {
            self.note_unwritten(e.to_string());
        }
    }

    /// Says on stderr, and keeps in the report, that evidence is missing.
    pub fn note_unwritten(&mut self, what: String) {
        eprintln!("[unstuck] {}: {what}", self.scenario.name);
        self.unwritten.push(what);
    }
}

/// Logical namespace names of a scenario mapped to this run's namespaces.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct NamespaceMap {
    map: BTreeMap<String, String>,
}

impl NamespaceMap {
    /// Maps each logical name to `<logical>-<run id>` (63 characters at most).
    pub fn new<'a>(logical: impl IntoIterator<Item = &'a str>, run_id: &str) -> Self {
        let map = logical
            .into_iter()
            .map(|l| {
                let keep = 62usize.saturating_sub(run_id.len()).min(l.len());
                (l.to_string(), format!("{}-{run_id}", &l[..keep]))
            })
            .collect();
        Self { map }
    }

    /// The real namespace for a logical name. Loading guarantees every name
    /// used is declared; an undeclared one is passed through unchanged.
    pub fn real(&self, logical: &str) -> String {
        self.map
            .get(logical)
            .cloned()
            .unwrap_or_else(|| logical.to_string())
    }

    /// Whether `name` is one of the scenario's logical namespaces.
    pub fn is_logical(&self, name: &str) -> bool {
        self.map.contains_key(name)
    }

    pub fn real_names(&self) -> Vec<String> {
        self.map.values().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logical_names_map_to_unique_bounded_names() {
        let m = NamespaceMap::new(["app", &"x".repeat(70)], "k3x9q2");
        assert_eq!(m.real("app"), "app-k3x9q2");
        assert!(m.real(&"x".repeat(70)).len() <= 63);
        assert_eq!(m.real_names().len(), 2);
    }

    /// The scenario's metadata sits at the top level of the JSON, under
    /// the keys earlier reports (and the tests reading them) use, and a
    /// report read back keeps it and its u128 timings.
    #[test]
    fn the_metadata_is_flat_in_the_json_and_reads_back() {
        let s: Scenario = unstuck_core::scenario::load_str(
            "name: demo\ndescription: d\ncatalogCase: 2\nincident: a/b#1\nnamespaces: [app]\nsteps:\n  - delete: {kind: ConfigMap, name: m, namespace: app}\n",
            std::path::Path::new("/s/demo.yaml"),
        )
        .expect("loads");
        let mut r = ScenarioReport::start(
            &s,
            NamespaceMap::new(["app"], "abc"),
            "/o".into(),
            Outcome::Passed,
        );
        r.duration_ms = 5_000_000_000_123;
        r.time_to_recover_ms = Some(1500);
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["name"], "demo");
        assert_eq!(json["description"], "d");
        assert_eq!(json["catalog_case"], 2);
        assert_eq!(json["incident"], "a/b#1");
        assert_eq!(json["file"], "/s/demo.yaml");
        assert_eq!(json["outcome"]["result"], "passed");
        // As `unstuck report` reads it back: from the file's text.
        let text = serde_json::to_string_pretty(&r).unwrap();
        let back: ScenarioReport = serde_json::from_str(&text).unwrap();
        assert_eq!(back.scenario, s.meta());
        assert_eq!(back.duration_ms, r.duration_ms);
        assert_eq!(back.time_to_recover_ms, Some(1500));
    }
}
