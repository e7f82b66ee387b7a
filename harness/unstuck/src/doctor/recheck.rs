//! Applying a round: consent first ([`super::consent`]), then, right
//! before the writes, a fresh read of the cluster, diagnosed and planned
//! again. A step is written only if the fresh plan still holds it for the
//! same object (same UID; for keys, only those still judged removable),
//! and the write carries what that fresh read saw (UID, resourceVersion,
//! the finalizer list), so the server refuses it if anything moved since.
//! A write refused because the object moved is read and argued again, a
//! few times, rather than given up or forced.

use std::collections::BTreeSet;

use kube::Client;
use unstuck_core::doctor::{
    Action, Finding, FindingDetail, Plan, PlannedStep, backend::NOT_SERVING, plan_assuming,
};

use super::{
    DoctorError, DoctorOptions, Scope,
    apply::{self, AppliedStep, StepOutcome},
    collect_in,
    consent::{AskAgain, Consent, Decision, claim, restrict},
    findings_in,
};
use crate::text::quoted;

/// How often one step is read and argued again after the server refused
/// its write because the object changed in between.
const WRITE_ATTEMPTS: usize = 3;

/// What the fresh plan says about a step that was shown.
#[derive(Clone, Debug, PartialEq)]
pub enum Recheck {
    /// Still planned for the same object: write `step`, which carries the
    /// fresh read's resourceVersion and list and no key that was not shown.
    /// `dropped` says which shown keys are no longer planned, and why.
    Apply {
        step: Box<PlannedStep>,
        dropped: Option<String>,
    },
    /// Not planned any more: nothing is written, for this reason.
    Skip(String),
}

/// Argues `shown` again on a fresh diagnosis (`findings`) and plan.
pub fn recheck(shown: &PlannedStep, findings: &[Finding], fresh: &Plan) -> Recheck {
    let Some(c) = claim(shown) else {
        return Recheck::Skip("the step changes nothing".into());
    };
    let same = fresh
        .mutating_steps()
        .filter_map(|s| claim(s).map(|fc| (s, fc)))
        .find(|(_, fc)| fc.target == c.target);
    if let Some((step, fc)) = same {
        if c.keys.is_empty() {
            return Recheck::Apply {
                step: Box::new(step.clone()),
                dropped: None,
            };
        }
        let keep: BTreeSet<String> = c.keys.intersection(&fc.keys).cloned().collect();
        let dropped: Vec<String> = c.keys.difference(&fc.keys).cloned().collect();
        let why_dropped = |keys: &[String]| {
            format!(
                "[{}] no longer planned on re-check ({})",
                keys.join(", "),
                step.rationale
            )
        };
        return match restrict(step, &keep) {
            Some(step) => Recheck::Apply {
                step: Box::new(step),
                dropped: (!dropped.is_empty()).then(|| why_dropped(&dropped)),
            },
            None => Recheck::Skip(why_dropped(&dropped)),
        };
    }
    let t = &c.target;
    if let Some(other) = fresh.mutating_steps().filter_map(claim).find(|fc| {
        fc.target.action == t.action
            && fc.target.kind == t.kind
            && fc.target.namespace == t.namespace
            && fc.target.name == t.name
    }) {
        return Recheck::Skip(format!(
            "{} is another object now (uid {}, the plan was made for uid {}); not touched",
            c.path, other.target.uid, t.uid
        ));
    }
    let mut reasons: Vec<&str> = fresh
        .steps
        .iter()
        .filter(|s| !s.action.is_mutating())
        .filter(|s| {
            findings.get(s.finding_index).is_some_and(|f| {
                f.subject.kind == t.kind
                    && f.subject.namespace == t.namespace
                    && f.subject.name == t.name
                    && f.subject.uid.as_ref().is_none_or(|u| *u == t.uid)
            })
        })
        .map(|s| s.rationale.as_str())
        .collect();
    reasons.dedup();
    if reasons.is_empty() {
        Recheck::Skip(format!(
            "{} is no longer found stuck on re-check (gone, or released meanwhile); nothing to do",
            c.path
        ))
    } else {
        Recheck::Skip(format!(
            "no longer planned on re-check: {}",
            reasons.join("; ")
        ))
    }
}

/// The findings and plan of a read taken now.
struct Fresh {
    findings: Vec<Finding>,
    plan: Plan,
    /// The same read judged without the age a deletion must reach to count
    /// as stuck (`None`: the round's own plan, which holds its steps).
    unaged: Option<(Vec<Finding>, Plan)>,
}

impl Fresh {
    /// What `step` is argued again on. Removing finalizers is argued on the
    /// unaged judgement: whether the object is the same, still holds the
    /// keys and their owners are still dead, not whether its deletion is
    /// still old enough. That was settled when the plan was shown, and a
    /// pod's deletionTimestamp moves to "now" when its kubelet makes the
    /// final delete, which would make it young again. Other steps keep
    /// their age rules (an APIService unavailable only since just now may
    /// be coming back).
    fn view_for(&self, step: &PlannedStep) -> (&[Finding], &Plan) {
        match (&step.action, &self.unaged) {
            (Action::RemoveFinalizers(_), Some((findings, plan))) => (findings, plan),
            _ => (&self.findings, &self.plan),
        }
    }
}

async fn read_again(client: &Client, opts: &DoctorOptions) -> Result<Fresh, DoctorError> {
    let (mut snapshot, _) = collect_in(client, &opts.scope.collect_scope()).await?;
    super::node_metrics::add_controller_manager_metrics(&mut snapshot, opts).await;
    let findings = findings_in(&snapshot, opts);
    let fresh_plan = plan_assuming(&findings, &snapshot, &opts.diagnose.assume_dead);
    let mut unaged_opts = opts.clone();
    unaged_opts.diagnose.stuck_after = std::time::Duration::ZERO;
    let unaged_findings = findings_in(&snapshot, &unaged_opts);
    let unaged_plan = plan_assuming(&unaged_findings, &snapshot, &opts.diagnose.assume_dead);
    Ok(Fresh {
        findings,
        plan: fresh_plan,
        unaged: Some((unaged_findings, unaged_plan)),
    })
}

/// Applies one round's plan (`round_plan`, made from `round_findings`).
/// `just_read` says the round's own read was taken just now (not a plan
/// shown earlier): then, unless a person was asked in between, it is the
/// fresh read the writes are argued on.
pub(super) async fn apply_round(
    client: &Client,
    opts: &DoctorOptions,
    round_findings: &[Finding],
    round_plan: &Plan,
    just_read: bool,
    consent: &mut Consent,
    ask: &mut dyn AskAgain,
) -> Result<Vec<AppliedStep>, DoctorError> {
    let run_scope = matches!(opts.scope, Scope::Run { .. });
    let gated = consent.gate(&round_plan.steps, run_scope, ask);
    let mut fresh = (just_read && !gated.asked).then(|| Fresh {
        findings: round_findings.to_vec(),
        plan: round_plan.clone(),
        unaged: None,
    });
    let mut out = Vec::new();
    // Webhooks made to fail open this round: what they rejected may go now.
    let mut opened: BTreeSet<String> = BTreeSet::new();
    for d in gated.decisions {
        if let Decision::Apply(step) = &d
            && let Some(gate) = gate_for(step, round_plan, round_findings, opts, &opened)
        {
            out.extend(write_through_gate(client, opts, step, &gate, &mut fresh).await?);
            continue;
        }
        if let Decision::Apply(step) = &d
            && let Some(why) = blocked(step, round_plan, opts, &opened)
        {
            let target = claim(step).map(|c| c.path).unwrap_or_else(|| "-".into());
            out.push(AppliedStep {
                action: step.action.name().to_owned(),
                target,
                outcome: StepOutcome::Left(why),
                calls: Vec::new(),
                backup: None,
            });
            continue;
        }
        match d {
            Decision::Observe(step) => {
                out.push(apply::apply_step(client, &step, &opts.backup_dir).await)
            }
            Decision::Left { step, claim, why } => out.push(AppliedStep {
                action: step.action.name().to_owned(),
                target: claim.path.clone(),
                outcome: StepOutcome::Left(format!("{}: {why}", claim.what())),
                calls: Vec::new(),
                backup: None,
            }),
            Decision::Apply(step)
                if (step.action.needs_webhook_consent() && !opts.allow_webhook_changes)
                    || matches!(&step.action, Action::SetCrdConversionNone(c)
                        if !opts.allow_crd_conversion_changes.contains(&c.crd)) =>
            {
                out.push(apply::not_consented(&step))
            }
            Decision::Apply(step) => {
                let written = write_rechecked(client, opts, &step, &mut fresh).await?;
                if let Action::SetWebhookFailurePolicy(w) = &step.action
                    && written
                        .iter()
                        .any(|a| matches!(a.outcome, StepOutcome::Done(_)))
                {
                    opened.insert(w.webhook.clone());
                    // The apiserver's admission reads webhook configurations
                    // from its informer: give it a moment, and argue the
                    // writes it unblocks on a read taken after it.
                    fresh = None;
                    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                }
                out.extend(written);
            }
        }
    }
    Ok(out)
}

/// The one webhook entry to open for `step` alone: with
/// `--allow-webhook-changes`, when the only webhook that rejects it has a
/// backend that is installed but not serving (never one that is slow or
/// answers wrongly: it would check the write if it could).
struct Gate {
    kind: unstuck_core::doctor::WebhookConfigKind,
    configuration: String,
    webhook: String,
    reason: String,
}

fn gate_for(
    step: &PlannedStep,
    plan: &Plan,
    findings: &[Finding],
    opts: &DoctorOptions,
    opened: &BTreeSet<String>,
) -> Option<Gate> {
    if !opts.allow_webhook_changes {
        return None;
    }
    let mut blockers = plan
        .blockers_of(step.finding_index)
        .filter(|b| !opened.contains(&b.webhook));
    let b = blockers.next()?;
    if blockers.next().is_some() || b.failing.as_deref() != Some(NOT_SERVING) {
        return None;
    }
    let FindingDetail::WebhookBackendFailing {
        configuration,
        configuration_name,
        webhook,
        ..
    } = &findings.get(b.webhook_finding)?.detail
    else {
        return None;
    };
    (webhook == &b.webhook).then(|| Gate {
        kind: *configuration,
        configuration: configuration_name.clone(),
        webhook: webhook.clone(),
        reason: format!(
            "{} of finding #{}, rejected while its backend ({}) does not serve",
            step.action.name(),
            step.finding_index + 1,
            b.service
        ),
    })
}

/// Opens the gate, writes `step` (argued again on a read taken after the
/// opening), and closes the gate whatever the write did. An interrupt
/// (Ctrl-C) while the gate is open abandons the write and still closes it.
async fn write_through_gate(
    client: &Client,
    opts: &DoctorOptions,
    step: &PlannedStep,
    gate: &Gate,
    fresh: &mut Option<Fresh>,
) -> Result<Vec<AppliedStep>, DoctorError> {
    let (opening, open) = apply::gate::open(
        client,
        gate.kind,
        &gate.configuration,
        &gate.webhook,
        &gate.reason,
        &opts.backup_dir,
    )
    .await;
    let mut out = vec![opening];
    let Some(open) = open else {
        return Ok(out);
    };
    // The apiserver's admission reads webhook configurations from its
    // informer: give it a moment before the write.
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    *fresh = None;
    let written = tokio::select! {
        w = write_rechecked(client, opts, step, fresh) => Some(w),
        _ = tokio::signal::ctrl_c() => None,
    };
    // Closed before anything else happens, whatever the write did; the
    // report lists it after the write it was opened for.
    let closed = open.close(client).await;
    match written {
        Some(Ok(w)) => out.extend(w),
        Some(Err(e)) => {
            tracing::warn!(
                "the write through the webhook gate failed to run ({e}); the gate: {}",
                closed.outcome
            );
            return Err(e);
        }
        None => out.push(skipped(
            step,
            "not written: interrupted while the webhook was open for it (the webhook was set back to Fail first)".into(),
        )),
    }
    out.push(closed);
    Ok(out)
}

/// Why `step` is not written this round: a webhook that fails closed
/// rejects it: one with its backend gone that was not made to fail open
/// first (not allowed, or its own step did not go through), or one whose
/// backend is there but failing (never failed open). Writing it anyway
/// would only collect the admission error, or wait out the timeout.
fn blocked(
    step: &PlannedStep,
    plan: &Plan,
    opts: &DoctorOptions,
    opened: &BTreeSet<String>,
) -> Option<String> {
    let b = plan
        .blockers_of(step.finding_index)
        .find(|b| !opened.contains(&b.webhook))?;
    let webhook = &b.webhook;
    let number = b.webhook_finding + 1;
    let service = &b.service;
    if b.failing.as_deref() == Some(NOT_SERVING) {
        return Some(if opts.allow_webhook_changes {
            format!(
                "not written: webhook {webhook} (finding #{number}) fails it while its backend ({service}) does not serve, and another webhook rejects it too; repair the backend, then run again",
                webhook = quoted(webhook)
            )
        } else {
            format!(
                "not written: webhook {webhook} (finding #{number}) fails it while its backend ({service}) does not serve; run again with --allow-webhook-changes to open that webhook for this write only (it is set back to Fail right after), or repair the backend",
                webhook = quoted(webhook)
            )
        });
    }
    if let Some(verdict) = &b.failing {
        // Never failed open: its backend is there, so the write waits for
        // its repair (writing now would only wait out its timeout).
        return Some(format!(
            "not written: webhook {webhook} (finding #{number}) fails it while its backend ({service}) is {verdict}; repair the backend, then run again",
            webhook = quoted(webhook)
        ));
    }
    Some(if opts.allow_webhook_changes {
        format!(
            "not written: webhook {webhook} (finding #{number}) rejects it and was not made to fail open this round (see its step); restore Service {service} or run again",
            webhook = quoted(webhook)
        )
    } else {
        format!(
            "not written: webhook {webhook} (finding #{number}) rejects it while it fails closed with Service {service} gone; run again with --allow-webhook-changes to make it fail open first, or restore the Service",
            webhook = quoted(webhook)
        )
    })
}

/// Writes `shown` as the fresh plan still has it, reading again when
/// there is no fresh read or the server refused a write because the object
/// changed after it.
async fn write_rechecked(
    client: &Client,
    opts: &DoctorOptions,
    shown: &PlannedStep,
    fresh: &mut Option<Fresh>,
) -> Result<Vec<AppliedStep>, DoctorError> {
    let mut out = Vec::new();
    for attempt in 1..=WRITE_ATTEMPTS {
        if fresh.is_none() {
            *fresh = Some(read_again(client, opts).await?);
        }
        let (findings, fresh_plan) = fresh.as_ref().expect("read just now").view_for(shown);
        let (step, dropped) = match recheck(shown, findings, fresh_plan) {
            Recheck::Apply { step, dropped } => (step, dropped),
            Recheck::Skip(why) => {
                out.push(skipped(shown, format!("not written: {why}")));
                return Ok(out);
            }
        };
        let mut applied = apply::apply_step(client, &step, &opts.backup_dir).await;
        if attempt < WRITE_ATTEMPTS
            && let StepOutcome::Moved(why) = &applied.outcome
        {
            // Keep the refused attempt as evidence, then read again.
            applied.outcome = StepOutcome::Skipped(format!("{why}; read again and argued again"));
            out.push(applied);
            *fresh = None;
            continue;
        }
        if let Some(d) = dropped {
            out.push(skipped(shown, d));
        }
        out.push(applied);
        return Ok(out);
    }
    Ok(out)
}

fn skipped(step: &PlannedStep, why: String) -> AppliedStep {
    AppliedStep {
        action: step.action.name().to_owned(),
        target: claim(step).map(|c| c.path).unwrap_or_else(|| "-".into()),
        outcome: StepOutcome::Skipped(why),
        calls: Vec::new(),
        backup: None,
    }
}

#[cfg(test)]
mod tests;
