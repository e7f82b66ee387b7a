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
//! frozen ([`super::thaw::ThawVerdict`]): the freeze was written to the pod's own
//! cgroups (not inherited from a cgroup other pods share), and the
//! runtime, asked, reports none of the pod's tasks `PAUSED` (a pause
//! through containerd is someone's deliberate act, undone with `ctr task
//! resume`).

use std::{collections::BTreeMap, path::PathBuf};

use serde::{Deserialize, Serialize};

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
pub(crate) fn container_id(name: &str) -> &str {
    let name = name.strip_suffix(".scope").unwrap_or(name);
    name.rsplit_once('-').map_or(name, |(_, id)| id)
}

/// A cgroup v1 freezer as its files read, for tests here and in
/// [`super::thaw`].
#[cfg(test)]
pub(crate) fn v1_fact(path: &str, state: &str, self_f: &str, parent_f: &str) -> CgroupFact {
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

#[cfg(test)]
mod tests {
    use super::*;

    use super::v1_fact as v1;

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
}
