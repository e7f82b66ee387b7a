//! Whether the doctor may thaw a frozen pod ([`ThawVerdict`]), from its
//! cgroups' freezer files ([`super::freezer`]) and the runtime's view of
//! its tasks, and how the finding says it.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::RuntimeFacts;
use super::freezer::{CgroupFact, CgroupRole, CgroupVersion, FreezerState, container_id};
use super::kernel::KernelTask;
use super::runtime::TaskFact;

/// A cgroup a thaw writes to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThawTarget {
    pub path: PathBuf,
    pub version: CgroupVersion,
}

impl ThawTarget {
    /// `THAWED to <path>/freezer.state`, as said in plans and reports.
    pub fn describe(&self) -> String {
        format!(
            "{} to {}",
            self.version.control_value(false),
            self.path.join(self.version.control_file()).display()
        )
    }
}

/// Whether the doctor may thaw the pod, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "verdict")]
pub enum ThawVerdict {
    /// Nothing but these writes holds the pod frozen: thaw them.
    Thaw {
        targets: Vec<ThawTarget>,
        /// What proves it, one fact a line.
        proof: Vec<String>,
    },
    /// Not the doctor's to thaw; what a person would do instead.
    Refuse { why: String },
}

/// The freezer's hold on a pod.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FrozenPod {
    /// The pod's own cgroups (pod, containers) that are frozen or
    /// freezing, outermost first.
    pub own: Vec<CgroupFact>,
    /// Cgroups above the pod, shared with other pods, frozen by a write
    /// to them.
    pub shared: Vec<CgroupFact>,
    /// The pod's processes that sit in a frozen cgroup.
    pub frozen_pids: Vec<i32>,
    pub verdict: ThawVerdict,
}

impl FrozenPod {
    /// The frozen cgroup to name first: the outermost frozen by a write.
    pub fn root(&self) -> Option<&CgroupFact> {
        self.shared
            .first()
            .or_else(|| self.own.iter().find(|c| c.frozen_here()))
            .or_else(|| self.own.first())
    }
}

/// Reads the pod's freezer state; `None` when no cgroup of the pod is
/// frozen.
pub fn frozen_pod(uid: &str, cgroups: &[CgroupFact], runtime: &RuntimeFacts) -> Option<FrozenPod> {
    let depth = |c: &CgroupFact| c.path.components().count();
    let mut own: Vec<CgroupFact> = cgroups
        .iter()
        .filter(|c| {
            matches!(
                c.role(uid),
                Some(CgroupRole::Pod | CgroupRole::Container(_))
            )
        })
        .filter(|c| c.is_frozen())
        .cloned()
        .collect();
    own.sort_by_key(depth);
    if own.is_empty() {
        return None;
    }
    let mut shared: Vec<CgroupFact> = cgroups
        .iter()
        .filter(|c| c.role(uid) == Some(CgroupRole::Ancestor) && c.frozen_here())
        .cloned()
        .collect();
    shared.sort_by_key(depth);
    let mut frozen_pids: Vec<i32> = own
        .iter()
        .filter(|c| c.state() == FreezerState::Frozen)
        .flat_map(|c| c.procs.iter().copied())
        .collect();
    frozen_pids.sort_unstable();
    let above = cgroups
        .iter()
        .filter(|c| c.role(uid) == Some(CgroupRole::Ancestor))
        .count();
    let verdict = thaw_verdict(&own, &shared, above, runtime);
    Some(FrozenPod {
        own,
        shared,
        frozen_pids,
        verdict,
    })
}

fn thaw_verdict(
    own: &[CgroupFact],
    shared: &[CgroupFact],
    above: usize,
    runtime: &RuntimeFacts,
) -> ThawVerdict {
    let tasks = &runtime.tasks;
    if let Some(top) = shared.first() {
        return ThawVerdict::Refuse {
            why: format!(
                "the freeze comes from {} ({}), a cgroup other pods share: thawing the pod's own cgroup cannot lift it, and thawing a shared one is for whoever froze it (`echo {} > {}`)",
                top.path.display(),
                top.quote(),
                top.version.control_value(false),
                top.path.join(top.version.control_file()).display()
            ),
        };
    }
    let targets: Vec<ThawTarget> = own
        .iter()
        .filter(|c| c.frozen_here())
        .map(|c| ThawTarget {
            path: c.path.clone(),
            version: c.version,
        })
        .collect();
    let outermost = &own[0];
    if targets.is_empty() || outermost.frozen_from_above() {
        return ThawVerdict::Refuse {
            why: format!(
                "{} is frozen from above ({}), but no cgroup above it read as frozen: who holds it is unknown",
                outermost.path.display(),
                outermost.quote()
            ),
        };
    }
    let paused: Vec<&TaskFact> = tasks.iter().filter(|t| t.status == "PAUSED").collect();
    if let Some(t) = paused.first() {
        return ThawVerdict::Refuse {
            why: format!(
                "containerd reports task {} PAUSED: it was paused through the runtime (`ctr task pause`, `nerdctl pause`), deliberately; resume it there (`ctr -n k8s.io task resume {}`) or ask who paused it",
                t.id, t.id
            ),
        };
    }
    if tasks.is_empty() || !runtime.errors.is_empty() {
        return ThawVerdict::Refuse {
            why: format!(
                "the runtime could not show that it did not pause the pod's tasks ({})",
                if runtime.errors.is_empty() {
                    "it lists none".to_owned()
                } else {
                    runtime.errors.join("; ")
                }
            ),
        };
    }
    let mut proof: Vec<String> = targets
        .iter()
        .filter_map(|t| own.iter().find(|c| c.path == t.path))
        .map(|c| {
            format!(
                "the freeze was written to {} itself ({}), a cgroup of this pod only",
                c.path.display(),
                c.quote()
            )
        })
        .collect();
    let inherited = own.iter().filter(|c| !c.frozen_here()).count();
    if inherited > 0 {
        proof.push(format!(
            "the other {inherited} frozen cgroup(s) of the pod are frozen only through it"
        ));
    }
    proof.push(format!(
        "none of the {above} cgroup(s) above the pod, shared with other pods, is frozen by a write to it"
    ));
    proof.push(format!(
        "containerd reports no task of the pod paused ({}): no pause through the runtime holds it",
        tasks
            .iter()
            .map(|t| format!("{} {}", short(&t.id), t.status))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    ThawVerdict::Thaw { targets, proof }
}

fn short(id: &str) -> &str {
    id.get(..12).unwrap_or(id)
}

/// One line of evidence for a process the freezer holds: frozen, not
/// waiting for a kernel call (its `wchan` is whatever sleep it was frozen
/// in).
pub fn describe_frozen_task(t: &KernelTask, cgroup: &CgroupFact) -> String {
    let wait = t
        .wchan
        .clone()
        .filter(|w| !w.is_empty() && w != "0")
        .or_else(|| t.stack.first().cloned())
        .map(|w| format!(" (wchan {w})"))
        .unwrap_or_default();
    format!(
        "kernel: pid {} ({}) state {}{wait}: frozen in cgroup {}; no signal reaches it until the cgroup is thawed",
        t.pid,
        t.command,
        t.state,
        cgroup.path.display()
    )
}

impl FrozenPod {
    /// Evidence lines: each frozen cgroup with its files, each shared one,
    /// and each process of the pod the freezer holds.
    pub fn evidence(&self, processes: &[KernelTask]) -> Vec<String> {
        let mut lines: Vec<String> = self
            .shared
            .iter()
            .map(|c| {
                format!(
                    "cgroup {} (above the pod, shared with other pods): {}",
                    c.path.display(),
                    c.quote()
                )
            })
            .chain(self.own.iter().map(|c| {
                let name = c
                    .path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let whose = if name.contains("pod") {
                    "the pod's".to_owned()
                } else {
                    format!("container {}", short(container_id(&name)))
                };
                format!("cgroup {} ({whose}): {}", c.path.display(), c.quote())
            }))
            .collect();
        for t in processes {
            if let Some(c) = self.own.iter().find(|c| c.procs.contains(&t.pid)) {
                lines.push(describe_frozen_task(t, c));
            }
        }
        match &self.verdict {
            ThawVerdict::Thaw { proof, .. } => {
                lines.extend(proof.iter().map(|p| format!("thaw proof: {p}")));
            }
            ThawVerdict::Refuse { why } => lines.push(format!("no thaw: {why}")),
        }
        lines
    }

    /// The finding's reason, for its summary.
    pub fn why(&self) -> String {
        let root = self.root().map_or_else(String::new, |c| {
            format!(" {} ({})", c.path.display(), c.quote())
        });
        let mut line = format!(
            "its cgroup is frozen by the cgroup freezer{root}, so its processes sit in the freezer, no signal reaches them and the runtime's kill cannot finish"
        );
        if let ThawVerdict::Refuse { why } = &self.verdict {
            line.push_str(&format!(" (not thawed by the doctor: {why})"));
        }
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::node::freezer::v1_fact as v1;
    use std::path::PathBuf;

    #[test]
    fn a_frozen_shared_parent_is_refused() {
        let uid = "u";
        let cg = [
            v1("/f/kubepods/besteffort", "FROZEN", "1", "0"),
            v1("/f/kubepods/besteffort/podu", "FROZEN", "0", "1"),
        ];
        let runtime = RuntimeFacts {
            tasks: vec![TaskFact {
                id: "abc".into(),
                pid: 1,
                status: "RUNNING".into(),
            }],
            ..RuntimeFacts::default()
        };
        let f = frozen_pod(uid, &cg, &runtime).unwrap();
        assert_eq!(
            f.root().unwrap().path,
            PathBuf::from("/f/kubepods/besteffort")
        );
        match f.verdict {
            ThawVerdict::Refuse { why } => assert!(why.contains("other pods share"), "{why}"),
            v => panic!("{v:?}"),
        }
    }
}
