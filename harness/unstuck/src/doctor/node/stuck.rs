//! A node's stuck pods, and the one loop over them: which pods are stuck
//! ([`stuck_pods`]), and each one looked at or healed in turn
//! ([`heal_stuck`]), for the doctor's look, its `--apply` and a scenario
//! run's doctor step alike.

use std::{sync::Arc, time::Duration};

use k8s_openapi::{
    api::core::v1::Pod,
    jiff::{SignedDuration, Timestamp},
};
use kube::{Api, Client, api::ListParams};
use serde::Serialize;

use crate::node::Node;

use super::{HealOptions, HealOutcome, NodeDoctorError, NodeDoctorReport, ShownPod, api, heal_pod};

/// A pod past its deletionTimestamp on a node.
#[derive(Clone, Debug, Serialize)]
pub struct StuckPod {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub overdue_seconds: i64,
}

/// The pods on `node_name` that are more than `stuck_after` past their
/// deletionTimestamp (which already includes the grace period) and not yet
/// finally deleted by the kubelet (`deletionGracePeriodSeconds` 0 means
/// only finalizers hold them: not a node matter). Keyed on
/// deletionTimestamp, never on the phase.
pub async fn stuck_pods(
    client: &Client,
    node_name: &str,
    stuck_after: Duration,
) -> Result<Vec<StuckPod>, NodeDoctorError> {
    let pods: Api<Pod> = Api::all(client.clone());
    let list = pods
        .list(&ListParams::default().fields(&format!("spec.nodeName={node_name}")))
        .await
        .map_err(api(format!("listing pods on node {node_name}")))?;
    let now = Timestamp::now();
    let threshold = SignedDuration::try_from(stuck_after).unwrap_or(SignedDuration::MAX);
    let mut out: Vec<StuckPod> = list
        .items
        .into_iter()
        .filter_map(|p| {
            let m = p.metadata;
            let overdue = now.duration_since(m.deletion_timestamp?.0);
            (overdue > threshold && m.deletion_grace_period_seconds != Some(0)).then(|| StuckPod {
                namespace: m.namespace.unwrap_or_default(),
                name: m.name.unwrap_or_default(),
                uid: m.uid.unwrap_or_default(),
                overdue_seconds: overdue.as_secs(),
            })
        })
        .collect();
    out.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    Ok(out)
}

/// Which of a node's stuck pods [`heal_stuck`] heals with
/// [`HealOptions::apply`] (without it, every stuck pod is looked at).
#[derive(Clone, Copy, Debug)]
pub enum Consented<'a> {
    /// Every pod stuck now, climbing the whole ladder: a scenario run's
    /// own pods, on a cluster unstuck made (the scenario is the consent).
    Every,
    /// Only the pods a person was shown, each with the rungs its shown
    /// ladder covers; a pod stuck now that was not shown is looked at and
    /// said ([`HealOutcome::NotShown`]), and nothing is done to it.
    Shown(&'a [ShownPod]),
}

/// One pod the node half looked at or healed.
#[derive(Clone, Debug)]
pub struct PodHeal {
    pub namespace: String,
    pub name: String,
    /// As listed (or shown).
    pub uid: String,
    /// Its report, or why the node doctor could not do its job on it.
    pub healed: Result<NodeDoctorReport, Arc<NodeDoctorError>>,
}

/// The node half of a doctor run: one result per pod, in the order taken.
/// Empty when the doctor was not given a node.
#[derive(Clone, Debug, Default)]
pub struct NodeHalf {
    pub pods: Vec<PodHeal>,
    /// Why the node's pods could not be listed (those healed before the
    /// listing, if any, are in `pods`).
    pub unlisted: Option<Arc<NodeDoctorError>>,
}

impl NodeHalf {
    /// The reports of the pods the node doctor could look at, in order.
    pub fn reports(&self) -> impl Iterator<Item = &NodeDoctorReport> {
        self.pods.iter().filter_map(|p| p.healed.as_ref().ok())
    }

    /// The first thing that kept the node doctor from its job: a pod's
    /// error, in order, else the listing's.
    pub fn error(&self) -> Option<&Arc<NodeDoctorError>> {
        self.pods
            .iter()
            .find_map(|p| p.healed.as_ref().err())
            .or(self.unlisted.as_ref())
    }

    async fn heal(
        &mut self,
        client: &Client,
        node: &dyn Node,
        (namespace, name, uid): (&str, &str, &str),
        opts: &HealOptions,
    ) -> bool {
        let healed = heal_pod(client, node, namespace, name, opts)
            .await
            .map_err(Arc::new);
        let ok = healed.is_ok();
        self.pods.push(PodHeal {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            uid: uid.to_owned(),
            healed,
        });
        ok
    }
}

/// The one loop over a node's stuck pods, for the doctor's look, its
/// `--apply` and the runner's doctor step alike: one pod after the other,
/// the pods shown (see below), then the pods stuck on the node now that
/// `within` admits.
///
/// Without [`HealOptions::apply`], every stuck pod is diagnosed and its
/// ladder planned. With it, [`Consented::Every`]: every stuck pod is
/// healed with `opts`, a pod whose heal fails not stopping the next.
/// [`Consented::Shown`]: each pod shown is healed first, whether it is
/// still listed as stuck or not (a pod that went since is proved gone),
/// with only the rungs its shown ladder covers; a heal that fails ends
/// the heals there (the command says why, and nothing more is done on a
/// node that stopped answering); then every pod stuck now that was not
/// healed is only looked at, and said as [`HealOutcome::NotShown`].
pub async fn heal_stuck(
    client: &Client,
    node: &dyn Node,
    opts: &HealOptions,
    within: impl Fn(&StuckPod) -> bool,
    consented: Consented<'_>,
) -> NodeHalf {
    let mut half = NodeHalf::default();
    // A person's consent limits the heals to what was shown.
    let limited = opts.apply && matches!(consented, Consented::Shown(_));
    let shown = match consented {
        Consented::Shown(shown) if limited => shown,
        _ => &[],
    };
    for s in shown {
        let opts = HealOptions {
            shown: Some(s.clone()),
            ..opts.clone()
        };
        if !half
            .heal(client, node, (&s.namespace, &s.name, &s.uid), &opts)
            .await
        {
            return half;
        }
    }
    let stuck = match stuck_pods(client, node.name(), opts.stuck_after).await {
        Ok(s) => s,
        Err(e) => {
            half.unlisted = Some(Arc::new(e));
            return half;
        }
    };
    let healed: Vec<Option<String>> = half.reports().map(|r| r.uid.clone()).collect();
    let not_healed = |p: &StuckPod| !healed.iter().any(|u| u.as_deref() == Some(p.uid.as_str()));
    let rest = HealOptions {
        apply: opts.apply && !limited,
        ..opts.clone()
    };
    for p in stuck.iter().filter(|p| within(p) && not_healed(p)) {
        half.heal(client, node, (&p.namespace, &p.name, &p.uid), &rest)
            .await;
        if let Some(Ok(r)) = half.pods.last_mut().map(|p| p.healed.as_mut())
            && limited
            && r.outcome == HealOutcome::DryRun
        {
            // Stuck now and not shown: only said.
            r.outcome = HealOutcome::NotShown;
        }
    }
    half
}
