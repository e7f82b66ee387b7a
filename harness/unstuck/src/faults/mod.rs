//! Node-level fault injectors: make the kubelet on a pod's node unable to
//! finish deleting it, the way the seed incidents did, so the node doctor
//! can be proven against the real symptom.
//!
//! One file per fault, each a [`FaultKind`]: its name in scenario files,
//! its parameters (deserialised from the scenario's step), `inject`, and
//! what it leaves in place (a [`Placed`]: `describe` and `revert`).
//! [`TABLE`] maps the scenario's fault names to them; the runner's one
//! call is [`inject`], which returns a boxed [`Injected`] it reverts in
//! cleanup. The faults a scenario may name, and their parameters, are
//! `unstuck_core::scenario::fault_catalogue`'s (the loader refuses others
//! at their line); a test here keeps the two tables the same.
//!
//! Adding a fault: a file here implementing [`FaultKind`] and [`Placed`]
//! (`missing_cni_plugin.rs` is a small one), its line in the `table!`
//! below, and its entry in the core's catalogue (which the README's list
//! of faults is a copy of, checked by a test).
//!
//! Revert is idempotent and tolerates the fault having been healed
//! already (by the doctor, the kubelet or an earlier revert), so it is
//! safe in cleanup on every path. No injector deletes the pod: the
//! scenario does that.

mod kind;

use k8s_openapi::api::core::v1::Pod;
use kube::{Api, Client};
use serde::{Deserialize, Serialize};
use unstuck_core::scenario::Fault;

pub use kind::{FaultKind, FaultRecord, Injected, Injector, NoParams, Placed, Reverted};

use crate::node::{AnyNode, Node, NodeError};

/// Declares each fault's module and lists its injector in [`TABLE`], so a
/// fault's file and its table entry are one line.
macro_rules! table {
    ($($module:ident :: $fault:ident),* $(,)?) => {
        $(pub mod $module;)*

        /// Every fault, by the name scenarios give it (in the core's
        /// catalogue order; `table_matches_the_core_catalogue` checks).
        pub static TABLE: &[&dyn Injector] = &[$(&$module::$fault),*];
    };
}

table! {
    busy_mount::BusyMountFault,
    wedge_shim::WedgeShimFault,
    stop_kubelet::StopKubeletFault,
    hold_volume::HoldVolumeFault,
    remove_cni_config::RemoveCniConfigFault,
    freeze_cgroup::FreezeCgroupFault,
    missing_cni_plugin::MissingCniPluginFault,
}

/// The injector of the fault named `name`.
pub fn injector(name: &str) -> Option<&'static dyn Injector> {
    TABLE.iter().copied().find(|i| i.name() == name)
}

/// Injects a scenario's `fault` step into its pod, which runs in the real
/// `namespace`, on `node`: the runner's one call (which has checked that
/// its provider gives node access: `StepError::NoNode`). The fault is in
/// place when this returns; the runner reverts it in cleanup.
pub async fn inject(
    client: &Client,
    node: &AnyNode,
    fault: &Fault,
    namespace: &str,
) -> Result<Box<dyn Injected>, FaultError> {
    let injector = injector(fault.kind()).ok_or_else(|| FaultError::Unknown {
        fault: fault.kind().into(),
        known: TABLE
            .iter()
            .map(|i| i.name())
            .collect::<Vec<_>>()
            .join(", "),
    })?;
    injector
        .inject(
            client,
            node,
            namespace,
            &fault.pod().pod,
            fault.params_json(),
        )
        .await
}

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
    #[error("{failed}; undoing what was done of it failed too: {undo}")]
    UndoFailed {
        failed: Box<FaultError>,
        undo: Box<FaultError>,
    },
    #[error("no fault is called '{fault}'; the faults are: {known}")]
    Unknown { fault: String, known: String },
    #[error("fault {fault}: its parameters do not fit: {source}")]
    Params {
        fault: &'static str,
        #[source]
        source: serde_json::Error,
    },
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

/// `failed`, after undoing what an injection that failed half way did; a
/// failed undo is said too, not dropped.
pub(crate) async fn undone(
    failed: impl Into<FaultError>,
    placed: &impl Placed,
    node: &dyn Node,
) -> FaultError {
    let failed = failed.into();
    match placed.revert(node).await {
        Ok(_) => failed,
        Err(undo) => FaultError::UndoFailed {
            failed: Box::new(failed),
            undo: Box::new(undo),
        },
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Map, Value, json};
    use unstuck_core::scenario::CATALOGUE;

    use super::*;

    /// The core's catalogue (what scenarios may name) and this table (what
    /// can be injected) list the same faults in the same order, and each
    /// injector takes exactly the parameters the catalogue gives it.
    #[test]
    fn table_matches_the_core_catalogue() {
        let table: Vec<&str> = TABLE.iter().map(|i| i.name()).collect();
        let catalogue: Vec<&str> = CATALOGUE.iter().map(|f| f.name).collect();
        assert_eq!(
            table, catalogue,
            "faults::TABLE and unstuck_core::scenario::fault_catalogue::CATALOGUE differ"
        );
        for spec in CATALOGUE {
            let injector = injector(spec.name).unwrap();
            let all: Map<String, Value> = spec
                .params
                .iter()
                .map(|p| (p.name.to_owned(), json!("x")))
                .collect();
            injector
                .check_params(&Value::Object(all.clone()))
                .unwrap_or_else(|e| panic!("{}: every declared parameter: {e}", spec.name));
            let required: Map<String, Value> = all
                .iter()
                .filter(|(k, _)| spec.param(k).is_some_and(|p| p.required))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            injector
                .check_params(&Value::Object(required))
                .unwrap_or_else(|e| panic!("{}: the required parameters: {e}", spec.name));
            for p in spec.params.iter().filter(|p| p.required) {
                let mut without = all.clone();
                without.remove(p.name);
                assert!(
                    injector.check_params(&Value::Object(without)).is_err(),
                    "{}: takes no required {}",
                    spec.name,
                    p.name
                );
            }
            let mut extra = all;
            extra.insert("notAParameter".into(), json!("x"));
            let err = injector.check_params(&Value::Object(extra)).unwrap_err();
            assert!(
                err.to_string().contains("unknown field `notAParameter`"),
                "{}: {err}",
                spec.name
            );
        }
    }
}
