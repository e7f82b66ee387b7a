//! A pod whose cgroup is frozen (the cgroup freezer), and when the doctor
//! may thaw it.
//!
//! Frozen processes sit in the freezer (`__refrigerator` in v1, or frozen
//! inside whatever sleep they were in, which `/proc/PID/wchan` shows as
//! e.g. `hrtimer_nanosleep`; `do_freezer_trap` in v2) with state `D`. In
//! cgroup v1 no signal, SIGKILL included, is delivered until the cgroup is
//! thawed, so the runtime's kill waits forever and the pod stays
//! Terminating.
//!
//! What a run showed (Linux 6.18, cgroup v1, runc 1.1.5, containerd
//! 1.6.20, Kubernetes v1.34.4, local provider): a **container's own**
//! cgroup frozen (`freezer.state` `FROZEN`, `freezer.self_freezing` 1) does
//! not keep the pod: runc's kill sees the container paused, sends SIGKILL
//! and thaws that cgroup, and the pod was gone 3 s after its deletion. The
//! **pod's** cgroup frozen (`kubepods/besteffort/pod<uid>`) does: runc
//! reads a container cgroup frozen only through an ancestor
//! (`freezer.self_freezing` 0, `freezer.parent_freezing` 1) as thawed
//! (`fs.FreezerGroup.GetState`, runc 1.1.5 to 1.5), so its kill sends
//! SIGKILL to the container's init and thaws nothing; the signal stays
//! pending, and the kubelet logs, every ~12 s,
//! `"Kill container failed" err="rpc error: code = DeadlineExceeded desc =
//! context deadline exceeded"` and `FailedKillPod: error killing pod:
//! [failed to "KillContainer" for "app" with KillContainerError: "rpc
//! error: code = DeadlineExceeded desc = context deadline exceeded",
//! failed to "KillPodSandbox" for "<uid>" with KillPodSandboxError: "rpc
//! error: code = DeadlineExceeded ..."]`, while `ctr task ls` still says
//! `RUNNING` for every task (the shim's own state: `PAUSED` only after a
//! pause through containerd). In cgroup v2 the kernel delivers a fatal
//! signal to a frozen task (cgroup-v2.rst, "Processes in the frozen cgroup
//! can be killed by a fatal signal"), so there the freeze only delays the
//! kill to the grace period; v2 is read the same way but was not run here.
//!
//! The thaw is planned only on proof that nothing else holds the pod
//! frozen ([`ThawVerdict`]): the freeze was written to the pod's own
//! cgroups (not inherited from a cgroup other pods share), and the
//! runtime, asked, reports none of the pod's tasks `PAUSED` (a pause
//! through containerd is someone's deliberate act, undone with `ctr task
//! resume`).

use std::{collections::BTreeMap, path::PathBuf};

use serde::{Deserialize, Serialize};

use super::RuntimeFacts;
use super::kernel::KernelTask;
use super::runtime::TaskFact;

/// Which cgroup hierarchy a freezer belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CgroupVersion {
    /// The v1 `freezer` controller: `freezer.state`.
    V1,
    /// The unified hierarchy: `cgroup.freeze`, `cgroup.events`.
    V2,
}

impl CgroupVersion {
    /// The file a freeze or thaw is written to.
    pub fn control_file(self) -> &'static str {
        match self {
            CgroupVersion::V1 => "freezer.state",
            CgroupVersion::V2 => "cgroup.freeze",
        }
    }

    /// What is written there to freeze (`true`) or thaw.
    pub fn control_value(self, frozen: bool) -> &'static str {
        match (self, frozen) {
            (CgroupVersion::V1, true) => "FROZEN",
            (CgroupVersion::V1, false) => "THAWED",
            (CgroupVersion::V2, true) => "1",
            (CgroupVersion::V2, false) => "0",
        }
    }
}

/// One cgroup at or above the pod, as its freezer files read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CgroupFact {
    /// The cgroup's directory on the node.
    pub path: PathBuf,
    pub version: CgroupVersion,
    /// The freezer files and their content, trimmed: v1 `freezer.state`,
    /// `freezer.self_freezing`, `freezer.parent_freezing`; v2
    /// `cgroup.freeze`, `cgroup.events`. A file that could not be read is
    /// missing.
    #[serde(default)]
    pub files: BTreeMap<String, String>,
    /// `cgroup.procs`: the processes directly in this cgroup.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub procs: Vec<i32>,
}

/// What a freezer says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum FreezerState {
    Thawed,
    /// Asked to freeze, not every task frozen yet (one in `D` elsewhere
    /// cannot be frozen until its call returns).
    Freezing,
    Frozen,
    /// The files could not be read.
    Unknown,
}

/// Where a cgroup sits relative to the pod.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum CgroupRole {
    /// Above the pod (`kubepods/besteffort`): shared with other pods.
    Ancestor,
    /// The pod's own cgroup (`pod<uid>`, `...-pod<uid_>.slice`).
    Pod,
    /// A container's (sandbox included) cgroup under the pod's.
    Container(String),
}

impl CgroupFact {
    fn file(&self, name: &str) -> Option<&str> {
        self.files.get(name).map(String::as_str)
    }

    /// `cgroup.events`' `frozen` line (v2).
    fn events_frozen(&self) -> Option<bool> {
        self.file("cgroup.events")?
            .lines()
            .find_map(|l| l.strip_prefix("frozen "))
            .map(|v| v.trim() == "1")
    }

    pub fn state(&self) -> FreezerState {
        match self.version {
            CgroupVersion::V1 => match self.file("freezer.state") {
                Some("FROZEN") => FreezerState::Frozen,
                Some("FREEZING") => FreezerState::Freezing,
                Some("THAWED") => FreezerState::Thawed,
                _ => FreezerState::Unknown,
            },
            CgroupVersion::V2 => match (self.events_frozen(), self.file("cgroup.freeze")) {
                (Some(true), _) => FreezerState::Frozen,
                (Some(false), Some("1")) => FreezerState::Freezing,
                (Some(false), _) => FreezerState::Thawed,
                (None, _) => FreezerState::Unknown,
            },
        }
    }

    /// Not thawed (frozen or on its way).
    pub fn is_frozen(&self) -> bool {
        matches!(self.state(), FreezerState::Frozen | FreezerState::Freezing)
    }

    /// Frozen by a write to this very cgroup (v1 `freezer.self_freezing`
    /// 1, v2 `cgroup.freeze` 1), as opposed to inherited from above.
    pub fn frozen_here(&self) -> bool {
        match self.version {
            CgroupVersion::V1 => self.file("freezer.self_freezing") == Some("1"),
            CgroupVersion::V2 => self.file("cgroup.freeze") == Some("1"),
        }
    }

    /// Frozen because a cgroup above it is (v1 `freezer.parent_freezing`
    /// 1; v2: frozen without `cgroup.freeze` 1 of its own).
    pub fn frozen_from_above(&self) -> bool {
        match self.version {
            CgroupVersion::V1 => self.file("freezer.parent_freezing") == Some("1"),
            CgroupVersion::V2 => self.is_frozen() && !self.frozen_here(),
        }
    }

    /// Where it sits relative to the pod with UID `uid`; `None` when its
    /// path does not lead to the pod at all.
    pub fn role(&self, uid: &str) -> Option<CgroupRole> {
        if uid.is_empty() {
            return None;
        }
        let names = [format!("pod{uid}"), format!("pod{}", uid.replace('-', "_"))];
        let parts: Vec<String> = self
            .path
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        let at = parts
            .iter()
            .position(|p| names.iter().any(|n| p.contains(n.as_str())));
        Some(match at {
            Some(i) if i + 1 == parts.len() => CgroupRole::Pod,
            Some(i) => CgroupRole::Container(container_id(&parts[i + 1]).to_owned()),
            None => CgroupRole::Ancestor,
        })
    }

    /// The freezer files as quoted in evidence: `freezer.state FROZEN,
    /// freezer.self_freezing 1, ...`.
    pub fn quote(&self) -> String {
        self.files
            .iter()
            .map(|(k, v)| format!("{k} {}", v.replace('\n', " / ")))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The container ID in a container cgroup's name: `<id>` (cgroupfs) or
/// `cri-containerd-<id>.scope` (systemd).
fn container_id(name: &str) -> &str {
    let name = name.strip_suffix(".scope").unwrap_or(name);
    name.rsplit_once('-').map_or(name, |(_, id)| id)
}

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

    fn v1(path: &str, state: &str, self_f: &str, parent_f: &str) -> CgroupFact {
        CgroupFact {
            path: path.into(),
            version: CgroupVersion::V1,
            files: [
                ("freezer.state", state),
                ("freezer.self_freezing", self_f),
                ("freezer.parent_freezing", parent_f),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
            procs: vec![],
        }
    }

    #[test]
    fn roles_follow_the_pod_uid_in_both_drivers() {
        let uid = "44b00f6f-4c2d-4ec2-9deb-206d3bb353f5";
        let c = v1(
            "/sys/fs/cgroup/freezer/x/kubepods/besteffort/pod44b00f6f-4c2d-4ec2-9deb-206d3bb353f5/677c",
            "FROZEN",
            "0",
            "1",
        );
        assert_eq!(c.role(uid), Some(CgroupRole::Container("677c".into())));
        let s = v1(
            "/sys/fs/cgroup/freezer/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/kubelet-kubepods-besteffort-pod44b00f6f_4c2d_4ec2_9deb_206d3bb353f5.slice/cri-containerd-abc.scope",
            "THAWED",
            "0",
            "0",
        );
        assert_eq!(s.role(uid), Some(CgroupRole::Container("abc".into())));
        let a = v1("/sys/fs/cgroup/freezer/x/kubepods", "THAWED", "0", "0");
        assert_eq!(a.role(uid), Some(CgroupRole::Ancestor));
    }

    #[test]
    fn v2_reads_cgroup_events() {
        let mut c = CgroupFact {
            path: "/sys/fs/cgroup/kubepods/podu".into(),
            version: CgroupVersion::V2,
            files: BTreeMap::from([
                ("cgroup.freeze".to_owned(), "1".to_owned()),
                (
                    "cgroup.events".to_owned(),
                    "populated 1\nfrozen 1".to_owned(),
                ),
            ]),
            procs: vec![],
        };
        assert_eq!(c.state(), FreezerState::Frozen);
        assert!(c.frozen_here() && !c.frozen_from_above());
        c.files.insert("cgroup.freeze".into(), "0".into());
        assert!(c.frozen_from_above());
        c.files
            .insert("cgroup.events".into(), "populated 1\nfrozen 0".into());
        assert_eq!(c.state(), FreezerState::Thawed);
    }

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
