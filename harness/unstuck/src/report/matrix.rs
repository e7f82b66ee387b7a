//! The suite run once per Kubernetes version, side by side: which
//! scenario passes on which version, and what each version says
//! differently (drift) — the symptom strings, findings and remedies of a
//! scenario that appear on some versions and not on others.

use std::{
    collections::BTreeSet,
    io,
    path::{Path, PathBuf},
};

use serde::Serialize;

use super::{RunReport, ScenarioReport, WriteError, drift::normalize, write};

/// One run per version, in the order given.
#[derive(Clone, Debug, Serialize)]
pub struct MatrixReport {
    pub runs: Vec<RunReport>,
}

/// A line one scenario observed on some versions only.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Drift {
    pub scenario: String,
    /// `symptom`, `finding` or `remedy`.
    pub what: &'static str,
    /// The line with run-specific parts replaced (see [`normalize`]).
    pub line: String,
    pub seen_on: Vec<String>,
    pub not_on: Vec<String>,
}

impl MatrixReport {
    pub fn new(runs: Vec<RunReport>) -> Self {
        Self { runs }
    }

    pub fn versions(&self) -> Vec<&str> {
        self.runs.iter().map(|r| r.k8s_version.as_str()).collect()
    }

    /// Every scenario name, in the order first met.
    pub fn scenarios(&self) -> Vec<&str> {
        let mut names: Vec<&str> = Vec::new();
        for r in &self.runs {
            for s in &r.scenarios {
                if !names.contains(&s.name()) {
                    names.push(s.name());
                }
            }
        }
        names
    }

    pub fn failed(&self) -> usize {
        self.runs.iter().map(RunReport::failed).sum()
    }

    /// Scenarios stopped with the run, over every version.
    pub fn interrupted(&self) -> usize {
        self.runs.iter().map(RunReport::interrupted).sum()
    }

    /// Every scenario passed on every version.
    pub fn all_passed(&self) -> bool {
        self.runs.iter().all(RunReport::all_passed)
    }

    fn find<'a>(run: &'a RunReport, scenario: &str) -> Option<&'a ScenarioReport> {
        run.scenarios.iter().find(|s| s.name() == scenario)
    }

    fn cell(run: &RunReport, scenario: &str) -> &'static str {
        match Self::find(run, scenario) {
            Some(s) if s.passed() => "pass",
            Some(_) => "FAIL",
            None => "-",
        }
    }

    /// Lines that some versions observed and others did not, per scenario.
    pub fn drift(&self) -> Vec<Drift> {
        let mut out = Vec::new();
        for name in self.scenarios() {
            let ran: Vec<(&str, &ScenarioReport)> = self
                .runs
                .iter()
                .filter_map(|r| Self::find(r, name).map(|s| (r.k8s_version.as_str(), s)))
                .collect();
            if ran.len() < 2 {
                continue;
            }
            for what in ["symptom", "finding", "remedy"] {
                let per_version: Vec<(&str, BTreeSet<Observed>)> =
                    ran.iter().map(|(v, s)| (*v, observed(s, what))).collect();
                let all: BTreeSet<&Observed> = per_version.iter().flat_map(|(_, l)| l).collect();
                for line in all {
                    let (seen, not): (Vec<_>, Vec<_>) =
                        per_version.iter().partition(|(_, l)| l.contains(line));
                    if !not.is_empty() {
                        out.push(Drift {
                            scenario: name.to_string(),
                            what,
                            line: line.to_string(),
                            seen_on: seen.iter().map(|(v, _)| v.to_string()).collect(),
                            not_on: not.iter().map(|(v, _)| v.to_string()).collect(),
                        });
                    }
                }
            }
        }
        out
    }

    /// A table scenario × version, then the drift.
    pub fn terminal(&self) -> String {
        let versions = self.versions();
        let mut out = format!("{:<34}", "scenario");
        for v in &versions {
            out.push_str(&format!(" {v:>9}"));
        }
        out.push('\n');
        for name in self.scenarios() {
            out.push_str(&format!("{name:<34}"));
            for r in &self.runs {
                out.push_str(&format!(" {:>9}", Self::cell(r, name)));
            }
            out.push('\n');
        }
        out.push_str(&format!("{:<34}", "passed"));
        for r in &self.runs {
            out.push_str(&format!(
                " {:>9}",
                format!("{}/{}", r.passed(), r.scenarios.len())
            ));
        }
        out.push('\n');
        let drift = self.drift();
        if drift.is_empty() {
            out.push_str("\nno drift: every scenario observed the same symptoms, findings and remedies on every version\n");
        } else {
            out.push_str(&format!("\ndrift ({} line(s)):\n", drift.len()));
            for d in &drift {
                out.push_str(&format!(
                    "  {} {}: only on {} (not on {}): {}\n",
                    d.scenario,
                    d.what,
                    d.seen_on.join(", "),
                    d.not_on.join(", "),
                    d.line
                ));
            }
        }
        out.push_str(&format!(
            "{} passed, {} failed{}\n",
            self.runs.iter().map(RunReport::passed).sum::<usize>(),
            self.failed(),
            super::interrupted_suffix(self.interrupted())
        ));
        out
    }

    /// The same facts for a CI step summary.
    pub fn markdown(&self) -> String {
        let versions = self.versions();
        let mut out = format!(
            "## unstuck on {} Kubernetes version(s)\n\n| scenario |{}\n|---|{}\n",
            versions.len(),
            versions
                .iter()
                .map(|v| format!(" {v} |"))
                .collect::<String>(),
            "---|".repeat(versions.len())
        );
        for name in self.scenarios() {
            out.push_str(&format!("| {name} |"));
            for r in &self.runs {
                out.push_str(match Self::cell(r, name) {
                    "pass" => " ✅ |",
                    "FAIL" => " ❌ |",
                    _ => " — |",
                });
            }
            out.push('\n');
        }
        let drift = self.drift();
        if !drift.is_empty() {
            out.push_str("\n### What changed between versions\n\n| scenario | observed | only on | not on |\n|---|---|---|---|\n");
            for d in &drift {
                out.push_str(&format!(
                    "| {} | {}: `{}` | {} | {} |\n",
                    d.scenario,
                    d.what,
                    d.line.replace('|', "\\|").replace('`', "'"),
                    d.seen_on.join(", "),
                    d.not_on.join(", ")
                ));
            }
        }
        out
    }

    /// JUnit XML with one test suite per version.
    pub fn junit(&self) -> Result<String, quick_junit::SerializeError> {
        let mut report = quick_junit::Report::new("unstuck");
        for r in &self.runs {
            // Each version's own JUnit report has exactly one suite.
            let one: quick_junit::Report = r.junit_report();
            for suite in one.test_suites {
                report.add_test_suite(suite);
            }
        }
        report.to_string()
    }

    /// Writes matrix.json, junit.xml and summary.md into `dir`, and each
    /// version's own reports into `dir/<version>/`.
    pub fn write_all(&self, dir: &Path) -> Result<Vec<PathBuf>, WriteError> {
        for r in &self.runs {
            r.write_all(&dir.join(&r.k8s_version))?;
        }
        #[derive(Serialize)]
        struct Json<'a> {
            versions: Vec<&'a str>,
            scenarios: Vec<Row<'a>>,
            drift: Vec<Drift>,
            passed: usize,
            failed: usize,
        }
        #[derive(Serialize)]
        struct Row<'a> {
            name: &'a str,
            results: Vec<&'static str>,
        }
        let json = Json {
            versions: self.versions(),
            scenarios: self
                .scenarios()
                .into_iter()
                .map(|name| Row {
                    name,
                    results: self.runs.iter().map(|r| Self::cell(r, name)).collect(),
                })
                .collect(),
            drift: self.drift(),
            passed: self.runs.iter().map(RunReport::passed).sum(),
            failed: self.failed(),
        };
        let (matrix, junit, md) = (
            dir.join("matrix.json"),
            dir.join("junit.xml"),
            dir.join("summary.md"),
        );
        write::json(&matrix, &json)?;
        let xml = self.junit().map_err(|e| WriteError::Io {
            path: junit.clone(),
            source: io::Error::other(e),
        })?;
        write::text(&junit, &xml)?;
        write::text(&md, &self.markdown())?;
        Ok(vec![matrix, junit, md])
    }
}

/// What one scenario observed of one kind, normalised. Findings are
/// compared as values — which doctor, which kind, which object (its run
/// id taken out, its UID left out) — so a summary reworded between
/// versions is no drift; a report written before findings were kept as
/// data is compared by its lines.
fn observed(s: &ScenarioReport, what: &str) -> BTreeSet<Observed> {
    let ids: Vec<String> = s
        .namespaces
        .real_names()
        .iter()
        .filter_map(|real| real.rsplit_once('-').map(|(_, id)| id.to_string()))
        .collect();
    if what == "finding" && !s.found.is_empty() {
        return s
            .found
            .iter()
            .map(|f| Observed::Finding(FindingKey::of(f, &ids)))
            .collect();
    }
    let lines = match what {
        "symptom" => &s.symptoms,
        "finding" => &s.findings,
        _ => &s.remedies,
    };
    // The run's own folder (backups are named in remedies) differs per run.
    let out = s.out_dir.display().to_string();
    lines
        .iter()
        .map(|l| Observed::Line(normalize(&l.replace(&out, "<out>"), &ids)))
        .collect()
}

/// One thing a scenario observed: a normalised line (a symptom, a
/// remedy, a finding of an older report), or a finding as a value.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Observed {
    Line(String),
    Finding(FindingKey),
}

impl std::fmt::Display for Observed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Observed::Line(l) => f.write_str(l),
            Observed::Finding(k) => k.fmt(f),
        }
    }
}

/// A finding as the matrix compares it across versions.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct FindingKey {
    kind: crate::report::FoundKind,
    api_version: String,
    object_kind: String,
    /// With the run's id replaced by `RUN`.
    namespace: Option<String>,
    name: String,
}

impl FindingKey {
    fn of(f: &crate::report::ReportedFinding, run_ids: &[String]) -> Self {
        let neutral = |s: &str| {
            run_ids
                .iter()
                .filter(|id| !id.is_empty())
                .fold(s.to_string(), |s, id| s.replace(&format!("-{id}"), "-RUN"))
        };
        Self {
            kind: f.kind,
            api_version: f.subject.api_version.clone(),
            object_kind: f.subject.kind.clone(),
            namespace: f.subject.namespace.as_deref().map(neutral),
            name: neutral(&f.subject.name),
        }
    }
}

/// How the drift names it: `OrphanFinalizer ConfigMap app-RUN/mymap`.
impl std::fmt::Display for FindingKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} ", self.kind.name(), self.object_kind)?;
        if let Some(ns) = &self.namespace {
            write!(f, "{ns}/")?;
        }
        f.write_str(&self.name)
    }
}

/// A `--k8s-version` that names no version the harness can run.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum VersionsError {
    #[error(
        "--k8s-version '{given}' is not a version: versions look like v1.34.4 (or use 'supported' for {supported})"
    )]
    NotAVersion { given: String, supported: String },
    #[error("--k8s-version names {0} twice")]
    Twice(String),
}

/// Kubernetes versions (`v1.34.4`), in the order given.
pub type Versions = Vec<String>;

/// Versions from `--k8s-version`: one, a comma list, or `supported`.
pub fn parse_versions(spec: &str, supported: &[&str]) -> Result<Versions, VersionsError> {
    if spec.trim() == "supported" {
        return Ok(supported.iter().map(|v| v.to_string()).collect());
    }
    let mut out: Vec<String> = Vec::new();
    for v in spec.split(',').map(str::trim) {
        let parts: Vec<&str> = v.strip_prefix('v').unwrap_or("").split('.').collect();
        if parts.len() != 3 || parts.iter().any(|p| p.parse::<u32>().is_err()) {
            return Err(VersionsError::NotAVersion {
                given: v.to_string(),
                supported: supported.join(", "),
            });
        }
        if out.iter().any(|o| o == v) {
            return Err(VersionsError::Twice(v.to_string()));
        }
        out.push(v.to_string());
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
