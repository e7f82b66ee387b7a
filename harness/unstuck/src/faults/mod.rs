//! Node-level fault injectors: make the kubelet on a pod's node unable to
//! finish deleting it, the way the seed incidents did, so the node doctor
//! can be proven against the real symptom.
//!
//! - [`busy_mount`]: a stray mount nested inside one of the pod's volume
//!   directories (optionally with a process holding it), so the kubelet's
//!   volume TearDown fails with EBUSY (catalog case 4, seeds 003 and 004).
//! - [`wedge_shim`]: SIGSTOP the pod's containerd shim, so every stop
//!   request runs into its deadline and the runtime lists the tasks as
//!   UNKNOWN (catalog case 5, seed 000).
//! - [`stop_kubelet`]: stop the kubelet of the pod's node, so the node is
//!   lost to the control plane (`Ready=Unknown`, `Kubelet stopped posting
//!   node status.`) and nothing confirms the pod's containers are gone
//!   (seed 004's pods on a NotReady node). Revert starts it again.
//! - [`freeze_cgroup`]: freeze the pod's cgroup with the cgroup freezer,
//!   so its processes take no signal and the runtime's kill never
//!   finishes. Revert thaws it.
//!
//! An injector returns an [`Injected`] that records exactly what it did;
//! [`Injected::revert`] undoes it. Revert is idempotent and tolerates the
//! fault having been healed already, so it is safe in cleanup on every
//! path. No injector deletes the pod: the scenario does that.

pub mod busy_mount;
pub mod freeze_cgroup;
pub mod remove_cni_config;
pub mod stop_kubelet;
pub mod wedge_shim;

use k8s_openapi::api::core::v1::Pod;
use kube::{Api, Client};
use serde::{Deserialize, Serialize};

use crate::node::{Node, NodeError};

/// Why an injection or a revert failed.
#[derive(Debug, thiserror::Error)]
pub enum FaultError {
    #[error("pod {namespace}/{name} does not exist")]
    PodNotFound { namespace: String, name: String },
    #[error(
        "pod {pod} runs on node {actual}, but the fault was to be injected on {node}; pick a pod on that node"
    )]
    WrongNode {
        pod: String,
        node: String,
        actual: String,
    },
    #[error(
        "pod {pod} has no volume directory to make busy under {dir}{hint}; give it an emptyDir volume and wait until it runs"
    )]
    NoVolume {
        pod: String,
        dir: String,
        hint: String,
    },
    #[error(
        "no containerd shim on node {node} serves pod {pod} (runtime IDs: {ids}); is the pod running? {errors}"
    )]
    NoShim {
        pod: String,
        node: String,
        ids: String,
        errors: String,
    },
    #[error("the fault did not take: {0}")]
    NotInjected(String),
    #[error(transparent)]
    Node(#[from] NodeError),
    #[error("kubernetes API call failed while {what}: {source}")]
    Api {
        what: String,
        #[source]
        source: kube::Error,
    },
}

/// The pod a fault was injected into.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodTarget {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub node: String,
}

impl std::fmt::Display for PodTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{} (uid {})", self.namespace, self.name, self.uid)
    }
}

/// Reads the pod and checks it is on `node`.
pub(crate) async fn target_pod(
    client: &Client,
    node: &dyn Node,
    namespace: &str,
    name: &str,
) -> Result<(PodTarget, Pod), FaultError> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let pod = pods
        .get_opt(name)
        .await
        .map_err(|source| FaultError::Api {
            what: format!("reading pod {namespace}/{name}"),
            source,
        })?
        .ok_or_else(|| FaultError::PodNotFound {
            namespace: namespace.into(),
            name: name.into(),
        })?;
    let actual = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap_or_else(|| "<unscheduled>".into());
    if actual != node.name() {
        return Err(FaultError::WrongNode {
            pod: format!("{namespace}/{name}"),
            node: node.name().into(),
            actual,
        });
    }
    let target = PodTarget {
        namespace: namespace.into(),
        name: name.into(),
        uid: pod.metadata.uid.clone().unwrap_or_default(),
        node: actual,
    };
    Ok((target, pod))
}

/// A fault in place, with everything needed to undo it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "fault")]
pub enum Injected {
    BusyMount(busy_mount::BusyMount),
    WedgedShim(wedge_shim::WedgedShim),
    StoppedKubelet(stop_kubelet::StoppedKubelet),
    RemovedCniConfig(remove_cni_config::RemovedCniConfig),
    FrozenCgroup(freeze_cgroup::FrozenCgroup),
}

impl Injected {
    /// The pod the fault was injected into.
    pub fn pod(&self) -> &PodTarget {
        match self {
            Injected::BusyMount(b) => &b.pod,
            Injected::WedgedShim(w) => &w.pod,
            Injected::StoppedKubelet(k) => &k.pod,
            Injected::RemovedCniConfig(c) => &c.pod,
            Injected::FrozenCgroup(f) => &f.pod,
        }
    }

    /// One line saying what was done, for logs and reports.
    pub fn describe(&self) -> String {
        match self {
            Injected::BusyMount(b) => b.describe(),
            Injected::WedgedShim(w) => w.describe(),
            Injected::StoppedKubelet(k) => k.describe(),
            Injected::RemovedCniConfig(c) => c.describe(),
            Injected::FrozenCgroup(f) => f.describe(),
        }
    }

    /// Undoes the fault. Idempotent: what is already undone (by the doctor,
    /// the kubelet or an earlier revert) is skipped. Returns what it did.
    pub async fn revert(&self, node: &dyn Node) -> Result<Vec<String>, FaultError> {
        match self {
            Injected::BusyMount(b) => b.revert(node).await,
            Injected::WedgedShim(w) => w.revert(node).await,
            Injected::StoppedKubelet(k) => k.revert(node).await,
            Injected::RemovedCniConfig(c) => c.revert(node).await,
            Injected::FrozenCgroup(f) => f.revert(node).await,
        }
    }
}
