//! Consent for `unstuck doctor --apply`: the plan shown on a terminal and
//! the yes asked for, or what `--yes` prints before it covers it.

use std::{
    io::{BufRead as _, IsTerminal as _, Write as _},
    process::ExitCode,
};

use k8s_openapi::jiff::Timestamp;
use unstuck::core::doctor::{Plan, PlannedStep};
use unstuck::doctor::{
    DoctorReport,
    consent::{Answer, AskAgain, MAX_PLAN_AGE},
    node::NodeDoctorReport,
    render::{Format, View},
    target::Target,
};

use super::{DoctorArgs, exit};

/// Gets consent for the `shown` plan: --yes, or a yes on the terminal.
/// Returns the exit code when it is not given.
pub(super) fn ask_to_apply(
    args: &DoctorArgs,
    target: &Target,
    looked: &DoctorReport,
    shown: &Plan,
) -> Option<ExitCode> {
    if args.yes {
        // What --yes covers is what was printed before it.
        eprintln!(
            "Applying to {} (--yes covers this plan, and removing the finalizer keys it shows (in its steps and under \"Expected in later rounds\") from what later hangs in the Terminating namespaces its steps target; other steps a later round finds are left; on a node, only the pods and rungs listed):\n{}{}",
            target.line(),
            plan_steps_text(shown),
            node_plan_text(looked.node.reports())
        );
        return None;
    }
    match confirm(target, looked) {
        Confirmation::Yes => None,
        Confirmation::No => {
            eprintln!("declined: nothing was changed");
            Some(ExitCode::from(exit::DECLINED))
        }
        Confirmation::NoTerminal => {
            eprintln!(
                "refusing to --apply without confirmation: no terminal to ask on ({}).\n  \
                 Nothing was changed. Re-run with --yes to apply without asking.",
                target.line()
            );
            Some(ExitCode::from(exit::DECLINED))
        }
    }
}

enum Confirmation {
    Yes,
    No,
    NoTerminal,
}

/// Shows the target and the plan on the terminal and asks.
fn confirm(target: &Target, report: &DoctorReport) -> Confirmation {
    if !std::io::stdin().is_terminal() {
        return Confirmation::NoTerminal;
    }
    let view = View::new(target.clone(), report);
    let mut err = std::io::stderr();
    let _ = write!(
        err,
        "{}\nApply this plan to {}? Type 'yes' to go on: ",
        view.render(Format::Terminal),
        target.line()
    );
    let _ = err.flush();
    let mut answer = String::new();
    if std::io::stdin().lock().read_line(&mut answer).is_err() {
        return Confirmation::No;
    }
    if answer.trim() == "yes" {
        Confirmation::Yes
    } else {
        Confirmation::No
    }
}

/// A plan's steps with their exact API calls, without the dry-run
/// heading (which would say nothing is changed).
fn plan_steps_text(plan: &Plan) -> String {
    let rendered = plan.render_dry_run();
    rendered.lines().skip(1).collect::<Vec<_>>().join("\n")
}

/// Asks on the terminal about steps a later round found that the plan
/// confirmed did not hold.
pub(super) struct AskOnTerminal {
    pub(super) target: Target,
}

impl AskAgain for AskOnTerminal {
    fn ask(&mut self, steps: &[PlannedStep]) -> Answer {
        if !std::io::stdin().is_terminal() {
            return Answer::NotAsked;
        }
        let plan = Plan {
            steps: steps.to_vec(),
            ..Default::default()
        };
        let shown_at = Timestamp::now();
        let mut err = std::io::stderr();
        let _ = write!(
            err,
            "\nA later round found step(s) that were not in the plan you confirmed:\n{}\nApply these too, to {}? Type 'yes' within {} min to go on (anything else leaves them): ",
            plan_steps_text(&plan),
            self.target.line(),
            MAX_PLAN_AGE.as_secs() / 60
        );
        let _ = err.flush();
        let mut answer = String::new();
        if std::io::stdin().lock().read_line(&mut answer).is_err() || answer.trim() != "yes" {
            return Answer::No;
        }
        Answer::Yes {
            shown_at,
            answered_at: Timestamp::now(),
        }
    }
}

/// The node ladders of a dry run, as `--yes` covers them.
fn node_plan_text<'a>(nodes: impl Iterator<Item = &'a NodeDoctorReport>) -> String {
    let mut out = String::new();
    for n in nodes.filter(|n| !n.plan.is_empty()) {
        out.push_str(&format!("\non node {}, pod {}:", n.node, n.pod));
        for s in &n.plan {
            out.push_str(&format!(
                "\n  {}{}: {}",
                if s.force {
                    "[FORCE, only with permission] "
                } else {
                    ""
                },
                s.remedy.name(),
                s.why
            ));
        }
    }
    out
}
