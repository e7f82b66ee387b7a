//! The shape every fault has, typed ([`FaultKind`], [`Placed`]) for the
//! file that implements it and for tests that want its fields, and boxed
//! ([`Injector`], [`Injected`]) for the table and the runner, which hold
//! faults of every kind side by side.
//!
//! [`Node`]'s methods return `impl Future`, so the typed traits are
//! generic over the node and not object safe; the boxed ones are written
//! once, here, for every fault, on the node a run holds ([`AnyNode`]).

use std::{fmt, marker::PhantomData};

use futures::future::BoxFuture;
use kube::Client;
use serde::{Deserialize, Serialize, de::DeserializeOwned};

use super::{FaultError, PodTarget};
use crate::node::{AnyNode, Node};

/// What a revert did, one line per action; empty when nothing was left
/// to undo.
pub type Reverted = Vec<String>;

/// One kind of fault: what `- fault: {<NAME>: {pod, namespace, ...}}` injects.
pub trait FaultKind: Send + Sync + 'static {
    /// Its name in scenario files (a name in the core's catalogue).
    const NAME: &'static str;
    /// Its parameters beside `pod` and `namespace`, from the scenario
    /// (`#[serde(deny_unknown_fields)]`, so a drift from the catalogue
    /// fails the table's test).
    type Params: DeserializeOwned + Send;
    /// What it leaves in place.
    type Placed: Placed;

    /// Injects it into the pod `name` in `namespace`, which must run on
    /// `node`. On failure nothing of it is left.
    fn inject(
        client: &Client,
        node: &dyn Node,
        namespace: &str,
        name: &str,
        params: Self::Params,
    ) -> impl Future<Output = Result<Self::Placed, FaultError>> + Send;
}

/// A fault in place, with everything needed to undo it.
pub trait Placed: Serialize + fmt::Debug + Send + Sync + 'static {
    /// The pod it was injected into.
    fn pod(&self) -> &PodTarget;

    /// One line saying what was done, for logs and reports.
    fn describe(&self) -> String;

    /// Undoes the fault. Idempotent: what is already undone (by the
    /// doctor, the kubelet or an earlier revert) is skipped.
    fn revert(&self, node: &dyn Node) -> impl Future<Output = Result<Reverted, FaultError>> + Send;
}

/// The parameters of a fault that takes none but its pod.
#[derive(Clone, Copy, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoParams {}

/// What a run keeps of a fault it injected, for its report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FaultRecord {
    /// Its name in scenario files.
    pub fault: String,
    pub pod: PodTarget,
    pub description: String,
    /// Its [`Placed`] value: every path, process and file it touched.
    pub detail: serde_json::Value,
}

/// A fault in place, whichever it is: what the runner holds and reverts.
pub trait Injected: fmt::Debug + Send + Sync {
    /// Its name in scenario files.
    fn name(&self) -> &'static str;
    fn pod(&self) -> &PodTarget;
    fn describe(&self) -> String;
    fn record(&self) -> FaultRecord;
    /// [`Placed::revert`] on the run's node.
    fn revert<'a>(&'a self, node: &'a AnyNode) -> BoxFuture<'a, Result<Reverted, FaultError>>;
}

/// Injects one kind of fault, whichever it is: an entry of the table.
pub trait Injector: Sync {
    /// Its name in scenario files.
    fn name(&self) -> &'static str;

    /// Checks `params` (a JSON object of the scenario's parameters) fit.
    fn check_params(&self, params: &serde_json::Value) -> Result<(), FaultError>;

    /// [`FaultKind::inject`], with the parameters as the scenario wrote them.
    fn inject<'a>(
        &'a self,
        client: &'a Client,
        node: &'a AnyNode,
        namespace: &'a str,
        name: &'a str,
        params: serde_json::Value,
    ) -> BoxFuture<'a, Result<Box<dyn Injected>, FaultError>>;
}

fn params<F: FaultKind>(params: serde_json::Value) -> Result<F::Params, FaultError> {
    serde_json::from_value(params).map_err(|source| FaultError::Params {
        fault: F::NAME,
        source,
    })
}

impl<F: FaultKind> Injector for F {
    fn name(&self) -> &'static str {
        F::NAME
    }

    fn check_params(&self, value: &serde_json::Value) -> Result<(), FaultError> {
        params::<F>(value.clone()).map(drop)
    }

    fn inject<'a>(
        &'a self,
        client: &'a Client,
        node: &'a AnyNode,
        namespace: &'a str,
        name: &'a str,
        value: serde_json::Value,
    ) -> BoxFuture<'a, Result<Box<dyn Injected>, FaultError>> {
        Box::pin(async move {
            let params = params::<F>(value)?;
            let placed = F::inject(client, node, namespace, name, params).await?;
            Ok(Box::new(Holding::<F>(placed, PhantomData)) as Box<dyn Injected>)
        })
    }
}

/// A [`Placed`] with the name of the fault that placed it (two faults may
/// leave the same kind of thing: `busyMount` and `holdVolume`).
struct Holding<F: FaultKind>(F::Placed, PhantomData<fn() -> F>);

impl<F: FaultKind> fmt::Debug for Holding<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple(F::NAME).field(&self.0).finish()
    }
}

impl<F: FaultKind> Injected for Holding<F> {
    fn name(&self) -> &'static str {
        F::NAME
    }

    fn pod(&self) -> &PodTarget {
        self.0.pod()
    }

    fn describe(&self) -> String {
        self.0.describe()
    }

    fn record(&self) -> FaultRecord {
        FaultRecord {
            fault: F::NAME.into(),
            pod: self.0.pod().clone(),
            description: self.0.describe(),
            detail: serde_json::to_value(&self.0)
                .unwrap_or_else(|e| serde_json::json!({ "unrecorded": e.to_string() })),
        }
    }

    fn revert<'a>(&'a self, node: &'a AnyNode) -> BoxFuture<'a, Result<Reverted, FaultError>> {
        Box::pin(self.0.revert(node))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::faults::missing_cni_plugin::{ChainedMissingPlugin, MissingCniPluginFault};

    /// A run's record of a fault names the fault (not the type it left in
    /// place) and keeps every field of what it did.
    #[test]
    fn a_record_names_the_fault_and_keeps_what_it_did() {
        let placed = ChainedMissingPlugin {
            pod: PodTarget {
                namespace: "app".into(),
                name: "web".into(),
                uid: "u1".into(),
                node: "n1".into(),
            },
            plugin: "flannel".into(),
            path: "/etc/cni/net.d/10-x.conflist".into(),
            original: "{}".into(),
            written: "{\"plugins\":[]}".into(),
        };
        let held: Box<dyn Injected> = Box::new(Holding::<MissingCniPluginFault>(
            placed.clone(),
            PhantomData,
        ));
        assert_eq!(held.name(), "missingCniPlugin");
        let record = held.record();
        assert_eq!(record.fault, "missingCniPlugin");
        assert_eq!(record.pod, placed.pod);
        assert_eq!(record.description, placed.describe());
        assert_eq!(record.detail["plugin"], "flannel");
        assert_eq!(record.detail["path"], "/etc/cni/net.d/10-x.conflist");
    }
}
