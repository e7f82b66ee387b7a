//! The steps of [`Consent::gate`](super::Consent::gate): consent by a
//! run's scope; otherwise each step sorted into its covered part and the
//! part to ask about, one question for all of them, then the decisions in
//! plan order.

use unstuck_core::doctor::PlannedStep;

use super::{
    Answer, AskAgain, Claim, Confirmed, Decision, Gated, NOT_CONFIRMED, StalePlan, check_age,
    claim, restrict,
};

/// Why the steps asked about are left: the answer did not confirm them.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(super) enum NotConfirmed {
    #[error(transparent)]
    Stale(#[from] StalePlan),
    #[error("declined when asked")]
    Declined,
    #[error("{NOT_CONFIRMED}")]
    NotAsked,
}

/// Consent by scope: a scenario run's own objects, and nothing else.
pub(super) fn by_scope(steps: &[PlannedStep], run_scope: bool) -> Gated {
    if run_scope {
        Gated {
            decisions: steps
                .iter()
                .map(|s| match claim(s) {
                    Some(_) => Decision::Apply(s.clone()),
                    None => Decision::Observe(s.clone()),
                })
                .collect(),
            asked: false,
        }
    } else {
        Gated {
            decisions: steps
                .iter()
                .map(|s| match claim(s) {
                    Some(c) => Decision::Left {
                        step: s.clone(),
                        claim: c,
                        why: "consent by scope covers a scenario run's own objects only".into(),
                    },
                    None => Decision::Observe(s.clone()),
                })
                .collect(),
            asked: false,
        }
    }
}

/// One step: the covered part, and the part to ask about (or leave).
pub(super) struct Sorted {
    step: PlannedStep,
    covered: Option<PlannedStep>,
    rest: Option<(PlannedStep, Claim)>,
    declined_before: bool,
}

/// Sorts each step by what consent covers, in plan order.
pub(super) fn sort(confirmed: &Confirmed, steps: &[PlannedStep]) -> Vec<Sorted> {
    let mut sorted = Vec::new();
    for s in steps {
        let Some(c) = claim(s) else {
            sorted.push(Sorted {
                step: s.clone(),
                covered: None,
                rest: None,
                declined_before: false,
            });
            continue;
        };
        let (covered, rest, whole) = confirmed.split(&c);
        let (covered, rest) = if whole {
            (Some(s.clone()), None)
        } else if c.keys.is_empty() {
            (None, Some((s.clone(), c)))
        } else {
            let rest_step = restrict(s, &rest).map(|r| {
                let rc = claim(&r).expect("a restricted mutating step keeps its claim");
                (r, rc)
            });
            (restrict(s, &covered), rest_step)
        };
        let declined_before = rest
            .as_ref()
            .is_some_and(|(_, rc)| confirmed.was_declined(rc));
        sorted.push(Sorted {
            step: s.clone(),
            covered,
            rest,
            declined_before,
        });
    }
    sorted
}

/// Asks once, all together, about what is not covered and was not
/// declined before; the answer, and whether it confirms.
pub(super) fn ask_once(
    sorted: &[Sorted],
    ask: &mut dyn AskAgain,
) -> (Option<Answer>, Result<(), NotConfirmed>) {
    let new: Vec<PlannedStep> = sorted
        .iter()
        .filter(|s| !s.declined_before)
        .filter_map(|s| s.rest.as_ref().map(|(r, _)| r.clone()))
        .collect();
    let answer = if new.is_empty() {
        None
    } else {
        Some(ask.ask(&new))
    };
    let verdict = match &answer {
        None => Ok(()),
        Some(Answer::Yes {
            shown_at,
            answered_at,
        }) => check_age(*shown_at, *answered_at).map_err(NotConfirmed::from),
        Some(Answer::No) => Err(NotConfirmed::Declined),
        Some(Answer::NotAsked) => Err(NotConfirmed::NotAsked),
    };
    (answer, verdict)
}

/// The decisions in plan order; a confirmation extends consent, a refusal
/// is remembered.
pub(super) fn decide(
    confirmed: &mut Confirmed,
    sorted: Vec<Sorted>,
    verdict: &Result<(), NotConfirmed>,
) -> Vec<Decision> {
    let mut decisions = Vec::new();
    for s in sorted {
        if s.covered.is_none() && s.rest.is_none() {
            decisions.push(Decision::Observe(s.step));
            continue;
        }
        match (s.covered, s.rest) {
            (covered, Some((rest, rc))) if s.declined_before => {
                decisions.extend(covered.map(Decision::Apply));
                decisions.push(Decision::Left {
                    step: rest,
                    claim: rc,
                    why: "declined when asked earlier in this run".into(),
                });
            }
            (covered, Some((rest, rc))) => match verdict {
                Ok(()) => {
                    confirmed.grant(&rc);
                    // One write per object: the covered keys and the
                    // newly confirmed ones together.
                    decisions.push(Decision::Apply(s.step));
                }
                Err(why) => {
                    if *why == NotConfirmed::Declined {
                        confirmed.decline(&rc);
                    }
                    decisions.extend(covered.map(Decision::Apply));
                    decisions.push(Decision::Left {
                        step: rest,
                        claim: rc,
                        why: why.to_string(),
                    });
                }
            },
            (Some(covered), None) => decisions.push(Decision::Apply(covered)),
            (None, None) => unreachable!("handled above"),
        }
    }
    decisions
}
