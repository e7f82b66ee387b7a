//! Why the kubelet has not finished a pod, as the node doctor names it:
//! the model's word for a node finding, which scenarios (`expectFindings`),
//! the fault catalogue (what each fault reproduces) and reports use.

use serde::{Deserialize, Serialize};

/// What keeps the kubelet from finishing the pod.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum NodeCause {
    /// The node's kubelet does not run (or, where the node cannot say, its
    /// node is `Ready=Unknown`: the kubelet stopped posting status). Nothing
    /// on the node kills the containers or sends the final delete. Seed
    /// 004's pods on a NotReady node. Listed first: every other cause is
    /// only worked on by a running kubelet.
    KubeletDown,
    /// The runtime cannot stop the pod's containers: a stopped or
    /// unresponsive shim, tasks in `UNKNOWN`, kill requests running into
    /// their deadline (catalog case 5, seed 000). Listed first: volumes are
    /// only torn down once the containers are gone.
    WedgedRuntime,
    /// A process of the pod is in uninterruptible sleep (`D`) inside a
    /// kernel call that does not return (a write to a frozen filesystem,
    /// an unanswered FUSE or NFS request): SIGKILL waits for it, so the
    /// runtime cannot stop the container however healthy it is. No runtime
    /// remedy helps; what the process waits for must be released.
    KernelStall,
    /// The pod's cgroup is frozen (the cgroup freezer): its processes sit
    /// in the freezer, no signal reaches them (cgroup v1), and the
    /// runtime's kill runs into its deadline (`FailedKillPod ...
    /// KillContainerError ... DeadlineExceeded`, `KillPodSandboxError`)
    /// while the runtime lists its tasks `RUNNING`. Thawing it, when the
    /// freeze is the pod's own and not the runtime's pause, lets the
    /// kubelet's next kill finish ([`super::freezer`]).
    CgroupFrozen,
    /// A volume cannot be torn down: the kubelet's TearDown fails (EBUSY,
    /// target is busy), or something not the kubelet's is mounted or held
    /// under the pod's directory (catalog case 4, seeds 003 and 004).
    BusyVolume,
    /// The network plugin's DEL fails, so the runtime cannot stop the
    /// pod's sandbox: `KillPodSandboxError: ... failed to destroy network
    /// for sandbox ...` (projectcalico/calico#7958: the plugin cannot reach
    /// the API server; containerd/containerd#8774: "cni plugin not
    /// initialized"). No kill or runtime restart helps: the plugin, its
    /// configuration or what it depends on must be repaired, after which
    /// the kubelet's next KillPodSandbox succeeds.
    CniTeardownFailed,
    /// Stuck, but the node shows no cause (the kubelet may simply not have
    /// retried yet, or its log is not available).
    Unknown,
}

impl NodeCause {
    pub const ALL: [NodeCause; 7] = [
        NodeCause::KubeletDown,
        NodeCause::WedgedRuntime,
        NodeCause::KernelStall,
        NodeCause::CgroupFrozen,
        NodeCause::BusyVolume,
        NodeCause::CniTeardownFailed,
        NodeCause::Unknown,
    ];

    /// Its name as scenarios (`expectFindings`), reports and JSON write it.
    pub fn name(self) -> &'static str {
        match self {
            NodeCause::KubeletDown => "KubeletDown",
            NodeCause::WedgedRuntime => "WedgedRuntime",
            NodeCause::KernelStall => "KernelStall",
            NodeCause::CgroupFrozen => "CgroupFrozen",
            NodeCause::BusyVolume => "BusyVolume",
            NodeCause::CniTeardownFailed => "CniTeardownFailed",
            NodeCause::Unknown => "Unknown",
        }
    }
}

impl std::fmt::Display for NodeCause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for NodeCause {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        NodeCause::ALL
            .into_iter()
            .find(|c| c.name() == s)
            .ok_or_else(|| format!("no node cause is called '{s}'"))
    }
}
