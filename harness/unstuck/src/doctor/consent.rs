//! Consent: what a person confirmed, and nothing more.
//!
//! `unstuck doctor --apply` shows a plan and asks (`--yes` answers for
//! what was printed before it). Later rounds and discovery retries collect
//! afresh and can plan steps nobody saw: a pod the garbage collector
//! deleted after the plan was shown, a `/finalize` the shown plan refused.
//! Such a step is applied only when consent covers it: the same action on
//! the same object (kind, namespace, name, UID) and, for a step that
//! removes keys (finalizers, spec tokens, a webhook in a configuration),
//! only keys that were shown. What is not covered is shown and asked about
//! again when a person can be asked, otherwise left, saying so. One
//! exception finishes what was confirmed: removing a finalizer key that
//! was shown (in a step, or under "Expected in later rounds") from what
//! later hangs inside a Terminating namespace the shown steps target (a
//! custom resource the namespace controller could delete only once a
//! webhook failed open) is covered; it is still argued on a fresh read
//! with the same proof, and reported. A namespace a cluster-wide blocker
//! merely names (every namespace a dead metrics APIService holds) is not
//! such a target, and a key nobody was shown is never covered.
//!
//! On the node of a cluster unstuck made, consent is the same: the stuck
//! pods shown are healed, each with only the rungs of its shown ladder;
//! a pod stuck since is said and left ([`Consent::on_node`]).
//!
//! A scenario run (`unstuck run`) is its own consent: the scenario set the
//! stuck state up on objects the run owns, so every step within the run's
//! scope is allowed ([`Consent::Scope`]).
//!
//! Pure: the asking is behind [`AskAgain`], time is passed in.

use std::{
    collections::{BTreeMap, BTreeSet},
    time::Duration,
};

use k8s_openapi::jiff::Timestamp;
use serde::Serialize;
use unstuck_core::doctor::{Action, PlannedStep};

use super::node::{Consented, ShownPod};

/// The longest a confirmation may come after its plan was shown. The plan
/// is argued again before each write anyway; the bound is on the person's
/// consent: an answer given this long after the question was asked is
/// about a cluster they no longer see.
pub const MAX_PLAN_AGE: Duration = Duration::from_secs(5 * 60);

/// Why a step not covered by consent is left (`--yes`, or no terminal).
pub const NOT_CONFIRMED: &str = "not in the confirmed plan; run the doctor again to review it";

/// Which object a mutating step changes, and how.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct StepTarget {
    /// The action's name, e.g. `RemoveFinalizers`.
    pub action: &'static str,
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
    pub uid: String,
}

/// What a mutating step does to which object: its target, the keys it
/// removes (empty for a step without keys, such as deleting an
/// APIService) and how to say it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claim {
    pub target: StepTarget,
    pub keys: BTreeSet<String>,
    /// The object's API path, as reports name it.
    pub path: String,
}

impl Claim {
    /// `remove [a, b]`, `delete`, ...: what the step does, for a report line.
    pub fn what(&self) -> String {
        let keys = self.keys.iter().cloned().collect::<Vec<_>>().join(", ");
        match self.target.action {
            "RemoveFinalizers" => format!("remove [{keys}]"),
            "FinalizeNamespace" => format!("/finalize without spec.finalizers [{keys}]"),
            "SetWebhookFailurePolicy" => format!("make webhook(s) [{keys}] fail open"),
            "DeleteApiService" => "delete".into(),
            "SetCrdConversionNone" => "set spec.conversion to strategy None".into(),
            other => other.to_owned(),
        }
    }
}

/// The claim of a step that changes the cluster; `None` for a wait or a
/// refusal.
pub fn claim(step: &PlannedStep) -> Option<Claim> {
    let claim = match &step.action {
        Action::Wait { .. } | Action::Refuse { .. } => return None,
        Action::RemoveFinalizers(r) => Claim {
            target: StepTarget {
                action: step.action.name(),
                kind: r.target.kind.clone(),
                namespace: r.target.namespace.clone(),
                name: r.target.name.clone(),
                uid: r.target.uid.clone(),
            },
            keys: r.remove.iter().cloned().collect(),
            path: r.target.api_path(),
        },
        Action::DeleteApiService(d) => Claim {
            target: StepTarget {
                action: step.action.name(),
                kind: "APIService".into(),
                namespace: None,
                name: d.name.clone(),
                uid: d.uid.clone(),
            },
            keys: BTreeSet::new(),
            path: d.api_path(),
        },
        Action::SetWebhookFailurePolicy(w) => Claim {
            target: StepTarget {
                action: step.action.name(),
                kind: w.configuration.kind().to_owned(),
                namespace: None,
                name: w.configuration_name.clone(),
                uid: w.uid.clone(),
            },
            keys: BTreeSet::from([w.webhook.clone()]),
            path: w.api_path(),
        },
        Action::SetCrdConversionNone(c) => Claim {
            target: StepTarget {
                action: step.action.name(),
                kind: "CustomResourceDefinition".into(),
                namespace: None,
                name: c.crd.clone(),
                uid: c.uid.clone(),
            },
            keys: BTreeSet::new(),
            path: c.api_path(),
        },
        Action::FinalizeNamespace(f) => Claim {
            target: StepTarget {
                action: step.action.name(),
                kind: "Namespace".into(),
                namespace: None,
                name: f.name.clone(),
                uid: f.uid.clone(),
            },
            keys: f.remove_tokens.iter().cloned().collect(),
            path: f.api_path(),
        },
    };
    Some(claim)
}

/// `step` doing only the `keys` among its own (order kept); `None` when
/// none of them is left. A step without keys is returned as it is.
pub fn restrict(step: &PlannedStep, keys: &BTreeSet<String>) -> Option<PlannedStep> {
    let mut out = step.clone();
    let left = match &mut out.action {
        Action::RemoveFinalizers(r) => {
            r.remove.retain(|k| keys.contains(k));
            r.remove.len()
        }
        Action::FinalizeNamespace(f) => {
            f.remove_tokens.retain(|t| keys.contains(t));
            f.remove_tokens.len()
        }
        Action::SetWebhookFailurePolicy(w) => usize::from(keys.contains(&w.webhook)),
        Action::Wait { .. }
        | Action::Refuse { .. }
        | Action::DeleteApiService(_)
        | Action::SetCrdConversionNone(_) => 1,
    };
    (left > 0).then_some(out)
}

/// A plan confirmed too late: shown at `shown_at`, confirmed `age` later.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "the plan shown at {shown_at} is {} old (more than {} allowed between showing a plan and confirming it); run again",
    fmt_age(*age),
    fmt_age(MAX_PLAN_AGE)
)]
pub struct StalePlan {
    pub shown_at: Timestamp,
    pub age: Duration,
}

/// Refuses an answer given more than [`MAX_PLAN_AGE`] after the plan was
/// shown.
pub fn check_age(shown_at: Timestamp, answered_at: Timestamp) -> Result<(), StalePlan> {
    let age = Duration::try_from(answered_at.duration_since(shown_at)).unwrap_or_default();
    if age > MAX_PLAN_AGE {
        Err(StalePlan { shown_at, age })
    } else {
        Ok(())
    }
}

fn fmt_age(d: Duration) -> String {
    let s = d.as_secs();
    match (s / 60, s % 60) {
        (0, s) => format!("{s}s"),
        (m, 0) => format!("{m}m"),
        (m, s) => format!("{m}m{s}s"),
    }
}

/// What may be applied.
#[derive(Clone, Debug)]
pub enum Consent {
    /// A scenario run: the scenario is the consent, for everything within
    /// the run's scope ([`super::Scope::Run`]); with any other scope it
    /// covers nothing.
    Scope,
    /// What a person confirmed (or `--yes` covered: the plan printed
    /// before it), grown by later confirmations.
    Confirmed(Confirmed),
}

impl Default for Consent {
    /// Nothing confirmed: with `--apply`, every step that changes the
    /// cluster is left.
    fn default() -> Self {
        Consent::Confirmed(Confirmed::default())
    }
}

/// The steps confirmed and declined, by target; the keys of each; the
/// pods on a node and their ladders.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Confirmed {
    granted: BTreeMap<StepTarget, BTreeSet<String>>,
    declined: BTreeMap<StepTarget, BTreeSet<String>>,
    /// Terminating namespaces the confirmed plan's steps target: removing
    /// a shown finalizer key from what hangs in them later (or the
    /// namespace's own `/finalize`) is covered, as finishing what was
    /// confirmed. Changes to cluster-wide objects (webhooks, APIServices)
    /// never are.
    namespaces: BTreeSet<String>,
    /// The finalizer keys the person was shown: in the plan's steps and
    /// under "Expected in later rounds".
    shown_keys: BTreeSet<String>,
    /// The stuck pods on the cluster's node that were shown, each with
    /// its ladder: only these are healed, only with those rungs.
    pods: Vec<ShownPod>,
}

impl Confirmed {
    fn grant(&mut self, c: &Claim) {
        self.granted
            .entry(c.target.clone())
            .or_default()
            .extend(c.keys.iter().cloned());
    }

    fn decline(&mut self, c: &Claim) {
        self.declined
            .entry(c.target.clone())
            .or_default()
            .extend(c.keys.iter().cloned());
    }

    /// The keys of `c` that are covered and those that are not. A claim
    /// without keys is covered whole when its target was confirmed.
    fn split(&self, c: &Claim) -> (BTreeSet<String>, BTreeSet<String>, bool) {
        if self.under_confirmed_namespace(c) {
            if c.target.action == "FinalizeNamespace" {
                return (c.keys.clone(), BTreeSet::new(), true);
            }
            let covered: BTreeSet<String> =
                c.keys.intersection(&self.shown_keys).cloned().collect();
            let rest: BTreeSet<String> = c.keys.difference(&self.shown_keys).cloned().collect();
            let whole = rest.is_empty();
            if !covered.is_empty() {
                return (covered, rest, whole);
            }
        }
        let Some(granted) = self.granted.get(&c.target) else {
            return (BTreeSet::new(), c.keys.clone(), false);
        };
        let covered: BTreeSet<String> = c.keys.intersection(granted).cloned().collect();
        let rest: BTreeSet<String> = c.keys.difference(granted).cloned().collect();
        let whole = rest.is_empty();
        (covered, rest, whole)
    }

    /// A finalizer removal (or `/finalize`) on an object in, or on, a
    /// namespace the confirmed plan was about.
    fn under_confirmed_namespace(&self, c: &Claim) -> bool {
        let t = &c.target;
        match t.action {
            "RemoveFinalizers" | "FinalizeNamespace" => match &t.namespace {
                Some(ns) => self.namespaces.contains(ns),
                None => t.kind == "Namespace" && self.namespaces.contains(&t.name),
            },
            _ => false,
        }
    }

    fn was_declined(&self, c: &Claim) -> bool {
        self.declined
            .get(&c.target)
            .is_some_and(|d| c.keys.is_subset(d))
    }
}

impl Consent {
    /// Consent to the steps of `shown` that change the cluster, confirmed
    /// at `confirmed_at`; refused when that is more than [`MAX_PLAN_AGE`]
    /// after `shown_at`.
    pub fn confirmed<'a>(
        shown: impl IntoIterator<Item = &'a PlannedStep>,
        shown_at: Timestamp,
        confirmed_at: Timestamp,
    ) -> Result<Consent, StalePlan> {
        check_age(shown_at, confirmed_at)?;
        let mut c = Confirmed::default();
        for claim in shown.into_iter().filter_map(claim) {
            if claim.target.action == "RemoveFinalizers" {
                c.shown_keys.extend(claim.keys.iter().cloned());
            }
            c.grant(&claim);
        }
        Ok(Consent::Confirmed(c))
    }

    /// Extends a confirmation to what later hangs in these Terminating
    /// namespaces ([`Confirmed`]'s `namespaces`): the targets of the plan
    /// shown ([`super::settle::target_namespaces`]), for the finalizer keys
    /// that were shown (those of its steps, and `keys`: the ones listed
    /// under "Expected in later rounds").
    pub fn covering_namespaces(
        mut self,
        namespaces: impl IntoIterator<Item = String>,
        keys: impl IntoIterator<Item = String>,
    ) -> Self {
        if let Consent::Confirmed(c) = &mut self {
            c.namespaces.extend(namespaces);
            c.shown_keys.extend(keys);
        }
        self
    }

    /// Extends a confirmation to the stuck pods on the node that were
    /// shown ([`ShownPod::of`] a dry run's node reports), each with the
    /// rungs of its ladder.
    pub fn covering_pods(mut self, pods: impl IntoIterator<Item = ShownPod>) -> Self {
        if let Consent::Confirmed(c) = &mut self {
            c.pods.extend(pods);
        }
        self
    }

    /// Which stuck pods on the node an `apply` may heal: with a run's
    /// scope ([`super::Scope::Run`]) the scenario is the consent, for every
    /// pod and the whole ladder; with another scope it covers none; a
    /// person's confirmation covers the pods shown.
    pub fn on_node(&self, run_scope: bool) -> Consented<'_> {
        match self {
            Consent::Scope if run_scope => Consented::Every,
            Consent::Scope => Consented::Shown(&[]),
            Consent::Confirmed(c) => Consented::Shown(&c.pods),
        }
    }

    /// Sorts a round's plan into what is applied and what is left. Steps
    /// that change nothing pass through; a step consent covers in part is
    /// applied for the covered keys. What is not covered is put to `ask`
    /// once, all together; a confirmation extends consent, provided it
    /// came within [`MAX_PLAN_AGE`] of the question.
    pub fn gate(
        &mut self,
        steps: &[PlannedStep],
        run_scope: bool,
        ask: &mut dyn AskAgain,
    ) -> Gated {
        let confirmed = match self {
            Consent::Scope => return gate::by_scope(steps, run_scope),
            Consent::Confirmed(c) => c,
        };
        let sorted = gate::sort(confirmed, steps);
        let (answer, verdict) = gate::ask_once(&sorted, ask);
        Gated {
            decisions: gate::decide(confirmed, sorted, &verdict),
            asked: answer.is_some_and(|a| !matches!(a, Answer::NotAsked)),
        }
    }
}

/// One step of a round's plan, sorted by consent.
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    /// Changes nothing (a wait, a refusal): recorded as it is.
    Observe(PlannedStep),
    /// Covered by consent: applied, after arguing it again on a fresh read.
    Apply(PlannedStep),
    /// Not covered: not applied, and the report says why.
    Left {
        step: PlannedStep,
        claim: Claim,
        why: String,
    },
}

/// A round's plan sorted by consent, in plan order.
#[derive(Clone, Debug, PartialEq)]
pub struct Gated {
    pub decisions: Vec<Decision>,
    /// Whether a person was asked (and so time passed since the round's
    /// read: the plan is read and argued again before any write).
    pub asked: bool,
}

/// A person's answer about steps the confirmed plan did not hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// Confirmed: the question was shown at `shown_at`, answered at
    /// `answered_at`.
    Yes {
        shown_at: Timestamp,
        answered_at: Timestamp,
    },
    /// Declined.
    No,
    /// Nobody could be asked (`--yes`, no terminal).
    NotAsked,
}

/// Shows steps that were not confirmed and asks about them.
pub trait AskAgain: Send {
    fn ask(&mut self, steps: &[PlannedStep]) -> Answer;
}

/// Nobody to ask: what was not confirmed is left.
pub struct NobodyToAsk;

impl AskAgain for NobodyToAsk {
    fn ask(&mut self, _: &[PlannedStep]) -> Answer {
        Answer::NotAsked
    }
}

mod gate;
#[cfg(test)]
mod tests;
