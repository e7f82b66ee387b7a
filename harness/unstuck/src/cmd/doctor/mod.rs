//! `unstuck doctor` (and `kubectl unstuck doctor`): the command line over
//! [`unstuck::doctor`]. Says which cluster it is on before anything else,
//! asks before it changes anything, and ends with an exit code a CI gate
//! can read.
//!
//! - [`ask`]: consent: the question on a terminal, what `--yes` prints.
//! - [`named`]: the cluster `--local-cluster`/`--kind-cluster` names: its
//!   kubeconfig and its node (given to the doctor, whose node half looks
//!   at and heals the pods stuck on it).

mod ask;
mod named;

use std::{path::PathBuf, process::ExitCode};

use anyhow::Result;
use k8s_openapi::jiff::Timestamp;
use unstuck::core::doctor::Plan;
use unstuck::doctor::{
    self, DoctorOptions, DoctorReport, Scope,
    consent::Consent,
    node::{HealOutcome, ShownPod},
    render::{Format, View},
    target::{self, Target},
};

use ask::{AskOnTerminal, ask_to_apply};
use named::named_kubeconfig;

/// Exit codes, documented in `--help` and the README.
pub mod exit {
    /// Nothing found (or, with --apply, everything applied).
    pub const CLEAN: u8 = 0;
    /// The doctor could not run (no cluster, discovery failed, ...).
    pub const ERROR: u8 = 1;
    /// The command line is wrong.
    pub const USAGE: u8 = 2;
    /// `--fail-on-findings` and something was found.
    pub const FINDINGS: u8 = 3;
    /// With --apply: a remedy failed.
    pub const REMEDY_FAILED: u8 = 4;
    /// With --apply: the confirmation was declined or could not be asked,
    /// or came more than `super::MAX_PLAN_AGE` after the plan was shown.
    pub const DECLINED: u8 = 5;
    /// With --apply: steps were left, the rest applied: a later round found
    /// steps the confirmed plan did not hold (not confirmed), or a dead
    /// webhook rejects a step and changing it was not allowed.
    pub const LEFT: u8 = 6;
    /// With --apply: every step went through or was refused, and a stuck
    /// target is still there (the report says what holds each).
    pub const STILL_STUCK: u8 = 7;
}

pub const EXIT_CODES_HELP: &str = "Exit codes:
  0  nothing found, or every remedy applied
  1  error: the doctor could not run (no cluster, discovery failed, a -n
     namespace that does not exist)
  2  usage: the command line is wrong
  3  findings (only with --fail-on-findings)
  4  a remedy failed (with --apply)
  5  declined: --apply was not confirmed (no terminal to ask and no --yes),
     or the confirmation came more than 5 minutes after the plan was shown
  6  left: with --apply, steps were left: a later round found steps that
     were not in the confirmed plan (run the doctor again to review them),
     or a dead webhook rejects a step and --allow-webhook-changes was not
     given
  7  still stuck: with --apply, a stuck target is still there at the end,
     whatever holds it (refused, waiting on a live owner, or nothing to
     apply; the report says what, per target)";

#[derive(clap::Args)]
#[command(after_help = EXIT_CODES_HELP)]
pub struct DoctorArgs {
    /// Cluster to examine (default: $KUBECONFIG or ~/.kube/config).
    #[arg(long, conflicts_with_all = ["local_cluster", "kind_cluster"])]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use instead of its current one (as
    /// `kubectl --context`).
    #[arg(long, conflicts_with_all = ["local_cluster", "kind_cluster"])]
    pub context: Option<String>,
    /// Limit to these namespaces (repeatable); default the whole cluster.
    /// A cluster-scoped blocker (APIService, webhook) is then acted on only
    /// when a Terminating namespace among these names it.
    #[arg(long = "namespace", short = 'n')]
    pub namespaces: Vec<String>,
    /// Carry out the plan. Without it nothing is changed. On a terminal it
    /// shows the target and the plan and asks first (see --yes); an answer
    /// given more than 5 minutes after the plan was shown is refused. Only
    /// the steps shown are applied, each argued again on a fresh read just
    /// before its write; a step a later round finds that the plan did not
    /// hold is shown and asked about again.
    #[arg(long)]
    pub apply: bool,
    /// With --apply: do not ask. Needed when no terminal can be asked
    /// (CI). Covers the plan printed before it, and removing the finalizer
    /// keys it shows (in its steps and under "Expected in later rounds")
    /// from what later hangs in the Terminating namespaces its steps
    /// target; other steps a later round finds are left (exit 6).
    #[arg(long, short = 'y', requires = "apply")]
    pub yes: bool,
    /// With --apply, also change admission webhooks: a webhook that fails
    /// closed while its backend is gone is set to fail open
    /// (failurePolicy Ignore; its manifest is saved first). Without it
    /// that step is shown and skipped.
    #[arg(long, requires = "apply")]
    pub allow_webhook_changes: bool,
    /// With --apply, also switch this CRD (exact name, e.g.
    /// meshconfigs.config.openservicemesh.io; repeatable), whose conversion
    /// webhook's Service is gone, to conversion strategy None, when it
    /// blocks something and no schema difference is found. What the
    /// webhook did cannot be checked: name a CRD only once you know. Its
    /// manifest is saved first. Without it that step is shown and skipped.
    #[arg(
        long = "allow-crd-conversion-changes",
        value_name = "CRD",
        requires = "apply",
        num_args = 1
    )]
    pub allow_crd_conversion_changes: Vec<String>,
    /// Treat this finalizer key's owner as dead when the evidence leaves it
    /// Unknown (repeatable; exact key). Never overrides a live owner.
    #[arg(long = "assume-dead", value_name = "KEY")]
    pub assume_dead: Vec<String>,
    /// How long a deletion must hang to count as stuck, e.g. 30s, 5m.
    #[arg(long, default_value = "60s")]
    pub stuck_after: String,
    /// How long an APIService whose backend is installed but not serving
    /// (pods crash-looping, Pending, not pulled) must have been
    /// unavailable, by the API server's clock, before the doctor offers to
    /// remove its registration (see --allow-apiservice-removal).
    #[arg(long, default_value = "5m", value_name = "DURATION")]
    pub apiservice_outage_after: String,
    /// With --apply, remove this APIService's registration (exact name,
    /// e.g. v1beta1.custom.metrics.k8s.io; repeatable) when its backend is
    /// installed but has not served for --apiservice-outage-after and it
    /// blocks a Terminating namespace. Its manifest is saved first and the
    /// command that restores it printed. A backend proven gone needs no
    /// flag.
    #[arg(long = "allow-apiservice-removal", value_name = "NAME")]
    pub allow_apiservice_removal: Vec<String>,
    /// Where manifests are saved before any change (a new directory is
    /// made 0700, each file 0600).
    #[arg(long, default_value = "unstuck-backups")]
    pub backup_dir: PathBuf,
    /// Report format: terminal, json or markdown (the same facts, in the
    /// same order).
    #[arg(long, short = 'o', value_enum, default_value_t = Format::Terminal)]
    pub output: Format,
    /// Same as --output json.
    #[arg(long, hide = true, conflicts_with = "output")]
    pub json: bool,
    /// Exit 3 when anything is found (after --apply: when anything is
    /// still found), for CI gates.
    #[arg(long)]
    pub fail_on_findings: bool,
    /// Examine this local cluster (`unstuck cluster list`): its own
    /// kubeconfig is used for the API too, and its node is examined for
    /// pods stuck on a busy volume or a wedged runtime, healed (with
    /// --apply) without force.
    #[arg(long, conflicts_with = "kind_cluster")]
    pub local_cluster: Option<String>,
    /// Examine this kind cluster that unstuck made (`unstuck cluster
    /// list`): as --local-cluster, with its node reached through
    /// `docker exec` into the node container.
    #[arg(long)]
    pub kind_cluster: Option<String>,
    /// Save what the doctor saw (the first snapshot) to this new JSON
    /// file: evidence, and a fixture for the diagnosis tests. Redacted
    /// (env values, args, commands, last-applied and long annotations are
    /// removed), mode 0600, never written over an existing file.
    #[arg(long)]
    pub save_snapshot: Option<PathBuf>,
}

pub async fn run(args: DoctorArgs) -> Result<ExitCode> {
    // Settling after --apply waits up to minutes: say so while it does.
    unstuck::waiting::enable();
    let stuck_after: unstuck::core::duration::Duration = match args.stuck_after.parse() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: --stuck-after: {e}");
            return Ok(ExitCode::from(exit::USAGE));
        }
    };
    let outage_after: unstuck::core::duration::Duration = match args.apiservice_outage_after.parse()
    {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: --apiservice-outage-after: {e}");
            return Ok(ExitCode::from(exit::USAGE));
        }
    };
    // Before any work: a snapshot is never written over a file.
    if let Some(Err(e)) = args
        .save_snapshot
        .as_deref()
        .map(super::save_snapshot::refuse_existing)
    {
        eprintln!("error: {e}");
        return Ok(ExitCode::from(exit::USAGE));
    }
    let format = if args.json { Format::Json } else { args.output };
    let kubeconfig = match named_kubeconfig(&args)? {
        Some(k) => Some(k),
        None => args.kubeconfig.clone(),
    };
    let (client, target) = target::connect(kubeconfig.as_deref(), args.context.as_deref()).await?;
    if let Some(missing) = missing_namespaces(&client, &args.namespaces).await? {
        eprintln!(
            "error: no namespace {missing} on {}: it is already gone, or the name is wrong (`kubectl get namespaces` lists them). Nothing was looked at.",
            target.line()
        );
        return Ok(ExitCode::from(exit::ERROR));
    }

    let mut opts = options(&args, stuck_after.as_std());
    opts.node = named::named_node(&args).await?;
    opts.diagnose.apiservice_outage_after = outage_after.as_std();
    // Always look first, without changing anything (on the node too): the
    // plan is what a confirmation is asked for.
    let looked = doctor::run(&client, &opts).await?;
    if let (Some(path), Some(round)) = (&args.save_snapshot, looked.rounds.first()) {
        // `-n`: only what the diagnosis of those namespaces reads.
        let saved = if args.namespaces.is_empty() {
            round.snapshot.clone()
        } else {
            unstuck::core::doctor::scoped::scoped(&round.snapshot, &args.namespaces)
        };
        super::save_snapshot::write(path, &saved)?;
    }
    // A node the doctor could not look at fails the command.
    if let Some(e) = looked.node.error() {
        return Err(anyhow::Error::new(e.clone()));
    }

    let would_change = looked
        .rounds
        .first()
        .is_some_and(|r| r.plan.mutating_steps().next().is_some())
        || looked.node.reports().any(|n| !n.plan.is_empty());
    if !args.apply || !would_change {
        return Ok(show_look(&args, format, target, looked));
    }

    let shown: Plan = looked
        .rounds
        .first()
        .map(|r| r.plan.clone())
        .unwrap_or_default();
    let shown_at = Timestamp::now();
    if let Some(declined) = ask_to_apply(&args, &target, &looked, &shown) {
        return Ok(declined);
    }

    // Consent is the plan shown, given in time. Each step is argued again
    // on a fresh read just before its write, which tests what that read
    // saw (UID, resourceVersion, finalizers): a change in between makes
    // the server refuse it rather than have it acted on blind. On the
    // node, the pods shown are healed with only the rungs shown.
    let (target_namespaces, expected_keys) = looked
        .rounds
        .first()
        .map(|r| {
            (
                doctor::settle::target_namespaces(&r.findings, &r.plan, &r.snapshot),
                doctor::settle::expected_keys(&r.plan),
            )
        })
        .unwrap_or_default();
    opts.consent = match Consent::confirmed(&shown.steps, shown_at, Timestamp::now()) {
        Ok(c) => c
            .covering_namespaces(target_namespaces, expected_keys)
            .covering_pods(looked.node.reports().filter_map(ShownPod::of)),
        Err(stale) => {
            eprintln!("refusing to apply: {stale}. Nothing was changed.");
            return Ok(ExitCode::from(exit::DECLINED));
        }
    };
    opts.apply = true;
    let first = looked
        .rounds
        .into_iter()
        .next()
        .map(|r| (r.snapshot, r.collect));
    let report = if args.yes {
        doctor::run_from(&client, &opts, first).await?
    } else {
        let mut ask = AskOnTerminal {
            target: target.clone(),
        };
        doctor::run_asking(&client, &opts, first, &mut ask).await?
    };
    if let Some(e) = report.node.error() {
        return Err(anyhow::Error::new(e.clone()));
    }
    let view = View::new(target, &report);
    print!("{}", view.render(format));
    Ok(ExitCode::from(exit_after_apply(
        &report,
        args.fail_on_findings,
    )))
}

/// The `-n` namespaces that do not exist, quoted and joined, if any: a
/// doctor scoped to a typo would find nothing and exit 0.
async fn missing_namespaces(client: &kube::Client, names: &[String]) -> Result<Option<String>> {
    let api: kube::Api<k8s_openapi::api::core::v1::Namespace> = kube::Api::all(client.clone());
    let mut missing = Vec::new();
    for name in names {
        match api.get_opt(name).await {
            Ok(None) => missing.push(format!("'{name}'")),
            Ok(Some(_)) => {}
            // Rights scoped to a namespace often leave out a GET of the
            // Namespace object itself: then the scoped run goes on, and
            // the collector's own blind spots say what it could not read.
            Err(kube::Error::Api(s)) if s.code == 403 => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok((!missing.is_empty()).then(|| missing.join(", ")))
}

/// The doctor's options from the command line, for the first look: a dry
/// run (consent and --apply come after the plan was shown).
fn options(args: &DoctorArgs, stuck_after: std::time::Duration) -> DoctorOptions {
    let mut opts = DoctorOptions::dry_run(args.backup_dir.clone());
    opts.allow_webhook_changes = args.allow_webhook_changes;
    opts.allow_crd_conversion_changes = args.allow_crd_conversion_changes.clone();
    opts.progress = true;
    opts.diagnose.assume_dead = args.assume_dead.clone();
    opts.diagnose.allow_apiservice_removal = args.allow_apiservice_removal.clone();
    opts.diagnose.stuck_after = stuck_after;
    if !args.namespaces.is_empty() {
        opts.scope = Scope::Namespaces(args.namespaces.clone());
    }
    opts
}

/// Prints what the look found when nothing is to be applied (no --apply,
/// or a plan that changes nothing) and the exit code for it.
///
/// With --apply, a stuck target that is still there is exit 7 whatever
/// holds it (its owner is alive, every step was refused, nothing applies):
/// a CI gate reading 0 would take the cluster for fixed.
fn show_look(
    args: &DoctorArgs,
    format: Format,
    target: Target,
    mut looked: DoctorReport,
) -> ExitCode {
    if args.apply {
        looked.outcomes = doctor::outcome::outcomes(&looked.rounds);
    }
    let still_stuck = looked
        .outcomes
        .iter()
        .filter(|t| t.state != doctor::settle::TargetState::Gone)
        .count()
        + looked.node.reports().count();
    let mut view = View::new(target, &looked);
    if args.apply && !view.findings.is_empty() {
        view.outcome = "nothing to apply: no step of the plan changes the cluster".into();
    }
    if args.apply && still_stuck > 0 {
        view.outcome = format!(
            "nothing to apply: no step of the plan changes the cluster; {still_stuck} stuck target(s) still there (exit {})",
            exit::STILL_STUCK
        );
    }
    print!("{}", view.render(format));
    let found = !looked.initial_findings().is_empty() || looked.node.reports().next().is_some();
    ExitCode::from(if args.apply && still_stuck > 0 {
        exit::STILL_STUCK
    } else if args.fail_on_findings && found {
        exit::FINDINGS
    } else {
        exit::CLEAN
    })
}

fn exit_after_apply(report: &DoctorReport, fail_on_findings: bool) -> u8 {
    let failed = report
        .rounds
        .iter()
        .flat_map(|r| &r.applied)
        .any(|a| a.outcome.is_failure())
        || report.node.reports().any(|n| {
            !n.outcome.is_left()
                && !matches!(
                    n.outcome,
                    HealOutcome::Recovered | HealOutcome::NotStuck | HealOutcome::PodNotFound
                )
        });
    let still_found = report.rounds.last().is_some_and(|r| !r.findings.is_empty());
    if failed {
        exit::REMEDY_FAILED
    } else if !report.left().is_empty() || report.node.reports().any(|n| n.outcome.is_left()) {
        exit::LEFT
    } else if report
        .outcomes
        .iter()
        .any(|t| t.state != doctor::settle::TargetState::Gone)
    {
        exit::STILL_STUCK
    } else if fail_on_findings && still_found {
        exit::FINDINGS
    } else {
        exit::CLEAN
    }
}
