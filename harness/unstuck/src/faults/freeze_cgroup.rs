//! A pod whose cgroup is frozen (issue 18, item 4).
//!
//! Freezes the pod's own cgroup with the cgroup freezer, as a person or a
//! tool meets it: `echo FROZEN > .../kubepods/besteffort/pod<uid>/freezer.state`
//! (cgroup v1; `echo 1 > .../cgroup.freeze` on a cgroup v2 host), what a
//! checkpoint or backup tool, a debugging session or a chaos tool leaves
//! behind. Every process of the pod, the sandbox's included, sits in the
//! freezer, and when the pod is deleted the runtime's kill never finishes.
//!
//! The pod's cgroup, not its containers': run here (cgroup v1, runc
//! 1.1.5), a container's own frozen cgroup is thawed by runc itself when
//! it sends SIGKILL (the pod was gone 3 s after its deletion), but runc
//! does not touch the pod's cgroup above it, and that freeze holds. On
//! cgroup v2 the kernel lets a fatal signal through a freeze, so this
//! fault only delays the kill there (not run here: this host is v1).

use kube::Client;
use serde::{Deserialize, Serialize};
use unstuck_core::doctor::node::{CgroupVersion, freezer::CgroupRole};

use super::{FaultError, undone, FaultKind, NoParams, Placed, PodTarget, Reverted, target_pod};
use crate::node::{Node, cgroup};

/// A frozen pod cgroup in place.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FrozenCgroup {
    pub pod: PodTarget,
    /// The pod's cgroup directory that was frozen.
    pub path: std::path::PathBuf,
    pub version: CgroupVersion,
    /// Its freezer files once frozen, as quoted.
    pub state: String,
}

/// `freezeCgroup`.
pub struct FreezeCgroupFault;

impl FaultKind for FreezeCgroupFault {
    const NAME: &'static str = "freezeCgroup";
    type Params = NoParams;
    type Placed = FrozenCgroup;

    async fn inject(
        client: &Client,
        node: &dyn Node,
        namespace: &str,
        name: &str,
        _: NoParams,
    ) -> Result<FrozenCgroup, FaultError> {
        inject(client, node, namespace, name).await
    }
}

/// Freezes the cgroup of the pod (in the v1 freezer hierarchy when the
/// node has one, else in cgroup v2). The pod must run on `node`.
pub async fn inject(
    client: &Client,
    node: &dyn Node,
    namespace: &str,
    name: &str,
) -> Result<FrozenCgroup, FaultError> {
    let (pod, _) = target_pod(client, node, namespace, name).await?;
    let cgroups = cgroup::pod_cgroups(node, &pod.uid).await?;
    let mut own: Vec<_> = cgroups
        .iter()
        .filter(|c| c.role(&pod.uid) == Some(CgroupRole::Pod))
        .collect();
    own.sort_by_key(|c| c.version != CgroupVersion::V1);
    let Some(target) = own.first() else {
        return Err(FaultError::NotInjected(format!(
            "no cgroup of pod {pod} found on node {} (read {} cgroup(s)); is it running?",
            node.name(),
            cgroups.len()
        )));
    };
    let mut frozen = FrozenCgroup {
        pod: pod.clone(),
        path: target.path.clone(),
        version: target.version,
        state: String::new(),
    };
    match cgroup::set_frozen(node, &target.path, target.version, true).await {
        Ok(c) => frozen.state = c.quote(),
        Err(e) => return Err(undone(e, &frozen, node).await),
    }
    Ok(frozen)
}

impl Placed for FrozenCgroup {
    fn pod(&self) -> &PodTarget {
        &self.pod
    }

    fn describe(&self) -> String {
        format!(
            "frozen cgroup: {} > {} of pod {} (now {})",
            self.version.control_value(true),
            self.path.join(self.version.control_file()).display(),
            self.pod,
            self.state
        )
    }

    /// Thaws the cgroup if it is still there and still frozen by a write
    /// to it. One the doctor thawed, or the kubelet removed, is left alone.
    async fn revert(&self, node: &dyn Node) -> Result<Reverted, FaultError> {
        let present = cgroup::pod_cgroups(node, &self.pod.uid)
            .await?
            .into_iter()
            .find(|c| c.path == self.path);
        match present {
            Some(c) if c.frozen_here() => {
                let after = cgroup::set_frozen(node, &self.path, self.version, false).await?;
                Ok(vec![format!(
                    "thawed {} (now {})",
                    self.path.display(),
                    after.quote()
                )])
            }
            _ => Ok(Vec::new()),
        }
    }
}
