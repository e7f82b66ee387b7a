//! The node doctor's I/O half: for a pod stuck terminating, gather what
//! its node shows ([`gather`]), hand it to the pure diagnosis and ladder
//! in [`unstuck_core::doctor::node`], apply the ladder one step at a time
//! with a fresh look between steps ([`heal_pod`]), and prove recovery:
//! the pod left the API through the kubelet's own final delete (not a
//! force delete), nothing is mounted under its directory any more, and
//! the runtime lists nothing for it.
//!
//! Dry-run unless [`HealOptions::apply`]; a force delete only with
//! [`HealOptions::allow_force`], and then reported as such.

mod act;
mod freezer;
mod gather;
mod heal;
mod prove;
mod stuck;

use std::time::Duration;

use serde::Serialize;
use unstuck_core::doctor::node::{NodeFinding, NodeStep};

use crate::node::NodeError;

pub use gather::gather;
pub use heal::heal_pod;
pub use stuck::{Consented, NodeHalf, PodHeal, StuckPod, heal_stuck, stuck_pods};

/// Why the node doctor could not do its job (as opposed to a remedy that
/// did not help, which is in the report).
#[derive(Debug, thiserror::Error)]
pub enum NodeDoctorError {
    #[error("kubernetes API call failed while {what}: {source}")]
    Api {
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error(transparent)]
    Node(#[from] NodeError),
}

fn api(what: impl Into<String>) -> impl FnOnce(kube::Error) -> NodeDoctorError {
    let what = what.into();
    move |source| NodeDoctorError::Api { what, source }
}

/// How [`heal_pod`] works.
#[derive(Clone, Debug)]
pub struct HealOptions {
    /// Take remedies; otherwise diagnose and plan only (the default).
    pub apply: bool,
    /// Allow the last rung, a force delete of the pod object.
    pub allow_force: bool,
    /// A pod is stuck this long past its deletionTimestamp.
    pub stuck_after: Duration,
    /// How long to give the kubelet after a step before looking again.
    pub settle: Duration,
    /// The longest wait for the kubelet's volume retry: its backoff caps
    /// at 2m2s, plus a margin. A wait after a volume remedy lasts until the
    /// retry the kubelet announced, at least [`HealOptions::settle`], at
    /// most this.
    pub kubelet_retry_cap: Duration,
    /// After the pod is gone, how long to wait for its mounts, tasks,
    /// shims and runtime containers to go before calling them leftovers
    /// (the kubelet removes dead containers of deleted pods in its next
    /// garbage collection, which runs every minute).
    pub proof_timeout: Duration,
    /// How much of the end of the kubelet's log to read.
    pub log_tail_bytes: u64,
    /// At most this many remedies.
    pub max_steps: usize,
    /// Remedies never to take, by name (`RestartKubelet`, `KillShim`,
    /// `RestartRuntime`, `ReleaseHolder`, `LazyUnmount`, ...): for a node where, say, killing
    /// processes is not acceptable. The ladder goes on with the next rung.
    pub skip: Vec<String>,
    /// What a person was shown for this pod before saying yes: with it,
    /// only that pod (by UID) is healed and only rungs the shown ladder
    /// covers are taken ([`unstuck_core::doctor::node::shown_covers`]); a
    /// rung it does not cover ends the heal as
    /// [`HealOutcome::StepNotShown`]. `None` on clusters unstuck made
    /// for a run of its own, where the harness climbs the whole ladder.
    pub shown: Option<ShownPod>,
}

/// The pod and ladder a dry run printed.
#[derive(Clone, Debug, PartialEq)]
pub struct ShownPod {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub steps: Vec<NodeStep>,
}

impl ShownPod {
    /// What `report` (a dry run's) showed, if it showed a stuck pod.
    pub fn of(report: &NodeDoctorReport) -> Option<Self> {
        let (namespace, name) = report.pod.split_once('/')?;
        Some(Self {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            uid: report.uid.clone()?,
            steps: report.plan.clone(),
        })
        .filter(|s| !s.steps.is_empty())
    }
}

impl Default for HealOptions {
    fn default() -> Self {
        Self {
            apply: false,
            allow_force: false,
            stuck_after: Duration::from_secs(10),
            settle: Duration::from_secs(60),
            kubelet_retry_cap: Duration::from_secs(122 + 15),
            proof_timeout: Duration::from_secs(90),
            log_tail_bytes: 16 << 20,
            max_steps: 8,
            skip: Vec::new(),
            shown: None,
        }
    }
}

/// How a heal ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum HealOutcome {
    /// The pod does not exist.
    PodNotFound,
    /// The pod is not stuck; nothing was done.
    NotStuck,
    /// Dry run: diagnosed and planned only.
    DryRun,
    /// The pod is gone and nothing of it is left on the node.
    Recovered,
    /// The pod is gone, but something of it is left on the node.
    GoneWithLeftovers,
    /// The ladder ran out (or needed force that was not allowed).
    GaveUp,
    /// The next rung a fresh look planned was not in the plan the person
    /// confirmed (another holder, another shim, a stronger remedy): left
    /// as it was; the doctor's next dry run shows it.
    StepNotShown,
    /// Stuck, but not in the plan the person confirmed (it became stuck
    /// after it was shown): nothing was done to it.
    NotShown,
}

impl HealOutcome {
    /// Its name in reports and JSON (as serde writes it).
    pub fn name(self) -> &'static str {
        match self {
            HealOutcome::PodNotFound => "PodNotFound",
            HealOutcome::NotStuck => "NotStuck",
            HealOutcome::DryRun => "DryRun",
            HealOutcome::Recovered => "Recovered",
            HealOutcome::GoneWithLeftovers => "GoneWithLeftovers",
            HealOutcome::GaveUp => "GaveUp",
            HealOutcome::StepNotShown => "StepNotShown",
            HealOutcome::NotShown => "NotShown",
        }
    }

    /// Left for a person to review, not failed: a yes did not cover it.
    pub fn is_left(self) -> bool {
        matches!(self, HealOutcome::StepNotShown | HealOutcome::NotShown)
    }
}

impl std::fmt::Display for HealOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What one remedy did.
#[derive(Clone, Debug, Serialize)]
pub struct AppliedNodeStep {
    pub step: NodeStep,
    /// The diagnosis it acted on.
    pub finding_summary: String,
    /// Whether every action of the step succeeded.
    pub ok: bool,
    /// What was done (or why not), one line each.
    pub actions: Vec<String>,
    /// Milliseconds since the heal started, when the step began.
    pub started_at_ms: u128,
    /// How long the step and its wait for the kubelet took, in ms.
    pub took_ms: u128,
    /// Whether the pod was gone at the end of its wait.
    pub pod_gone: bool,
}

/// How long the phases of a heal took, in milliseconds from its start.
#[derive(Clone, Debug, Default, Serialize)]
pub struct HealTimings {
    /// Until the first diagnosis.
    pub diagnosed_ms: u128,
    /// Until the pod left the API.
    pub pod_gone_ms: Option<u128>,
    /// Until the end, proof included.
    pub total_ms: u128,
}

/// Everything a heal did and saw.
#[derive(Clone, Debug, Serialize)]
pub struct NodeDoctorReport {
    /// `namespace/name`.
    pub pod: String,
    pub uid: Option<String>,
    pub node: String,
    pub outcome: HealOutcome,
    /// The first diagnosis, with its evidence.
    pub initial: Option<NodeFinding>,
    /// The ladder planned from it.
    pub plan: Vec<NodeStep>,
    /// The remedies taken, in order.
    pub steps: Vec<AppliedNodeStep>,
    /// Whether the pod object was force deleted (leaves the node dirty).
    pub force_used: bool,
    /// The facts that prove recovery.
    pub proof: Vec<String>,
    /// What of the pod is still on the node.
    pub leftovers: Vec<String>,
    pub timings: HealTimings,
}

impl NodeDoctorReport {
    /// Recovered: gone through the kubelet, nothing left, no force.
    pub fn recovered_without_force(&self) -> bool {
        self.outcome == HealOutcome::Recovered && !self.force_used
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{faults, node::AnyNode};
    use kube::Client;

    fn assert_send<T: Send>(_: &T) {}

    /// The runner may `tokio::spawn` these: their futures must be Send.
    #[allow(dead_code, clippy::let_underscore_future)]
    fn futures_are_send(client: &Client, node: &AnyNode) {
        let opts = HealOptions::default();
        assert_send(&heal_pod(client, node, "ns", "p", &opts));
        assert_send(&heal_stuck(client, node, &opts, |_| true, Consented::Every));
        let shown = [];
        assert_send(&heal_stuck(
            client,
            node,
            &opts,
            |_| true,
            Consented::Shown(&shown),
        ));
        assert_send(&faults::wedge_shim::inject(client, node, "ns", "p"));
        assert_send(&faults::stop_kubelet::inject(client, node, "ns", "p"));
        assert_send(&faults::freeze_cgroup::inject(client, node, "ns", "p"));
        let busy = faults::busy_mount::BusyMountOptions::default();
        assert_send(&faults::busy_mount::inject(client, node, "ns", "p", &busy));
    }
}
