//! The doctor step of a scenario: let the stuck state age and settle,
//! run the doctor on the run's objects (its API half, then its node half
//! on pods stuck on a node the run can reach), and check what it found.

use std::time::{Duration, Instant};

use unstuck_core::doctor::{BlockerGraph, FindingKind, node::NodeFinding};
use unstuck_core::scenario::DoctorCheck;

use super::{Evidence, MAX_SETTLE, STUCK_AFTER, ScenarioRun, StepError, StepGraph};

/// How many times the doctor step looks for deletions still too young
/// before it lets the doctor look (each look after a wait).
const SETTLE_LOOKS: usize = 4;

/// How long the doctor step waits, between looks, for a kubelet's final
/// DELETE of a pod whose grace period is over.
const FINAL_DELETE_POLL: Duration = Duration::from_secs(1);
use crate::doctor::{
    self, DoctorOptions, DoctorReport, Scope,
    node::{HealOutcome, NodeHalf},
};

impl ScenarioRun<'_> {
    pub(super) async fn doctor(&mut self, d: &DoctorCheck) -> Result<Evidence, StepError> {
        self.let_stuck_state_age().await;
        let opts = self.doctor_options(d);
        let (first, looks) = self.settled_snapshot(d, &opts).await;
        self.doctor_started = Some(Instant::now());
        let report = doctor::run_from(&self.ctx.client, &opts, first).await?;
        self.record_api_doctor(&report);
        let mut evidence = report.summary_lines();
        let found: Vec<String> = report
            .initial_findings()
            .iter()
            .map(|f| f.kind().as_str().to_owned())
            .collect();
        // What the doctor says besides its findings: what is normal so far,
        // and its first plan (a refusal names the flag that would act).
        let mut also: Vec<String> = report.normal_so_far.iter().map(|n| n.line()).collect();
        if let Some(first) = report.rounds.first() {
            also.extend(first.plan.render_dry_run().lines().map(str::to_owned));
        }
        let unsaid = self.unsaid(d, report.initial_findings(), &also);
        if !unsaid.is_empty() {
            return Err(StepError::NotSaid {
                missing: unsaid,
                said: report
                    .initial_findings()
                    .iter()
                    .map(|f| format!("{}: {}", f.kind().as_str(), f.summary))
                    .collect(),
            });
        }
        let failed = report.failures();
        let mut on_nodes = Vec::new();
        let (node_found, node_failed) =
            self.record_node_doctor(&report.node, d.apply, &mut evidence, &mut on_nodes);
        if let Some(first) = report.rounds.first() {
            let on_nodes: Vec<&NodeFinding> = on_nodes.iter().collect();
            self.report.graphs.push(StepGraph {
                // Steps are recorded once done: this one is the next.
                step: self.report.steps.len() + 1,
                graph: BlockerGraph::build_with_nodes(
                    &first.findings,
                    &first.plan,
                    &first.snapshot,
                    &on_nodes,
                ),
            });
        }
        self.report.doctor = Some(report);
        let found: Vec<String> = found.into_iter().chain(node_found).collect();
        let failed: Vec<String> = failed.into_iter().chain(node_failed).collect();
        check_outcome(d, &found, failed, looks, evidence)
    }

    /// The words of `expectSaying` (renamed for this run) that no finding's
    /// summary or evidence holds, nor any of `also` (the "normal so far"
    /// lines and the plan's).
    fn unsaid(
        &self,
        d: &DoctorCheck,
        findings: &[unstuck_core::doctor::Finding],
        also: &[String],
    ) -> Vec<String> {
        d.expect_saying
            .iter()
            .map(|w| self.names.text(w))
            .filter(|w| {
                !findings.iter().any(|f| {
                    f.summary.contains(w.as_str())
                        || f.evidence.iter().any(|e| e.contains(w.as_str()))
                }) && !also.iter().any(|l| l.contains(w.as_str()))
            })
            .collect()
    }

    /// The doctor calls an object stuck only once it has been deleting for
    /// STUCK_AFTER; let the injected state age that long first, as a person
    /// meets a cluster that has been stuck for a while.
    async fn let_stuck_state_age(&mut self) {
        if let Some(t) = self.last_injection {
            tokio::time::sleep(STUCK_AFTER.saturating_sub(t.elapsed())).await;
        }
        // Objects deleted by controllers after the gate (the garbage
        // collector deleting dependents, the namespace controller deleting
        // content) age from their own deletion: take the latest one in the
        // scenario's namespaces into account too, within a bound. A
        // deletion can also begin or move while this waits: the namespace
        // controller reaching content late on a loaded cluster, or the
        // kubelet's final DELETE of a pod whose grace period has run out,
        // which moves its deletionTimestamp to that moment (the apiserver
        // never lets a shortened grace put it in the past: k8s.io/apiserver
        // v0.34.4 pkg/registry/rest/delete.go). So look again after each
        // wait, until a look finds nothing younger than STUCK_AFTER and no
        // pod whose grace period is over but whose final DELETE is still
        // to come (it would move), within SETTLE_LOOKS looks: a pod a node
        // fault keeps never gets that DELETE, and is not waited for longer.
        let bound = k8s_openapi::jiff::Timestamp::now() + MAX_SETTLE;
        for _ in 0..SETTLE_LOOKS {
            let mut final_delete_due = false;
            if let Ok((snapshot, _)) = doctor::collect(&self.ctx.client).await {
                let ours = self.names.namespaces().real_names();
                let now = k8s_openapi::jiff::Timestamp::now();
                let terminating: Vec<_> = snapshot
                    .terminating
                    .iter()
                    .filter(|r| r.namespace().is_some_and(|n| ours.iter().any(|o| o == n)))
                    .collect();
                final_delete_due = terminating.iter().any(|r| {
                    r.kind == "Pod"
                        && r.metadata.deletion_grace_period_seconds.unwrap_or(0) > 0
                        && r.deletion_timestamp().is_some_and(|t| t <= now)
                });
                let latest = terminating
                    .iter()
                    // A deletionTimestamp with a grace period (a pod's) is
                    // when that period ends, not when the deletion was asked
                    // for: age from the request, or a pod draining for
                    // minutes would be waited out before the doctor looks.
                    .filter_map(|r| {
                        let grace = r.metadata.deletion_grace_period_seconds.unwrap_or(0);
                        r.deletion_timestamp()
                            .map(|t| t - k8s_openapi::jiff::SignedDuration::from_secs(grace))
                    })
                    .max();
                self.deleting_since = self.deleting_since.max(latest.map(|t| t.min(bound)));
            }
            let Some(since) = self.deleting_since else {
                return;
            };
            // deletionTimestamp has whole seconds; a small margin keeps the
            // doctor's "more than STUCK_AFTER" strictly true.
            let due = since + STUCK_AFTER + Duration::from_millis(250);
            match Duration::try_from(due.duration_since(k8s_openapi::jiff::Timestamp::now())) {
                Ok(left) if !left.is_zero() => tokio::time::sleep(left).await,
                _ if final_delete_due => tokio::time::sleep(FINAL_DELETE_POLL).await,
                // Old enough at this look: the doctor may look now.
                _ => return,
            }
        }
    }

    /// The doctor's options for step `d`, scoped to the run's own
    /// namespaces and objects (on the node too: the pods in its
    /// namespaces), with the run's node when it has one.
    fn doctor_options(&self, d: &DoctorCheck) -> DoctorOptions {
        DoctorOptions {
            diagnose: unstuck_core::doctor::DiagnoseOptions {
                stuck_after: STUCK_AFTER,
                assume_dead: d.assume_dead.iter().map(|k| self.names.text(k)).collect(),
                // The harness's bound is its stuck-after: a scenario waits
                // seconds, not the minutes a person would.
                apiservice_outage_after: STUCK_AFTER,
                allow_apiservice_removal: d
                    .allow_api_service_removal
                    .iter()
                    .map(|n| self.names.text(n))
                    .collect(),
            },
            scope: Scope::Run {
                namespaces: self.names.namespaces().real_names(),
                created_uids: self.created.iter().map(|c| c.uid.clone()).collect(),
            },
            apply: d.apply,
            allow_webhook_changes: d.allow_webhook_changes,
            allow_crd_conversion_changes: d
                .allow_conversion_changes
                .iter()
                .map(|n| self.names.text(n))
                .collect(),
            backup_dir: self.ctx.out_dir.join("backups"),
            // The scenario is the consent: it set the stuck state up on the
            // run's own objects, and later rounds (a chain the garbage
            // collector deletes after the first remedy) belong to it too.
            consent: doctor::Consent::Scope,
            node: self.ctx.node.clone(),
            ..DoctorOptions::dry_run(self.ctx.out_dir.join("backups"))
        }
    }

    /// Puts the API doctor's report into the scenario's: its timing,
    /// evidence files, findings and remedies.
    fn record_api_doctor(&mut self, report: &DoctorReport) {
        if let Some(first) = report.rounds.first()
            && self.report.time_to_detect_ms.is_none()
        {
            self.report.time_to_detect_ms = Some(first.collect.duration.as_millis());
        }
        self.report.write_evidence("doctor.json", report);
        // What the doctor saw before any remedy: evidence, and a recording
        // the diagnosis unit tests replay. Redacted: on a `--kubeconfig`
        // cluster it holds that cluster's pods and workloads.
        // A scenario's later doctor calls keep their own (`snapshot-2.json`,
        // ...): the first one's is what the stuck state looked like.
        if let Some(first) = report.rounds.first() {
            let redacted = unstuck_core::doctor::redact::redact(&first.snapshot);
            let call = self.report.graphs.len() + 1;
            let name = match call {
                1 => "snapshot.json".to_string(),
                n => format!("snapshot-{n}.json"),
            };
            self.report.write_evidence(&name, &redacted);
        }
        // A scenario may call the doctor more than once (a refusal, then
        // the operator's --assume-dead): the report keeps every call's.
        for f in report.initial_findings() {
            self.report
                .findings
                .push(format!("{}: {}", f.kind().as_str(), f.summary));
            self.report.found.push(crate::report::ReportedFinding {
                kind: crate::report::FoundKind::Api(f.kind()),
                subject: f.subject.clone(),
                summary: f.summary.clone(),
            });
        }
        self.report.remedies.extend(report.done());
    }

    /// A snapshot in which the stuck state has settled: the first one,
    /// within [`MAX_SETTLE`], whose diagnosis holds every API-level kind
    /// the step expects (node-level kinds come from the node doctor).
    /// The wait above cannot be exact, because the cluster keeps moving
    /// while the doctor looks: a kubelet's final delete, seconds after
    /// the grace period, moves a pod's deletionTimestamp to that moment,
    /// so the pod is "terminating" afresh. The doctor then diagnoses this
    /// very snapshot, so what was judged is what is reported. When it never
    /// settles, the last snapshot is used and the step fails on what it
    /// lacks.
    async fn settled_snapshot(
        &self,
        d: &DoctorCheck,
        opts: &DoctorOptions,
    ) -> (
        Option<(unstuck_core::doctor::Snapshot, doctor::CollectStats)>,
        usize,
    ) {
        // The API doctor's kinds only: a node cause (`BusyVolume`, ...)
        // comes from the node doctor after this snapshot, and a name that
        // is neither was refused when the scenario was loaded.
        let expected: Vec<FindingKind> = d
            .expect_findings
            .iter()
            .filter_map(|k| k.parse().ok())
            .collect();
        let deadline = Instant::now() + MAX_SETTLE;
        let (mut last, mut looks) = (None, 0);
        loop {
            looks += 1;
            if let Ok((snapshot, stats)) = doctor::collect(&self.ctx.client).await {
                let found = doctor::findings_in(&snapshot, opts);
                let mut also: Vec<String> = unstuck_core::doctor::normal::normal_so_far(
                    &snapshot,
                    opts.diagnose.stuck_after,
                    &found,
                )
                .iter()
                .map(|n| n.line())
                .collect();
                also.extend(
                    unstuck_core::doctor::plan(&found, &snapshot)
                        .render_dry_run()
                        .lines()
                        .map(str::to_owned),
                );
                let settled = expected
                    .iter()
                    .all(|k| found.iter().any(|f| f.kind() == *k))
                    && self.unsaid(d, &found, &also).is_empty();
                last = Some((snapshot, stats));
                if settled {
                    return (last, looks);
                }
            }
            if Instant::now() >= deadline {
                return (last, looks);
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// Puts the node half's results into the scenario's: the pods on the
    /// node stuck past their deletion in the scenario's namespaces, healed
    /// one rung at a time without force. Returns the causes found (as
    /// finding kinds) and what went wrong.
    fn record_node_doctor(
        &mut self,
        half: &NodeHalf,
        apply: bool,
        evidence: &mut Vec<String>,
        on_nodes: &mut Vec<NodeFinding>,
    ) -> (Vec<String>, Vec<String>) {
        let (mut found, mut failed) = (Vec::new(), Vec::new());
        for pod in &half.pods {
            let report = match &pod.healed {
                Ok(r) => r,
                Err(e) => {
                    failed.push(format!(
                        "node doctor on {}/{}: {e}",
                        pod.namespace, pod.name
                    ));
                    continue;
                }
            };
            // Detection of a node case includes reading the node (kubelet
            // log, mounts, runtime), which follows the API scan.
            self.report.time_to_detect_ms =
                Some(self.report.time_to_detect_ms.unwrap_or(0) + report.timings.diagnosed_ms);
            if let Some(f) = &report.initial {
                for cause in &f.causes {
                    found.push(cause.name().to_string());
                    self.report.findings.push(format!("{cause}: {}", f.summary));
                    self.report.found.push(crate::report::ReportedFinding {
                        kind: crate::report::FoundKind::Node(*cause),
                        subject: unstuck_core::doctor::ObjectRef {
                            api_version: "v1".into(),
                            kind: "Pod".into(),
                            namespace: Some(pod.namespace.clone()),
                            name: pod.name.clone(),
                            uid: Some(pod.uid.clone()),
                        },
                        summary: f.summary.clone(),
                    });
                }
                evidence.extend(f.evidence.iter().cloned());
                on_nodes.push(f.clone());
            }
            for step in &report.steps {
                let line = format!("{}: {}", step.step.remedy.name(), step.actions.join("; "));
                if step.ok {
                    self.report.remedies.push(line.clone());
                }
                evidence.push(line);
            }
            evidence.extend(report.proof.iter().cloned());
            self.report
                .write_evidence(&format!("node-doctor-{}.json", pod.name), report);
            // A pod that went (or stopped being stuck) between the listing
            // and the heal — the API doctor's remedy freed it — is no failure
            // of the node doctor: the recovered gate proves it gone.
            let moot = matches!(
                report.outcome,
                HealOutcome::PodNotFound | HealOutcome::NotStuck
            );
            if apply && !moot && !report.recovered_without_force() {
                failed.push(format!(
                    "node doctor on {}: {}{}; left on the node: [{}]",
                    report.pod,
                    report.outcome,
                    if report.force_used {
                        " (force delete used)"
                    } else {
                        ""
                    },
                    report.leftovers.join(", ")
                ));
            }
        }
        if let Some(e) = &half.unlisted {
            failed.push(format!("listing stuck pods: {e}"));
        }
        (found, failed)
    }
}

/// The step passes when the doctors found every kind it expects, none it
/// forbids, and no remedy failed; a missing kind is reported first.
fn check_outcome(
    d: &DoctorCheck,
    found: &[String],
    failed: Vec<String>,
    looks: usize,
    mut evidence: Evidence,
) -> Result<Evidence, StepError> {
    let missing: Vec<&str> = d
        .expect_findings
        .iter()
        .map(|k| k.as_str())
        .filter(|k| !found.iter().any(|f| f == k))
        .collect();
    if !missing.is_empty() {
        return Err(StepError::NotFound {
            missing: missing.iter().map(|k| k.to_string()).collect(),
            found: found.to_vec(),
        });
    }
    let forbidden: Vec<String> = d
        .forbid_findings
        .iter()
        .map(|k| k.as_str().to_owned())
        .filter(|k| found.iter().any(|f| f == k))
        .collect();
    if !forbidden.is_empty() {
        return Err(StepError::Forbidden {
            forbidden,
            found: found.to_vec(),
        });
    }
    if !failed.is_empty() {
        return Err(StepError::RemediesFailed(failed));
    }
    evidence.insert(0, format!("found {}", crate::text::list(found)));
    if looks > 1 {
        evidence.insert(
            1,
            format!("the doctor diagnosed the snapshot of look {looks}: the cluster was still moving before it"),
        );
    }
    Ok(evidence)
}
