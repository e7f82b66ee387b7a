//! Merging the reports of several CI jobs (`unstuck run --shard i/n`)
//! into the report of the whole suite.

use std::path::{Path, PathBuf};

use super::RunReport;

/// Why shard reports cannot be merged.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error(
        "reading {path}: {source}\n  each argument is a run folder holding the report.json that `unstuck run` wrote"
    )]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not an unstuck run report: {source}")]
    Parse {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("nothing to merge: name at least one run folder")]
    Empty,
    #[error(
        "scenario '{name}' is in more than one report ({first} and {second}): were the jobs run with the same --shard?"
    )]
    Duplicate {
        name: String,
        first: String,
        second: String,
    },
    #[error(
        "the reports are shards of {count} jobs but {missing} are missing: a job's report did not arrive"
    )]
    MissingShards { count: usize, missing: String },
    #[error("the reports are shards of different splits ({0})")]
    MixedSplits(String),
}

/// Reads `dir/report.json`.
pub fn load(dir: &Path) -> Result<RunReport, MergeError> {
    let path = if dir.is_dir() {
        dir.join("report.json")
    } else {
        dir.to_path_buf()
    };
    let text = std::fs::read_to_string(&path).map_err(|source| MergeError::Read {
        path: path.clone(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|source| MergeError::Parse { path, source })
}

impl RunReport {
    /// One report of the whole suite from the reports of its shards: every
    /// scenario once, the shards complete (all of `1/n` .. `n/n` when the
    /// inputs carry a shard), the duration the longest job's.
    pub fn merge(parts: Vec<RunReport>) -> Result<RunReport, MergeError> {
        if parts.is_empty() {
            return Err(MergeError::Empty);
        }
        let shards: Vec<(usize, usize)> = parts
            .iter()
            .filter_map(|p| p.shard.as_deref())
            .filter_map(|s| {
                let (i, n) = s.split_once('/')?;
                Some((i.parse().ok()?, n.parse().ok()?))
            })
            .collect();
        if let Some(&(_, count)) = shards.first() {
            if shards.iter().any(|&(_, n)| n != count) {
                let all: Vec<String> = shards.iter().map(|(i, n)| format!("{i}/{n}")).collect();
                return Err(MergeError::MixedSplits(all.join(", ")));
            }
            let missing: Vec<String> = (1..=count)
                .filter(|i| !shards.iter().any(|&(j, _)| j == *i))
                .map(|i| format!("{i}/{count}"))
                .collect();
            if !missing.is_empty() {
                return Err(MergeError::MissingShards {
                    count,
                    missing: missing.join(", "),
                });
            }
        }
        let mut scenarios = Vec::new();
        let mut from: Vec<(String, String)> = Vec::new();
        for p in &parts {
            let label = p.shard.clone().unwrap_or_else(|| p.started_at.clone());
            for s in &p.scenarios {
                if let Some((_, other)) = from.iter().find(|(n, _)| *n == s.name()) {
                    return Err(MergeError::Duplicate {
                        name: s.name().to_owned(),
                        first: other.clone(),
                        second: label,
                    });
                }
                from.push((s.name().to_owned(), label.clone()));
                scenarios.push(s.clone());
            }
        }
        // File order (the scenarios' names start with their number), as an
        // unsharded run would list them.
        scenarios.sort_by(|a, b| a.scenario.file.cmp(&b.scenario.file));
        let mut shard_labels: Vec<String> = parts.iter().filter_map(|p| p.shard.clone()).collect();
        shard_labels.sort();
        Ok(RunReport {
            started_at: parts
                .iter()
                .map(|p| p.started_at.clone())
                .min()
                .unwrap_or_default(),
            cluster: unique(parts.iter().map(|p| p.cluster.as_str())),
            k8s_version: unique(parts.iter().map(|p| p.k8s_version.as_str())),
            // Jobs of one suite run on one provider; the first part says which.
            provider: parts
                .first()
                .map(|p| p.provider.clone())
                .unwrap_or_default(),
            shard: (!shard_labels.is_empty()).then(|| shard_labels.join("+")),
            duration_ms: parts.iter().map(|p| p.duration_ms).max().unwrap_or(0),
            scenarios,
        })
    }
}

/// The one value all parts share, or all of them joined.
fn unique<'a>(values: impl Iterator<Item = &'a str>) -> String {
    let mut seen: Vec<&str> = Vec::new();
    for v in values {
        if !seen.contains(&v) {
            seen.push(v);
        }
    }
    seen.join(" + ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{Outcome, ScenarioReport};

    fn report(shard: Option<&str>, names: &[&str]) -> RunReport {
        RunReport {
            started_at: "2026-11-23T20:00:00Z".into(),
            cluster: "local cluster 'run-x'".into(),
            k8s_version: "v1.34.4".into(),
            provider: Default::default(),
            shard: shard.map(String::from),
            duration_ms: 1000 * names.len() as u128,
            scenarios: names
                .iter()
                .map(|n| {
                    let mut s: ScenarioReport = serde_json::from_value(serde_json::json!({
                        "name": n, "description": "", "catalog_case": null,
                        "file": format!("/s/{n}.yaml"), "namespaces": {"map": {}},
                        "outcome": {"result": "passed"}, "steps": [], "symptoms": [],
                        "findings": [], "remedies": [], "time_to_detect_ms": null,
                        "time_to_recover_ms": null, "duration_ms": 5,
                        "cleanup": {"reverted": [], "deleted": [], "forced": [], "leaked": []},
                        "out_dir": "/o"
                    }))
                    .expect("a report as `unstuck run` writes it");
                    if *n == "03-b" {
                        s.outcome = Outcome::Failed {
                            step: 2,
                            reason: "boom".into(),
                        };
                    }
                    s
                })
                .collect(),
        }
    }

    #[test]
    fn shards_merge_into_the_whole_suite_in_file_order() {
        let m = RunReport::merge(vec![
            report(Some("2/2"), &["02-a", "04-c"]),
            report(Some("1/2"), &["01-z", "03-b"]),
        ])
        .unwrap();
        let names: Vec<&str> = m.scenarios.iter().map(|s| s.name()).collect();
        assert_eq!(names, ["01-z", "02-a", "03-b", "04-c"]);
        assert_eq!(m.shard.as_deref(), Some("1/2+2/2"));
        assert_eq!((m.passed(), m.failed()), (3, 1));
        assert_eq!(m.duration_ms, 2000, "the longest job, not the sum");
        assert_eq!(m.k8s_version, "v1.34.4");
        let junit = m.junit().unwrap();
        assert_eq!(junit.matches("<testcase ").count(), 4, "{junit}");
    }

    #[test]
    fn a_missing_or_doubled_job_is_an_error() {
        let e = RunReport::merge(vec![
            report(Some("1/3"), &["01-z"]),
            report(Some("3/3"), &["03-b"]),
        ])
        .unwrap_err();
        assert!(e.to_string().contains("2/3 are missing"), "{e}");
        let e = RunReport::merge(vec![
            report(Some("1/2"), &["01-z"]),
            report(Some("2/2"), &["01-z"]),
        ])
        .unwrap_err();
        assert!(
            e.to_string().contains("'01-z' is in more than one report"),
            "{e}"
        );
        let e = RunReport::merge(vec![
            report(Some("1/2"), &["01-z"]),
            report(Some("2/3"), &["02-a"]),
        ])
        .unwrap_err();
        assert!(matches!(e, MergeError::MixedSplits(_)), "{e}");
        assert!(matches!(RunReport::merge(vec![]), Err(MergeError::Empty)));
    }

    #[test]
    fn a_shard_names_its_junit_suite() {
        let r = report(Some("2/3"), &["02-a"]);
        assert!(r.junit().unwrap().contains("shard 2/3"));
    }

    #[test]
    fn a_written_report_loads_back() {
        let dir = std::env::temp_dir().join(format!("unstuck-merge-{}", std::process::id()));
        let r = report(Some("1/1"), &["01-z", "03-b"]);
        r.write_all(&dir).unwrap();
        let back = load(&dir);
        let missing = load(&dir.join("nope"));
        std::fs::remove_dir_all(&dir).unwrap();
        let back = back.unwrap();
        assert_eq!(back.scenarios.len(), 2);
        assert_eq!(back.shard.as_deref(), Some("1/1"));
        let e = missing.unwrap_err();
        assert!(
            e.to_string()
                .contains("report.json that `unstuck run` wrote"),
            "{e}"
        );
    }
}
