//! Reports of a run in the forms CI and people read: a terminal summary,
//! JSON (everything, for tools), JUnit XML (for CI test tabs) and Markdown
//! (for CI step summaries). All are written into the run's folder next to
//! the per-scenario evidence.

use std::{
    io,
    path::{Path, PathBuf},
    time::Duration,
};

use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};
use serde::{Deserialize, Serialize};
use unstuck_core::doctor::graph::{NodeKind, mermaid};

pub mod cleanup;
pub mod drift;
pub mod matrix;
pub mod merge;
pub mod scenario;
pub mod write;
pub use cleanup::CleanupReport;
pub use merge::MergeError;
pub use scenario::{
    FoundKind, IsolatedCluster, NamespaceMap, Outcome, ReportedFinding, ScenarioReport, StepGraph,
    StepRecord,
};
pub use write::WriteError;

/// A whole run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunReport {
    pub started_at: String,
    pub cluster: String,
    pub k8s_version: String,
    /// The provider that made the cluster, and its node image (kind).
    #[serde(default)]
    pub provider: crate::cluster::provider::ProviderInfo,
    /// `i/n` when the run was one CI job's part of the suite (`--shard`);
    /// a merged report lists every part, e.g. `1/3+2/3+3/3`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<String>,
    pub duration_ms: u128,
    pub scenarios: Vec<ScenarioReport>,
}

impl RunReport {
    pub fn passed(&self) -> usize {
        self.scenarios.iter().filter(|s| s.passed()).count()
    }
    /// Scenarios that ran to a failing verdict (not the interrupted ones).
    pub fn failed(&self) -> usize {
        self.scenarios.len() - self.passed() - self.interrupted()
    }

    /// Scenarios the run was stopped in the middle of: no verdict.
    pub fn interrupted(&self) -> usize {
        self.scenarios.iter().filter(|s| s.interrupted()).count()
    }

    /// Every scenario passed (an interrupted one has not): what the exit
    /// code says.
    pub fn all_passed(&self) -> bool {
        self.passed() == self.scenarios.len()
    }

    /// Writes report.json, junit.xml and summary.md into `dir`.
    pub fn write_all(&self, dir: &Path) -> Result<Vec<PathBuf>, WriteError> {
        let json = dir.join("report.json");
        write::json(&json, self)?;
        let junit = dir.join("junit.xml");
        let xml = self.junit().map_err(|e| WriteError::Io {
            path: junit.clone(),
            source: io::Error::other(e),
        })?;
        write::text(&junit, &xml)?;
        let md = dir.join("summary.md");
        write::text(&md, &self.markdown())?;
        Ok(vec![json, junit, md])
    }

    /// JUnit XML: one suite per run, one test case per scenario, the
    /// evidence in system-out so CI shows it beside the verdict.
    pub fn junit(&self) -> Result<String, quick_junit::SerializeError> {
        self.junit_report().to_string()
    }

    /// The JUnit report itself: one suite, one case per scenario.
    pub fn junit_report(&self) -> Report {
        let mut report = Report::new("unstuck");
        // The suite's name is the same from run to run (CI keeps a test's
        // history by suite, class and name): the Kubernetes version and
        // the provider, and the shard so that the JUnit files of several
        // CI jobs can be read side by side without a clash. The throwaway
        // cluster's random name is a property.
        let mut suite = TestSuite::new(format!(
            "unstuck scenarios ({}, provider {}){}",
            self.k8s_version,
            self.provider,
            self.shard
                .as_ref()
                .map_or(String::new(), |s| format!(", shard {s}"))
        ));
        suite.add_property(("cluster", self.cluster.as_str()));
        // A class per scenario, its file's name, under a package per
        // provider and version: a CI's history follows each scenario, and
        // in a merged matrix a scenario's cases on two versions are told
        // apart.
        let package = format!(
            "unstuck.{}.{}",
            self.provider.name,
            self.k8s_version.replace('.', "_")
        );
        for s in &self.scenarios {
            let status = match &s.outcome {
                Outcome::Passed => TestCaseStatus::success(),
                Outcome::Failed { reason, .. } => {
                    let mut st = TestCaseStatus::non_success(NonSuccessKind::Failure);
                    st.set_message(reason.clone());
                    st
                }
                // Not a verdict on the scenario: CI shows it skipped, with why.
                Outcome::Interrupted { reason, .. } => {
                    let mut st = TestCaseStatus::skipped();
                    st.set_message(reason.clone());
                    st
                }
            };
            let file = s
                .scenario
                .file
                .file_stem()
                .map(|f| f.to_string_lossy().replace('.', "_"))
                .filter(|f| !f.is_empty())
                .unwrap_or_else(|| s.name().to_owned());
            let mut case = TestCase::new(s.name(), status);
            case.set_classname(format!("{package}.{file}"));
            case.set_time(Duration::from_millis(s.duration_ms as u64));
            case.set_system_out(evidence_text(s));
            suite.add_test_case(case);
        }
        report.add_test_suite(suite);
        report
    }

    /// A Markdown table for `$GITHUB_STEP_SUMMARY` and the like.
    pub fn markdown(&self) -> String {
        let mut out = format!(
            "## unstuck: {} passed, {} failed{} ({} on {}, provider {})\n\n| scenario | result | symptom observed | finding | remedy | recovered in |\n|---|---|---|---|---|---|\n",
            self.passed(),
            self.failed(),
            interrupted_suffix(self.interrupted()),
            self.k8s_version,
            self.cluster,
            self.provider
        );
        for s in &self.scenarios {
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} |\n",
                match (&s.scenario.incident, s.scenario.incident_url()) {
                    (Some(id), Some(url)) => format!("{} ([{id}]({url}))", s.name()),
                    _ => s.name().to_owned(),
                },
                if s.passed() {
                    "✅ passed"
                } else if s.interrupted() {
                    "⏹ interrupted"
                } else {
                    "❌ failed"
                },
                // The last symptom is the stuck state itself (earlier ones
                // are set-up gates such as "pod is Running").
                md_cell(s.symptoms.last().map(String::as_str).unwrap_or("-")),
                md_cell(s.findings.first().map(String::as_str).unwrap_or("-")),
                md_cell(s.remedies.first().map(String::as_str).unwrap_or("-")),
                s.time_to_recover_ms
                    .map_or("-".into(), |ms| format!("{:.1} s", ms as f64 / 1000.0)),
            ));
        }
        for s in self.scenarios.iter().filter(|s| !s.passed()) {
            if let Some(reason) = s.outcome.reason() {
                out.push_str(&format!(
                    "\n**{}** {}: {}\n",
                    s.name(),
                    if s.interrupted() {
                        "interrupted"
                    } else {
                        "failed"
                    },
                    md_cell(reason)
                ));
            }
            for exit in &s.cluster_exits {
                out.push_str(&format!("\n- meanwhile {}\n", md_cell(&exit.to_string())));
            }
        }
        out.push_str(&graphs_markdown(&self.scenarios));
        out
    }

    /// The terminal summary: per scenario, the quoted symptom, the finding,
    /// the remedy and the time to recover.
    pub fn terminal(&self) -> String {
        let mut out = String::new();
        for s in &self.scenarios {
            let verdict = if s.passed() {
                crate::style::good("PASS")
            } else if s.interrupted() {
                crate::style::note("STOP")
            } else {
                crate::style::bad("FAIL")
            };
            out.push_str(&format!(
                "{verdict}  {}  ({:.1} s)\n",
                s.name(),
                s.duration_ms as f64 / 1000.0
            ));
            if let Some(url) = s.scenario.incident_url() {
                out.push_str(&format!("      incident:  {url}\n"));
            }
            for sym in &s.symptoms {
                out.push_str(&format!("      symptom:   {sym}\n"));
            }
            for f in &s.findings {
                out.push_str(&format!("      finding:   {f}\n"));
            }
            for r in &s.remedies {
                out.push_str(&format!("      remedy:    {r}\n"));
            }
            if let Some(c) = &s.isolated {
                out.push_str(&format!(
                    "      ran alone on its own cluster {} (up in {:.1} s)\n",
                    c.name,
                    c.boot_ms as f64 / 1000.0
                ));
            }
            if let Some(ms) = s.time_to_recover_ms {
                out.push_str(&format!(
                    "      recovered in {:.1} s (detected in {:.2} s)\n",
                    ms as f64 / 1000.0,
                    s.time_to_detect_ms.unwrap_or(0) as f64 / 1000.0
                ));
            }
            if let Some(reason) = s.outcome.reason() {
                // An interrupted scenario did not fail: it was stopped.
                let label = if s.interrupted() {
                    "stopped:"
                } else {
                    "failure:"
                };
                out.push_str(&format!("      {label:<10} {reason}\n"));
            }
            for exit in &s.cluster_exits {
                out.push_str(&format!("      cluster:   {exit}\n"));
            }
            if !s.cleanup.forced.is_empty() {
                out.push_str(&format!(
                    "      cleanup removed the run's own finalizers: {}\n",
                    s.cleanup.forced.join("; ")
                ));
            }
            if !s.cleanup.left.is_empty() {
                out.push_str(&format!(
                    "      cleanup left (not the run's): {}\n",
                    s.cleanup.left.join("; ")
                ));
            }
            if !s.cleanup.failed.is_empty() {
                out.push_str(&format!(
                    "      cleanup failed: {}\n",
                    s.cleanup.failed.join("; ")
                ));
            }
            if !s.cleanup.leaked.is_empty() {
                out.push_str(&format!("      LEAKED: {}\n", s.cleanup.leaked.join(", ")));
            }
            for u in &s.unwritten {
                out.push_str(&format!("      evidence {u}\n"));
            }
        }
        out.push_str(&format!(
            "\nKubernetes {} on {} (provider {})\n",
            self.k8s_version, self.cluster, self.provider
        ));
        // As wide as the longest name: scenario names run to 40 characters.
        let width = self
            .scenarios
            .iter()
            .map(|s| s.name().chars().count())
            .max()
            .unwrap_or(0)
            .max("scenario".len());
        out.push_str(&format!(
            "{:<width$} {:<6} {:>10} {:>12} {:>9}\n",
            "scenario", "result", "detect", "recover", "total"
        ));
        for s in &self.scenarios {
            let ms = |v: Option<u128>| {
                v.map_or("-".to_string(), |ms| format!("{:.2} s", ms as f64 / 1000.0))
            };
            out.push_str(&format!(
                "{:<width$} {:<6} {:>10} {:>12} {:>9}\n",
                s.name(),
                if s.passed() {
                    "pass"
                } else if s.interrupted() {
                    "STOP"
                } else {
                    "FAIL"
                },
                ms(s.time_to_detect_ms),
                ms(s.time_to_recover_ms),
                format!("{:.1} s", s.duration_ms as f64 / 1000.0)
            ));
        }
        out.push_str(&format!(
            "{} passed, {} failed{}\n",
            self.passed(),
            self.failed(),
            interrupted_suffix(self.interrupted())
        ));
        out
    }
}

fn evidence_text(s: &ScenarioReport) -> String {
    let mut out = String::new();
    if let Some(url) = s.scenario.incident_url() {
        out.push_str(&format!("reproduces {url}\n"));
    }
    for step in &s.steps {
        out.push_str(&format!(
            "[{}] {} {} ({} ms)\n",
            step.index,
            if step.ok { "ok  " } else { "FAIL" },
            step.summary,
            step.duration_ms
        ));
        for e in &step.evidence {
            out.push_str(&format!("      {e}\n"));
        }
    }
    for exit in &s.cluster_exits {
        out.push_str(&format!("cluster: {exit}\n{}\n", exit.log_tail));
    }
    out
}

/// One Mermaid diagram per doctor step of each scenario: what waited on
/// what, down to the root causes, each folded under a line that names
/// the roots (readable where Mermaid is not drawn).
fn graphs_markdown(scenarios: &[ScenarioReport]) -> String {
    let steps: Vec<(&ScenarioReport, &StepGraph)> = scenarios
        .iter()
        .flat_map(|s| s.graphs.iter().map(move |g| (s, g)))
        .filter(|(_, g)| !g.graph.is_empty())
        .collect();
    if steps.is_empty() {
        return String::new();
    }
    let mut out = String::from("\n### What waited on what\n");
    for (s, g) in steps {
        let roots: Vec<String> = g
            .graph
            .roots
            .iter()
            .filter_map(|r| {
                let n = g.graph.node(&r.id)?;
                // A key is named with the object it holds: two pods held
                // by the same dead key are two roots.
                let mut n = n.clone();
                if n.kind == NodeKind::Finalizer
                    && let Some(p) = g
                        .graph
                        .edges
                        .iter()
                        .find(|e| e.to == n.id)
                        .and_then(|e| g.graph.node(&e.from))
                {
                    n.label = format!("{} on {}", n.label, p.label);
                }
                Some(match &r.remedy {
                    Some(m) => format!("{} ({})", n.describe(), m.line()),
                    None => n.describe(),
                })
            })
            .collect();
        let named = match roots.len() {
            0 => "no root cause".to_owned(),
            1..=3 => format!("root cause: {}", roots.join("; ")),
            n => format!("root causes: {}; and {} more", roots[..3].join("; "), n - 3),
        };
        out.push_str(&format!(
            "\n<details><summary><b>{}</b>, doctor step {}: {}</summary>\n\n{}\n</details>\n",
            html_text(s.name()),
            g.step,
            html_text(&named),
            mermaid::flowchart(&g.graph).fenced()
        ));
    }
    out
}

/// Text inside HTML (a `<summary>`): `&`, `<` and `>` as entities.
fn html_text(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('\n', " ")
}

fn md_cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// `, N interrupted` after "P passed, F failed", when N is not 0.
pub(crate) fn interrupted_suffix(n: usize) -> String {
    match n {
        0 => String::new(),
        n => format!(", {n} interrupted"),
    }
}

#[cfg(test)]
mod tests;
