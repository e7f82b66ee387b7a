//! What a scenario added to a cluster unstuck did not create, written
//! down before it is added.
//!
//! On a throwaway cluster a killed run loses nothing: the cluster goes.
//! On an existing one (`unstuck run --kubeconfig`), a SIGKILL between a
//! scenario's apply and its cleanup would leave its namespaces and, worse,
//! its cluster-wide blockers (a dead APIService that blocks every
//! namespace deletion, a webhook that fails every namespace UPDATE). So
//! each scenario run keeps a journal file: before each create, the object
//! it is about to create (no UID yet); after, the UID the server gave.
//! The file names the owning process (PID and start time) and the
//! cluster (its kube-system UID). When the scenario's cleanup has removed
//! everything, the file goes.
//!
//! [`sweep`] (run by `unstuck cluster gc --kubeconfig` and at the start
//! of every `unstuck run --kubeconfig`) takes the files of owners that
//! are gone, on that cluster only, and hands their objects to the same
//! cleanup a live run uses: deleted only while the name still holds the
//! recorded UID, and only the finalizer keys the run's manifests put
//! there removed. An object recorded before its create returned (no UID)
//! is taken only when it carries the run's label ([`RUN_LABEL`]);
//! anything else of that name is not the run's and is left alone.

use std::{
    io,
    path::{Path, PathBuf},
};

use kube::Client;
use serde::{Deserialize, Serialize};

use super::{Created, cleanup};
use crate::node::ProcRef;

/// The label the runner puts on every cluster-scoped object and namespace
/// it creates: the run that made it.
pub const RUN_LABEL: &str = "unstuck.dev/run";

/// Where journals are kept (`UNSTUCK_JOURNAL_DIR` overrides).
pub fn journal_dir() -> PathBuf {
    std::env::var_os("UNSTUCK_JOURNAL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/lib/unstuck/existing-clusters"))
}

/// The cluster a journal is about.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterRef {
    pub kube_system_uid: String,
    pub server: String,
    pub context: String,
}

/// Where a run on an existing cluster keeps its journals, and which
/// cluster that is.
#[derive(Clone, Debug)]
pub struct JournalTarget {
    pub dir: PathBuf,
    pub cluster: ClusterRef,
}

/// One journal file.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    pub owner: ProcRef,
    pub cluster: ClusterRef,
    pub run: String,
    pub scenario: String,
    /// In creation order; an entry with an empty UID was about to be
    /// created when the record was written.
    pub created: Vec<Created>,
}

/// A scenario run's journal, open while it runs.
#[derive(Debug)]
pub struct Journal {
    path: PathBuf,
    record: Record,
}

#[derive(Debug, thiserror::Error)]
#[error("writing the journal {path} of what this run adds to the cluster: {source}")]
pub struct JournalError {
    pub path: PathBuf,
    #[source]
    pub source: io::Error,
}

impl Journal {
    /// A journal for `scenario` of `run` on `cluster`, owned by this
    /// process; nothing is written until the first [`Journal::record`].
    pub fn new(dir: &Path, cluster: &ClusterRef, run: &str, scenario: &str) -> Self {
        let me = std::process::id();
        Self {
            path: dir.join(format!("{run}-{scenario}.json")),
            record: Record {
                owner: ProcRef::of_pid(me as i32).unwrap_or(ProcRef {
                    pid: me as i32,
                    start_time: 0,
                    command: String::new(),
                }),
                cluster: cluster.clone(),
                run: run.to_owned(),
                scenario: scenario.to_owned(),
                created: Vec::new(),
            },
        }
    }

    /// Writes `created`, and `about_to` (not created yet) after it, to
    /// the file: whole or not at all (a new file renamed over the old).
    pub fn record(
        &mut self,
        created: &[Created],
        about_to: Option<&Created>,
    ) -> Result<(), JournalError> {
        self.record.created = created.iter().chain(about_to).cloned().collect();
        let err = |source| JournalError {
            path: self.path.clone(),
            source,
        };
        let dir = self.path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(err)?;
        let tmp = self.path.with_extension("json.tmp");
        let text = serde_json::to_vec_pretty(&self.record).map_err(|e| err(e.into()))?;
        std::fs::write(&tmp, text).map_err(err)?;
        std::fs::rename(&tmp, &self.path).map_err(err)
    }

    /// Cleanup left nothing: the journal has nothing more to say.
    pub fn finish(self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// What [`sweep`] did for one journal of a run that was killed.
#[derive(Debug)]
pub struct Swept {
    pub run: String,
    pub scenario: String,
    pub report: crate::report::CleanupReport,
    /// Recorded before its create returned, and not the run's by label:
    /// left alone.
    pub not_ours: Vec<String>,
    /// Recorded before its create returned, and not readable now (an API
    /// group that does not answer): neither taken nor known gone, so the
    /// record is kept for the next gc. Each with why.
    pub unread: Vec<String>,
}

impl Swept {
    /// Everything recorded is gone (the journal is removed then).
    pub fn clean(&self) -> bool {
        self.report.failed.is_empty() && self.report.leaked.is_empty() && self.unread.is_empty()
    }
}

/// The journals in `dir` of owners that are gone, about `cluster`.
pub fn stale(dir: &Path, cluster: &str) -> Vec<(PathBuf, Record)> {
    let mut out: Vec<(PathBuf, Record)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .filter_map(|p| {
            let r: Record = serde_json::from_slice(&std::fs::read(&p).ok()?).ok()?;
            (r.cluster.kube_system_uid == cluster && !r.owner.is_alive()).then_some((p, r))
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// Cleans up after every killed run's journal on `cluster` (its
/// kube-system UID), with `client` on that cluster.
pub async fn sweep(client: &Client, dir: &Path, cluster: &str) -> Vec<Swept> {
    let mut out = Vec::new();
    for (path, record) in stale(dir, cluster) {
        let pending = resolve_pending(client, &record).await;
        let report = cleanup::cleanup(client, &pending.created).await;
        let swept = Swept {
            run: record.run,
            scenario: record.scenario,
            report,
            not_ours: pending.not_ours,
            unread: pending.unread,
        };
        if swept.clean() {
            let _ = std::fs::remove_file(&path);
        }
        out.push(swept);
    }
    out
}

/// A record's objects as gc can take them.
#[derive(Default)]
struct Resolved {
    /// With a UID: the run's.
    created: Vec<Created>,
    not_ours: Vec<String>,
    unread: Vec<String>,
}

/// The record's objects with a UID: those recorded before their create
/// returned get the UID of the object of that name when it carries the
/// run's label; the others are named as not the run's, or as unread when
/// the API did not answer (which is not "gone").
async fn resolve_pending(client: &Client, record: &Record) -> Resolved {
    let mut out = Resolved::default();
    let namespaces: Vec<&str> = record
        .created
        .iter()
        .filter(|c| c.kind == "Namespace")
        .map(|c| c.name.as_str())
        .collect();
    for c in &record.created {
        if !c.uid.is_empty() {
            out.created.push(c.clone());
            continue;
        }
        // Only cluster-scoped objects carry the run's label; one in a
        // namespace of the run's goes with that namespace.
        if c.namespace
            .as_deref()
            .is_some_and(|ns| namespaces.contains(&ns))
        {
            continue;
        }
        match cleanup::read(client, c).await {
            Ok(Some(obj))
                if obj.metadata.labels.as_ref().and_then(|l| l.get(RUN_LABEL))
                    == Some(&record.run) =>
            {
                out.created.push(Created {
                    uid: obj.metadata.uid.unwrap_or_default(),
                    ..c.clone()
                });
            }
            Ok(Some(_)) => out.not_ours.push(c.to_string()),
            // Never created, or gone since: nothing to take.
            Ok(None) => {}
            Err(e) => out.unread.push(format!("{c} ({e})")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn created(name: &str, uid: &str) -> Created {
        Created {
            api_version: "apiregistration.k8s.io/v1".into(),
            kind: "APIService".into(),
            namespace: None,
            name: name.into(),
            uid: uid.into(),
            keys: Default::default(),
        }
    }

    fn cluster() -> ClusterRef {
        ClusterRef {
            kube_system_uid: "ks-1".into(),
            server: "https://127.0.0.1:6443".into(),
            context: "prod".into(),
        }
    }

    #[test]
    fn a_journal_names_what_is_about_to_be_created_and_a_live_owners_is_not_stale() {
        let dir = std::env::temp_dir().join(format!("unstuck-journal-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut j = Journal::new(&dir, &cluster(), "r1", "dead-metrics-apiservice");
        let done = [created("v1beta1.metrics-r1.k8s.io", "u1")];
        j.record(&done, Some(&created("next", ""))).unwrap();
        let r: Record = serde_json::from_slice(
            &std::fs::read(dir.join("r1-dead-metrics-apiservice.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(r.created.len(), 2);
        assert_eq!(r.created[1].uid, "");
        // This process owns it: not stale, on any cluster.
        assert!(stale(&dir, "ks-1").is_empty());
        // An owner that is gone (a start time this pid never had), on
        // this cluster only.
        let mut dead = r.clone();
        dead.owner.start_time += 1;
        std::fs::write(dir.join("r2-x.json"), serde_json::to_vec(&dead).unwrap()).unwrap();
        assert_eq!(stale(&dir, "ks-1").len(), 1);
        assert!(stale(&dir, "ks-2").is_empty());
        j.finish();
        assert!(!dir.join("r1-dead-metrics-apiservice.json").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
