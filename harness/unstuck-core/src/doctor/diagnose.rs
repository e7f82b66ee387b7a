//! From a [`Snapshot`] to [`Finding`]s: pure, deterministic, no I/O.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::SignedDuration;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;

use super::apiservice::Backend;
use super::conditions::{
    NS_CONTENT_FAILURE, NS_CONTENT_REMAINING, NS_DISCOVERY_FAILURE, NS_FINALIZERS_REMAINING,
    NS_GV_PARSING_FAILURE, api_service_available, api_service_name, failing_namespace_condition,
    namespace_condition, parse_content_remaining, parse_discovery_failure,
    parse_finalizers_remaining, quote_api_service_condition, quote_namespace_condition,
};
use super::finding::{
    FinalizerRemoval, Finding, FindingDetail, FindingKind, ObjectRef, PodStuckHint,
};
use super::owner::{
    FinalizerVerdict, OwnerCache, OwnerQuery, OwnerVerdict, controller_manager_alive, fmt_secs,
    protection_in_use,
};
use super::snapshot::{ObjectRecord, Snapshot, container_statuses, display_name};
use super::webhook::{ServiceKey, WebhookView, failed_webhooks, webhooks};

/// The namespace controller retries a failing namespace at most every 60 s
/// (rate limiter cap, detection-notes 1.2). A `kubernetes` spec token that
/// outlives the content by more than the threshold plus this is not going
/// to be removed by the controller.
const NAMESPACE_RETRY_CAP: SignedDuration = SignedDuration::from_secs(60);

/// The garbage collector's finalizer of an owner in foreground deletion.
const FOREGROUND: &str = "foregroundDeletion";

/// At most this many per-object evidence lines in a namespace finding.
const MAX_LISTED: usize = 20;

/// Knobs for [`diagnose`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiagnoseOptions {
    /// An object is stuck when `taken_at - deletionTimestamp` exceeds this
    /// (for pods the deletionTimestamp already includes the grace period).
    /// Also how long an APIService must have been unavailable before it is
    /// called dead. Default 10 s: the harness wants fast detection; a CLI
    /// pointed at a real cluster may pass minutes.
    pub stuck_after: Duration,
    /// Finalizer keys the operator declared dead (`--assume-dead`): their
    /// owner's `Unknown` counts as `Dead`, never `Alive`.
    pub assume_dead: Vec<String>,
}

impl Default for DiagnoseOptions {
    fn default() -> Self {
        DiagnoseOptions {
            stuck_after: Duration::from_secs(10),
            assume_dead: Vec::new(),
        }
    }
}

/// Diagnoses a snapshot. Pure and deterministic: findings are sorted by
/// kind (the [`FindingKind`] declaration order), then by subject
/// (namespace, name, apiVersion, kind, uid), whatever the order of the
/// snapshot's lists.
///
/// Correlations: a namespace blocked by discovery names the APIServices
/// that serve the failing group/versions, and a dead APIService names the
/// namespaces it blocks; custom resources with orphan finalizers in a
/// Terminating namespace yield an `OrphanFinalizer` each and a
/// `NamespaceBlockedByContent` for the namespace that lists them.
pub fn diagnose(snapshot: &Snapshot, opts: &DiagnoseOptions) -> Vec<Finding> {
    let d = Diagnosis {
        snapshot,
        threshold: SignedDuration::try_from(opts.stuck_after).unwrap_or(SignedDuration::MAX),
        assume_dead: &opts.assume_dead,
        owners: OwnerCache::new(snapshot),
    };
    let mut findings = Vec::new();

    let blocked_namespaces = d.discovery_blocked_namespaces();
    let dead_api_services = d.dead_api_services(&blocked_namespaces, &mut findings);
    let content_failures = d.content_failure_namespaces();
    let dead_webhooks = d.dead_webhooks(&content_failures, &mut findings);
    findings.extend(super::conversion::dead_conversion_webhooks(snapshot));
    for ns in d.stuck_namespaces() {
        d.namespace(ns, &dead_api_services, &mut findings);
        d.namespace_content_failure(ns, &dead_webhooks, &mut findings);
    }
    for record in d.stuck_objects() {
        d.object(record, &mut findings);
    }
    for pod in &snapshot.pods {
        d.pod(pod, &mut findings);
        findings.extend(super::starting::pod_not_starting(
            snapshot,
            d.threshold,
            pod,
        ));
    }

    super::blind::downgrade_unproven(snapshot, &mut findings);
    // Last, so that it sees every other finding: it speaks only when they
    // leave a namespace unexplained.
    let stalled =
        super::namespace_stall::namespaces_not_progressing(snapshot, d.threshold, &findings);
    findings.extend(stalled);

    // Last but the sort: the writes that would release what is stuck are
    // only known once every finding is.
    super::rejected::link(&mut findings, snapshot);
    findings.sort_by(|a, b| sort_key(a).cmp(&sort_key(b)));
    findings
}

type SortKey<'a> = (
    FindingKind,
    Option<&'a str>,
    &'a str,
    &'a str,
    &'a str,
    Option<&'a str>,
);

fn sort_key(f: &Finding) -> SortKey<'_> {
    (
        f.kind,
        f.subject.namespace.as_deref(),
        &f.subject.name,
        &f.subject.api_version,
        &f.subject.kind,
        f.subject.uid.as_deref(),
    )
}

struct Diagnosis<'a> {
    snapshot: &'a Snapshot,
    threshold: SignedDuration,
    assume_dead: &'a [String],
    owners: OwnerCache<'a>,
}

/// A Terminating namespace whose content-deletion-failure condition names
/// webhooks.
struct ContentFailure<'a> {
    namespace: &'a str,
    webhooks: Vec<String>,
}

/// A Terminating namespace whose discovery-failure condition is set.
struct DiscoveryBlocked<'a> {
    namespace: &'a str,
    group_versions: Vec<String>,
}

impl<'a> Diagnosis<'a> {
    fn is_stuck(&self, meta: &ObjectMeta) -> Option<SignedDuration> {
        let ts = meta.deletion_timestamp.as_ref()?.0;
        let age = self.snapshot.age_of(ts);
        (age > self.threshold).then_some(age)
    }

    fn deletion_line(&self, meta: &ObjectMeta) -> Option<String> {
        let ts = meta.deletion_timestamp.as_ref()?.0;
        Some(format!(
            "deletionTimestamp {ts} ({} before the snapshot)",
            fmt_secs(self.snapshot.age_of(ts).as_secs())
        ))
    }

    /// Terminating namespaces past the threshold, by name.
    fn stuck_namespaces(&self) -> Vec<&'a Namespace> {
        let mut out: Vec<&Namespace> = self
            .snapshot
            .namespaces
            .iter()
            .filter(|ns| self.is_stuck(&ns.metadata).is_some())
            .collect();
        out.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        out
    }

    fn discovery_blocked_namespaces(&self) -> Vec<DiscoveryBlocked<'a>> {
        self.snapshot
            .namespaces
            .iter()
            .filter(|ns| ns.metadata.deletion_timestamp.is_some())
            .filter_map(|ns| {
                let c = failing_namespace_condition(ns, NS_DISCOVERY_FAILURE)?;
                Some(DiscoveryBlocked {
                    namespace: ns.metadata.name.as_deref()?,
                    group_versions: parse_discovery_failure(c.message.as_deref().unwrap_or("")),
                })
            })
            .collect()
    }

    fn content_failure_namespaces(&self) -> Vec<ContentFailure<'a>> {
        self.snapshot
            .namespaces
            .iter()
            .filter(|ns| ns.metadata.deletion_timestamp.is_some())
            .filter_map(|ns| {
                let c = failing_namespace_condition(ns, NS_CONTENT_FAILURE)?;
                Some(ContentFailure {
                    namespace: ns.metadata.name.as_deref()?,
                    webhooks: failed_webhooks(c.message.as_deref().unwrap_or("")),
                })
            })
            .collect()
    }

    /// DeadWebhook findings; returns the names of the dead webhooks. Dead
    /// only on proof: `failurePolicy: Fail`, a Service backend, and the
    /// collector's lookup found no such Service or no ready endpoint.
    fn dead_webhooks(
        &self,
        failures: &[ContentFailure<'_>],
        findings: &mut Vec<Finding>,
    ) -> BTreeSet<String> {
        let mut dead = BTreeSet::new();
        for w in webhooks(self.snapshot) {
            let Some((service, backend, backend_lines)) = self.dead_backend(&w) else {
                continue;
            };
            let kind = w.config_kind.kind();
            let mut evidence = vec![format!(
                "{kind} {} webhook {:?} (failurePolicy {}) calls Service {service}",
                w.config_name, w.name, w.failure_policy
            )];
            evidence.extend(backend_lines);
            evidence.push(format!("it matches: {}", w.rules_line()));
            let mut blocks: Vec<String> = failures
                .iter()
                .filter(|f| f.webhooks.iter().any(|n| n == w.name))
                .map(|f| f.namespace.to_owned())
                .collect();
            blocks.sort();
            for ns in &blocks {
                evidence.push(format!(
                    "blocks deletion of namespace {ns}: its {NS_CONTENT_FAILURE} condition quotes failed calling webhook {:?}",
                    w.name
                ));
            }
            if blocks.is_empty() {
                evidence.push(format!(
                    "no Terminating namespace names it yet, but every operation it matches is rejected while its backend is gone{}",
                    if w.matches_operation("UPDATE") {
                        " (finalizer-removal patches included)"
                    } else {
                        ""
                    }
                ));
            }
            dead.insert(w.name.to_owned());
            findings.push(Finding {
                kind: FindingKind::DeadWebhook,
                subject: ObjectRef {
                    api_version: "admissionregistration.k8s.io/v1".into(),
                    kind: kind.into(),
                    namespace: None,
                    name: w.config_name.to_owned(),
                    uid: w.config_uid.map(str::to_owned),
                },
                summary: format!(
                    "webhook {:?} in {kind} {} fails closed and its backend is gone ({backend}){}",
                    w.name,
                    w.config_name,
                    if blocks.is_empty() {
                        String::new()
                    } else {
                        format!("; it blocks deletion of namespace(s) {}", blocks.join(", "))
                    }
                ),
                evidence,
                detail: FindingDetail::Webhook {
                    configuration: w.config_kind,
                    configuration_name: w.config_name.to_owned(),
                    index: w.index,
                    webhook: w.name.to_owned(),
                    failure_policy: w.failure_policy.to_owned(),
                    service,
                    backend: backend.to_owned(),
                    rules: w.rules_line(),
                    blocks_namespaces: blocks,
                    rejects: Vec::new(),
                },
            });
        }
        dead
    }

    /// A namespace whose content deletes fail: quote the controller's
    /// error and name the dead webhooks it blames.
    fn namespace_content_failure(
        &self,
        ns: &Namespace,
        dead_webhooks: &BTreeSet<String>,
        findings: &mut Vec<Finding>,
    ) {
        let (Some(name), Some(cond)) = (
            ns.metadata.name.as_deref(),
            failing_namespace_condition(ns, NS_CONTENT_FAILURE),
        ) else {
            return;
        };
        let age = self.is_stuck(&ns.metadata).unwrap_or_default();
        let message = cond.message.clone().unwrap_or_default();
        let named = failed_webhooks(&message);
        let (conversions, conversion_lines) =
            super::conversion::explain_message(self.snapshot, &message);
        let mut evidence: Vec<String> = self.deletion_line(&ns.metadata).into_iter().collect();
        evidence.push(quote_namespace_condition(cond));
        evidence.extend(conversion_lines);
        for w in &named {
            if dead_webhooks.contains(w) {
                evidence.push(format!(
                    "webhook {w:?} rejects the controller's deletes and its backend is gone"
                ));
            } else {
                evidence.push(format!(
                    "webhook {w:?} rejects the controller's deletes; its backend was not proven gone, so it is not changed"
                ));
                evidence.extend(self.backend_not_proven(w));
            }
        }
        // The controller reports no remaining content after a failed
        // delete: that "All content successfully removed" is not proof.
        if let Some(c) = namespace_condition(ns, NS_CONTENT_REMAINING)
            && c.status != "True"
        {
            evidence.push(format!(
                "{NS_CONTENT_REMAINING}={} does not mean the namespace is empty: the controller did not get to count what it failed to delete",
                c.status
            ));
        }
        findings.push(Finding {
            kind: FindingKind::NamespaceContentDeletionFailed,
            subject: ObjectRef {
                api_version: "v1".into(),
                kind: "Namespace".into(),
                namespace: None,
                name: name.to_owned(),
                uid: ns.metadata.uid.clone(),
            },
            summary: format!(
                "namespace {name} has been terminating for {} and the namespace controller's deletes fail{}{}",
                fmt_secs(age.as_secs()),
                if named.is_empty() {
                    String::new()
                } else {
                    format!(": webhook(s) {} reject them", named.join(", "))
                },
                if conversions.is_empty() {
                    String::new()
                } else {
                    format!(
                        ": the conversion webhook of CRD(s) {} fails",
                        conversions.join(", ")
                    )
                }
            ),
            evidence,
            detail: FindingDetail::NamespaceContentFailure {
                message,
                webhooks: named,
            },
        });
    }

    /// DeadApiService findings; returns the names of the dead APIServices.
    fn dead_api_services(
        &self,
        blocked: &[DiscoveryBlocked<'_>],
        findings: &mut Vec<Finding>,
    ) -> BTreeSet<String> {
        let mut dead = BTreeSet::new();
        for api in &self.snapshot.api_services {
            let Some(name) = api.metadata.name.as_deref() else {
                continue;
            };
            // Local APIServices (no spec.service) are served by the
            // apiserver itself: never dead.
            let Some(service) = api.spec.as_ref().and_then(|s| s.service.as_ref()) else {
                continue;
            };
            let Some(available) = api_service_available(api) else {
                continue;
            };
            if available.status == "True" {
                continue;
            }
            // Unavailable only briefly (a backend starting up) is not dead.
            if let Some(t) = &available.last_transition_time
                && self.snapshot.age_of(t.0) <= self.threshold
            {
                continue;
            }
            let reason = available.reason.clone().unwrap_or_default();
            let message = available.message.clone().unwrap_or_default();
            let service_ns = service.namespace.as_deref().unwrap_or_default();
            let service_name = service.name.as_deref().unwrap_or_default();
            let gv = api_service_group_version(api, name);

            let mut evidence = vec![
                quote_api_service_condition(name, available),
                format!("spec.service {service_ns}/{service_name} serves {gv}"),
            ];
            match &available.last_transition_time {
                Some(t) => evidence.push(format!(
                    "unavailable since {} ({} before the snapshot)",
                    t.0,
                    fmt_secs(self.snapshot.age_of(t.0).as_secs())
                )),
                None => evidence.push("the Available condition has no lastTransitionTime".into()),
            }
            if let Some(ns) = self.snapshot.namespace(service_ns)
                && ns.metadata.deletion_timestamp.is_some()
            {
                evidence.push(format!(
                    "the backing service's namespace {service_ns} is itself Terminating: it cannot finish while this APIService fails discovery (self-deadlock)"
                ));
            }
            for f in self
                .snapshot
                .discovery_failures
                .iter()
                .filter(|f| f.group_version == gv)
            {
                evidence.push(format!(
                    "the collector's discovery of {gv} failed too: {}",
                    f.message
                ));
            }
            let mut blocks: Vec<String> = blocked
                .iter()
                .filter(|b| b.group_versions.contains(&gv))
                .map(|b| b.namespace.to_owned())
                .collect();
            blocks.sort();
            for ns in &blocks {
                evidence.push(format!(
                    "blocks deletion of namespace {ns}: its {NS_DISCOVERY_FAILURE} condition names {gv}"
                ));
            }
            if blocks.is_empty() {
                evidence.push(
                    "no Terminating namespace names it yet, but every namespace deletion and the garbage collector need complete discovery".into(),
                );
            }

            let kind = match super::apiservice::backend(
                api,
                available,
                &self.snapshot.api_service_backends,
            ) {
                Backend::Serving(_) => continue,
                Backend::Gone(why) => {
                    evidence.extend(why);
                    dead.insert(name.to_owned());
                    FindingKind::DeadApiService
                }
                Backend::Unproven(why) => {
                    evidence.extend(why);
                    FindingKind::ApiServiceUnavailable
                }
            };
            findings.push(Finding {
                kind,
                subject: ObjectRef {
                    api_version: "apiregistration.k8s.io/v1".into(),
                    kind: "APIService".into(),
                    namespace: None,
                    name: name.to_owned(),
                    uid: api.metadata.uid.clone(),
                },
                summary: format!(
                    "APIService {name} is unavailable ({reason}): {message}{}",
                    if blocks.is_empty() {
                        String::new()
                    } else {
                        format!("; it blocks deletion of namespace(s) {}", blocks.join(", "))
                    }
                ),
                evidence,
                detail: FindingDetail::ApiService {
                    reason,
                    message,
                    status: available.status.clone(),
                    service: format!("{service_ns}/{service_name}"),
                    group_version: gv,
                    resource_version: api.metadata.resource_version.clone(),
                    blocks_namespaces: blocks,
                },
            });
        }
        dead
    }

    fn namespace(&self, ns: &Namespace, dead_api: &BTreeSet<String>, findings: &mut Vec<Finding>) {
        let Some(name) = ns.metadata.name.as_deref() else {
            return;
        };
        let age = self.is_stuck(&ns.metadata).unwrap_or_default();
        let subject = ObjectRef {
            api_version: "v1".into(),
            kind: "Namespace".into(),
            namespace: None,
            name: name.to_owned(),
            uid: ns.metadata.uid.clone(),
        };
        let base_evidence: Vec<String> = self.deletion_line(&ns.metadata).into_iter().collect();
        let discovery_cond = failing_namespace_condition(ns, NS_DISCOVERY_FAILURE);

        // Blocked by discovery.
        if let Some(cond) = discovery_cond {
            let mut gvs = parse_discovery_failure(cond.message.as_deref().unwrap_or(""));
            let mut evidence = base_evidence.clone();
            evidence.push(quote_namespace_condition(cond));
            if gvs.is_empty() && !self.snapshot.discovery_failures.is_empty() {
                gvs = self
                    .snapshot
                    .discovery_failures
                    .iter()
                    .map(|f| f.group_version.clone())
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .collect();
                evidence.push(format!(
                    "the condition names no group/version; the collector's discovery failed for {}",
                    gvs.join(", ")
                ));
            }
            let api_services: Vec<String> = gvs.iter().map(|gv| api_service_name(gv)).collect();
            let mut dead = Vec::new();
            for api in &api_services {
                match self.snapshot.api_service(api) {
                    Some(a) => {
                        match api_service_available(a) {
                            Some(c) => evidence.push(quote_api_service_condition(api, c)),
                            None => evidence
                                .push(format!("APIService {api} has no Available condition")),
                        }
                        if dead_api.contains(api) {
                            dead.push(api.clone());
                        }
                    }
                    None => evidence.push(format!(
                        "no APIService {api} is registered any more; the namespace controller will retry discovery"
                    )),
                }
            }
            findings.push(Finding {
                kind: FindingKind::NamespaceBlockedByDiscovery,
                subject: subject.clone(),
                summary: format!(
                    "namespace {name} has been terminating for {} and cannot finish: discovery fails for {}{}",
                    fmt_secs(age.as_secs()),
                    if gvs.is_empty() { "some groups".to_owned() } else { gvs.join(", ") },
                    if dead.is_empty() {
                        String::new()
                    } else {
                        format!(" (dead APIService {})", dead.join(", "))
                    }
                ),
                evidence,
                detail: FindingDetail::NamespaceDiscovery {
                    group_versions: gvs,
                    api_services,
                    dead_api_services: dead,
                },
            });
        }

        // Blocked by content.
        let content_cond = failing_namespace_condition(ns, NS_CONTENT_REMAINING);
        let finalizers_cond = failing_namespace_condition(ns, NS_FINALIZERS_REMAINING);
        let mut blocking: Vec<&ObjectRecord> = self
            .snapshot
            .content_of(name)
            .filter(|r| r.metadata.deletion_timestamp.is_some() && !r.finalizers().is_empty())
            .collect();
        blocking.sort_by(|a, b| record_key(a).cmp(&record_key(b)));
        blocking.dedup_by(|a, b| record_key(a) == record_key(b));
        if content_cond.is_some() || finalizers_cond.is_some() || !blocking.is_empty() {
            let remaining_resources = content_cond
                .map(|c| parse_content_remaining(c.message.as_deref().unwrap_or("")))
                .unwrap_or_default();
            let remaining_finalizers = finalizers_cond
                .map(|c| parse_finalizers_remaining(c.message.as_deref().unwrap_or("")))
                .unwrap_or_default();
            let mut evidence = base_evidence.clone();
            evidence.extend(content_cond.map(quote_namespace_condition));
            evidence.extend(finalizers_cond.map(quote_namespace_condition));
            for r in blocking.iter().take(MAX_LISTED) {
                evidence.push(format!(
                    "{} {} is being deleted and still has finalizers [{}]",
                    r.kind,
                    display_name(&r.metadata),
                    r.finalizers().join(", ")
                ));
            }
            if blocking.len() > MAX_LISTED {
                evidence.push(format!(
                    "... and {} more objects with finalizers",
                    blocking.len() - MAX_LISTED
                ));
            }
            let mut what: Vec<String> = remaining_resources
                .iter()
                .map(|r| format!("{} x{}", r.qualified(), r.count))
                .collect();
            what.extend(
                remaining_finalizers
                    .iter()
                    .map(|f| format!("finalizer {} x{}", f.finalizer, f.count)),
            );
            if what.is_empty() {
                what.push(format!("{} object(s) with finalizers", blocking.len()));
            }
            findings.push(Finding {
                kind: FindingKind::NamespaceBlockedByContent,
                subject: subject.clone(),
                summary: format!(
                    "namespace {name} has been terminating for {} and still has content: {}",
                    fmt_secs(age.as_secs()),
                    what.join(", ")
                ),
                evidence,
                detail: FindingDetail::NamespaceContent {
                    remaining_resources,
                    remaining_finalizers,
                    blocking_objects: blocking.iter().map(|r| record_ref(r)).collect(),
                },
            });
        }

        // The namespace's own metadata.finalizers.
        let meta_finalizers = ns.metadata.finalizers.as_deref().unwrap_or_default();
        if !meta_finalizers.is_empty() {
            let record = ObjectRecord {
                api_version: "v1".into(),
                kind: "Namespace".into(),
                resource: "namespaces".into(),
                namespaced: false,
                metadata: ns.metadata.clone(),
            };
            self.finalizer_findings(
                &record,
                age,
                FindingKind::NamespaceOrphanMetadataFinalizer,
                &[],
                findings,
            );
        }

        // The namespace's spec.finalizers.
        let tokens = ns
            .spec
            .as_ref()
            .and_then(|s| s.finalizers.clone())
            .unwrap_or_default();
        if tokens.is_empty() {
            return;
        }
        let discovery_complete =
            self.snapshot.discovery_failures.is_empty() && discovery_cond.is_none();
        let mut content_remaining: Vec<String> = {
            let mut c: Vec<&ObjectRecord> = self.snapshot.content_of(name).collect();
            c.sort_by(|a, b| record_key(a).cmp(&record_key(b)));
            c.dedup_by(|a, b| record_key(a) == record_key(b));
            c.iter()
                .map(|r| format!("{}/{}", r.kind, r.name()))
                .collect()
        };
        let failing_conditions: Vec<String> = [
            NS_DISCOVERY_FAILURE,
            NS_GV_PARSING_FAILURE,
            NS_CONTENT_FAILURE,
            NS_CONTENT_REMAINING,
            NS_FINALIZERS_REMAINING,
        ]
        .into_iter()
        .filter_map(|t| failing_namespace_condition(ns, t))
        .map(quote_namespace_condition)
        .collect();
        let (kcm_alive, kcm_evidence) = controller_manager_alive(self.snapshot);
        let provably_empty = content_remaining.is_empty() && discovery_complete;
        let mut stuck_tokens = Vec::new();
        let mut evidence = base_evidence;
        evidence.push(format!("spec.finalizers [{}]", tokens.join(", ")));
        for token in &tokens {
            if token != "kubernetes" {
                stuck_tokens.push(token.clone());
                evidence.push(format!(
                    "spec token {token:?} has no handler: the namespace controller removes only \"kubernetes\"; only PUT /finalize clears it"
                ));
            } else if !kcm_alive {
                stuck_tokens.push(token.clone());
                evidence.push(
                    "spec token \"kubernetes\" is removed by the namespace controller in kube-controller-manager, which is not known to be alive".into(),
                );
                evidence.extend(kcm_evidence.iter().cloned());
            } else if provably_empty
                && failing_conditions.is_empty()
                && age > self.threshold + NAMESPACE_RETRY_CAP
            {
                stuck_tokens.push(token.clone());
                evidence.push(format!(
                    "spec token \"kubernetes\" is still set {} after deletion although the namespace is empty, discovery is complete and no condition reports a failure (the controller retries at least every {})",
                    fmt_secs(age.as_secs()),
                    fmt_secs(NAMESPACE_RETRY_CAP.as_secs())
                ));
            }
        }
        if stuck_tokens.is_empty() {
            return;
        }
        if content_remaining.is_empty() {
            evidence.push(if discovery_complete {
                "the snapshot lists no content left in the namespace and discovery was complete".into()
            } else {
                "the snapshot lists no content, but discovery was incomplete, so that proves nothing".into()
            });
        } else {
            evidence.push(format!(
                "content still in the namespace: {}",
                content_remaining.join(", ")
            ));
        }
        evidence.extend(failing_conditions.iter().cloned());
        content_remaining.extend(
            [NS_CONTENT_REMAINING, NS_FINALIZERS_REMAINING]
                .into_iter()
                .filter_map(|t| failing_namespace_condition(ns, t))
                .filter_map(|c| c.message.clone()),
        );
        findings.push(Finding {
            kind: FindingKind::NamespaceSpecFinalizerStuck,
            subject,
            summary: format!(
                "namespace {name} keeps spec.finalizers [{}] that nothing will remove{}",
                stuck_tokens.join(", "),
                if provably_empty {
                    "; its content is provably gone"
                } else {
                    "; content is not provably gone"
                }
            ),
            evidence,
            detail: FindingDetail::NamespaceSpec {
                tokens,
                stuck_tokens,
                content_remaining,
                discovery_complete,
                resource_version: ns.metadata.resource_version.clone(),
            },
        });
    }

    /// Objects with a deletionTimestamp past the threshold and finalizers,
    /// from `terminating` and `namespace_content`, without duplicates and
    /// without Namespaces (diagnosed from their full objects).
    fn stuck_objects(&self) -> Vec<&'a ObjectRecord> {
        let mut out: Vec<&ObjectRecord> = self
            .snapshot
            .terminating
            .iter()
            .chain(&self.snapshot.namespace_content)
            .filter(|r| !(r.api_version == "v1" && r.kind == "Namespace"))
            .filter(|r| !r.finalizers().is_empty())
            .filter(|r| self.is_stuck(&r.metadata).is_some())
            .collect();
        out.sort_by(|a, b| record_key(a).cmp(&record_key(b)));
        out.dedup_by(|a, b| record_key(a) == record_key(b));
        out
    }

    fn object(&self, record: &ObjectRecord, findings: &mut Vec<Finding>) {
        let age = self.is_stuck(&record.metadata).unwrap_or_default();
        let mut skip: &[&str] = &[];
        if record.finalizers().iter().any(|f| f == FOREGROUND)
            && let Some(f) = self.waiting_on_dependents(record, age)
        {
            findings.push(f);
            skip = &[FOREGROUND];
        }
        self.finalizer_findings(record, age, FindingKind::OrphanFinalizer, skip, findings);
    }

    /// Terminating objects that name `owner` in an ownerReference with
    /// `blockOwnerDeletion: true`: what its `foregroundDeletion` waits for.
    fn blocking_dependents(&self, owner: &ObjectRecord) -> Vec<&'a ObjectRecord> {
        let Some(uid) = owner.metadata.uid.as_deref() else {
            return Vec::new();
        };
        let mut out: Vec<&ObjectRecord> = self
            .snapshot
            .terminating
            .iter()
            .filter(|r| {
                r.metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .any(|o| o.uid == uid && o.block_owner_deletion == Some(true))
            })
            .collect();
        out.sort_by(|a, b| record_key(a).cmp(&record_key(b)));
        out.dedup_by(|a, b| record_key(a) == record_key(b));
        out
    }

    /// An owner in foreground deletion whose blocking dependents are
    /// themselves stuck: walk down to the leaves (dependents that wait on
    /// nothing of their own) and name what holds them.
    fn waiting_on_dependents(&self, owner: &ObjectRecord, age: SignedDuration) -> Option<Finding> {
        let direct = self.blocking_dependents(owner);
        if direct.is_empty() {
            return None;
        }
        let mut leaves: Vec<&ObjectRecord> = Vec::new();
        let mut seen: BTreeSet<&str> = owner.metadata.uid.as_deref().into_iter().collect();
        let mut frontier = direct.clone();
        // Owner chains are short (Deployment -> ReplicaSet -> Pod); the
        // bound only guards against a malformed cycle.
        for _ in 0..8 {
            let mut next = Vec::new();
            for d in frontier {
                if !seen.insert(d.metadata.uid.as_deref().unwrap_or_default()) {
                    continue;
                }
                let below = if d.finalizers().iter().any(|f| f == FOREGROUND) {
                    self.blocking_dependents(d)
                } else {
                    Vec::new()
                };
                if below.is_empty() {
                    leaves.push(d);
                } else {
                    next.extend(below);
                }
            }
            if next.is_empty() {
                break;
            }
            frontier = next;
        }
        leaves.sort_by(|a, b| record_key(a).cmp(&record_key(b)));
        leaves.dedup_by(|a, b| record_key(a) == record_key(b));

        let what = format!("{} {}", owner.kind, display_name(&owner.metadata));
        let mut evidence: Vec<String> = self.deletion_line(&owner.metadata).into_iter().collect();
        evidence.push(format!("finalizers [{}]", owner.finalizers().join(", ")));
        evidence.push(format!(
            "{FOREGROUND}: the garbage collector removes it once every dependent with blockOwnerDeletion is gone; {} still terminating",
            direct.len()
        ));
        for d in direct.iter().take(MAX_LISTED) {
            evidence.push(format!(
                "dependent {} {} (blockOwnerDeletion) is terminating with finalizers [{}]",
                d.kind,
                display_name(&d.metadata),
                d.finalizers().join(", ")
            ));
        }
        for l in leaves.iter().take(MAX_LISTED) {
            evidence.push(format!(
                "blocked leaf: {} {} held by [{}]",
                l.kind,
                display_name(&l.metadata),
                l.finalizers().join(", ")
            ));
        }
        let leaf_keys: BTreeSet<&str> = leaves
            .iter()
            .flat_map(|l| l.finalizers())
            .map(String::as_str)
            .collect();
        Some(Finding {
            kind: FindingKind::WaitingOnDependents,
            subject: record_ref(owner),
            summary: format!(
                "{what} has been terminating for {} in foreground deletion, waiting on {} dependent(s); the chain ends at {} object(s) held by [{}]",
                fmt_secs(age.as_secs()),
                direct.len(),
                leaves.len(),
                leaf_keys.into_iter().collect::<Vec<_>>().join(", ")
            ),
            evidence,
            detail: FindingDetail::Dependents {
                dependents: direct.iter().map(|d| record_ref(d)).collect(),
                leaves: leaves.iter().map(|l| record_ref(l)).collect(),
            },
        })
    }

    /// Judges every finalizer key of `record` and emits, as applicable, one
    /// `orphan_kind` finding (the dead keys), one WaitingOnLiveController
    /// (the alive keys), one UnknownFinalizerOwner (the undetermined keys)
    /// and one ProtectedFinalizerInUse per protection key in use.
    fn finalizer_findings(
        &self,
        record: &ObjectRecord,
        age: SignedDuration,
        orphan_kind: FindingKind,
        skip: &[&str],
        findings: &mut Vec<Finding>,
    ) {
        let subject = record_ref(record);
        let finalizers = record.finalizers().to_vec();
        let mut common: Vec<String> = self.deletion_line(&record.metadata).into_iter().collect();
        if record.api_version == "v1"
            && record.kind == "Pod"
            && record.metadata.deletion_grace_period_seconds == Some(0)
        {
            // BeforeDelete never lets a shortened grace period put the
            // timestamp in the past: the final delete stamps its own time.
            common.push(
                "deletionGracePeriodSeconds 0: the kubelet has finished with it, and the API server set deletionTimestamp to the time of the kubelet's final delete, so it was deleted earlier than that".into(),
            );
        }
        common.push(format!("finalizers [{}]", finalizers.join(", ")));
        common.extend(finalizer_managers(&record.metadata));
        if let Some(ns) = record.namespace()
            && self
                .snapshot
                .namespace(ns)
                .is_some_and(|n| n.metadata.deletion_timestamp.is_some())
        {
            common.push(format!(
                "it lives in Terminating namespace {ns}, whose deletion waits for it"
            ));
        }

        let mut verdicts = Vec::new();
        let mut protected = Vec::new();
        for key in finalizers.iter().filter(|k| !skip.contains(&k.as_str())) {
            if let Some(users) = protection_in_use(
                key,
                &record.kind,
                record.namespace(),
                record.name(),
                self.snapshot,
            ) {
                protected.push((key.clone(), users));
                continue;
            }
            verdicts.push(self.owners.verdict(&OwnerQuery {
                finalizer: key,
                kind: &record.kind,
                record: Some(record),
                assume_dead: self.assume_dead,
            }));
        }
        let verdict_lines = |vs: &[&FinalizerVerdict]| -> Vec<String> {
            vs.iter()
                .map(|v| {
                    format!(
                        "{}: owner {}: {}",
                        v.finalizer,
                        v.verdict.label(),
                        v.verdict.evidence().join("; ")
                    )
                })
                .collect()
        };
        let dead: Vec<&FinalizerVerdict> =
            verdicts.iter().filter(|v| v.verdict.is_dead()).collect();
        let alive: Vec<&FinalizerVerdict> =
            verdicts.iter().filter(|v| v.verdict.is_alive()).collect();
        let unknown: Vec<&FinalizerVerdict> = verdicts
            .iter()
            .filter(|v| matches!(v.verdict, OwnerVerdict::Unknown { .. }))
            .collect();
        let what = format!("{} {}", record.kind, display_name(&record.metadata));

        if !dead.is_empty() {
            let orphan: Vec<String> = dead.iter().map(|v| v.finalizer.clone()).collect();
            let kept: Vec<String> = finalizers
                .iter()
                .filter(|k| !orphan.contains(k))
                .cloned()
                .collect();
            let mut evidence = common.clone();
            evidence.extend(verdict_lines(&dead));
            evidence.extend(verdict_lines(&alive));
            evidence.extend(verdict_lines(&unknown));
            findings.push(Finding {
                kind: orphan_kind,
                subject: subject.clone(),
                summary: format!(
                    "{what} has been terminating for {} held by finalizer(s) [{}] with no live owner{}",
                    fmt_secs(age.as_secs()),
                    orphan.join(", "),
                    if kept.is_empty() {
                        String::new()
                    } else {
                        format!("; [{}] stay", kept.join(", "))
                    }
                ),
                evidence,
                detail: FindingDetail::OrphanFinalizer(FinalizerRemoval {
                    resource: record.resource.clone(),
                    resource_version: record.metadata.resource_version.clone(),
                    age_seconds: age.as_secs(),
                    finalizers: finalizers.clone(),
                    orphan,
                    kept,
                    verdicts: verdicts.clone(),
                }),
            });
        }
        for (kind, group, label) in [
            (
                FindingKind::WaitingOnLiveController,
                &alive,
                "a live controller",
            ),
            (
                FindingKind::UnknownFinalizerOwner,
                &unknown,
                "an owner that could not be argued alive or dead",
            ),
        ] {
            if group.is_empty() {
                continue;
            }
            let keys: Vec<&str> = group.iter().map(|v| v.finalizer.as_str()).collect();
            let mut evidence = common.clone();
            evidence.extend(verdict_lines(group));
            findings.push(Finding {
                kind,
                subject: subject.clone(),
                summary: format!(
                    "{what} has been terminating for {} waiting on finalizer(s) [{}] of {label}",
                    fmt_secs(age.as_secs()),
                    keys.join(", ")
                ),
                evidence,
                detail: FindingDetail::Finalizers {
                    resource: record.resource.clone(),
                    age_seconds: age.as_secs(),
                    verdicts: group.iter().map(|v| (*v).clone()).collect(),
                },
            });
        }
        for (key, users) in protected {
            let mut evidence = common.clone();
            evidence.extend(users.iter().map(|u| format!("in use: {u}")));
            findings.push(Finding {
                kind: FindingKind::ProtectedFinalizerInUse,
                subject: subject.clone(),
                summary: format!(
                    "{what} is held by {key} while it is in use ({}): normal, never stripped",
                    users.join("; ")
                ),
                evidence,
                detail: FindingDetail::Protected {
                    finalizer: key,
                    used_by: users,
                },
            });
        }
    }

    /// A pod the kubelet has not finished deleting: past its
    /// deletionTimestamp (which includes the grace period) by more than the
    /// threshold, and `deletionGracePeriodSeconds` not yet 0 (the kubelet's
    /// final DELETE sets it to 0; a pod left after that is held only by
    /// finalizers, which the finalizer path judges).
    /// Evidence that node `name` is not answering: its `Ready` condition
    /// is not `True` (the node lifecycle controller writes `Unknown`,
    /// `NodeStatusUnknown`, "Kubelet stopped posting node status." once its
    /// lease is stale), or the Node is gone. `None` when it is Ready, or
    /// when the snapshot holds no nodes at all (an old recording).
    fn node_not_ready(&self, name: &str) -> Option<Vec<String>> {
        if self.snapshot.nodes.is_empty() {
            return None;
        }
        let Some(node) = self
            .snapshot
            .nodes
            .iter()
            .find(|n| n.metadata.name.as_deref() == Some(name))
        else {
            return Some(vec![format!(
                "node {name} does not exist any more: no kubelet will confirm this pod's end"
            )]);
        };
        let ready = node
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))?;
        if ready.status == "True" {
            return None;
        }
        let mut lines = vec![format!(
            "node {name}: Ready={} ({}): {:?}{}",
            ready.status,
            ready.reason.as_deref().unwrap_or("<none>"),
            ready.message.as_deref().unwrap_or_default(),
            ready
                .last_transition_time
                .as_ref()
                .map(|t| format!(
                    " since {} ({} before the snapshot)",
                    t.0,
                    fmt_secs(self.snapshot.age_of(t.0).as_secs())
                ))
                .unwrap_or_default()
        )];
        if let Some(lease) = self.snapshot.leases.iter().find(|l| {
            l.metadata.namespace.as_deref() == Some("kube-node-lease")
                && l.metadata.name.as_deref() == Some(name)
        }) && let Some(renew) = lease.spec.as_ref().and_then(|s| s.renew_time.as_ref())
        {
            lines.push(format!(
                "its kubelet last renewed lease kube-node-lease/{name} {} before the snapshot",
                fmt_secs(self.snapshot.age_of(renew.0).as_secs())
            ));
        }
        let taints: Vec<String> = node
            .spec
            .as_ref()
            .and_then(|s| s.taints.as_ref())
            .into_iter()
            .flatten()
            .filter(|t| t.key.starts_with("node.kubernetes.io/"))
            .map(|t| format!("{}:{}", t.key, t.effect))
            .collect();
        if !taints.is_empty() {
            lines.push(format!("taints {}", taints.join(", ")));
        }
        Some(lines)
    }

    fn pod(&self, pod: &Pod, findings: &mut Vec<Finding>) {
        let Some(overdue) = self.is_stuck(&pod.metadata) else {
            return;
        };
        if pod.metadata.deletion_grace_period_seconds == Some(0) {
            return;
        }
        let status = pod.status.as_ref();
        let phase = status.and_then(|s| s.phase.clone());
        let node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
        let mut evidence: Vec<String> = self.deletion_line(&pod.metadata).into_iter().collect();
        evidence.push(format!(
            "deletionGracePeriodSeconds {} (the kubelet's final delete would set it to 0)",
            pod.metadata
                .deletion_grace_period_seconds
                .map_or("<unset>".to_owned(), |g| g.to_string())
        ));
        evidence.push(format!(
            "phase {}, node {}",
            phase.as_deref().unwrap_or("<unknown>"),
            node.as_deref().unwrap_or("<none>")
        ));
        let statuses: Vec<_> = status.into_iter().flat_map(container_statuses).collect();
        let mut any_running = false;
        let mut all_terminated = !statuses.is_empty();
        for cs in &statuses {
            let state = cs.state.as_ref();
            let running = state.is_some_and(|s| s.running.is_some());
            let terminated = state.and_then(|s| s.terminated.as_ref());
            any_running |= running;
            all_terminated &= terminated.is_some();
            evidence.push(format!(
                "container {}: {}",
                cs.name,
                if running {
                    "running".to_owned()
                } else if let Some(t) = terminated {
                    format!(
                        "terminated (exit {}{})",
                        t.exit_code,
                        t.reason
                            .as_deref()
                            .map(|r| format!(", {r}"))
                            .unwrap_or_default()
                    )
                } else {
                    "waiting".to_owned()
                }
            ));
        }
        let mut kill_events = false;
        let mut network_teardown = false;
        let mut events: Vec<String> = self
            .snapshot
            .pod_warnings(&pod.metadata)
            .map(|e| {
                let reason = e.reason.as_deref().unwrap_or_default();
                if reason == "FailedKillPod" || reason == "ExceededGracePeriod" {
                    kill_events = true;
                }
                if reason == "FailedKillPod"
                    && e.message
                        .as_deref()
                        .is_some_and(super::node::is_cni_teardown_failure)
                {
                    network_teardown = true;
                }
                format!(
                    "event Warning {reason}: {:?}",
                    e.message.as_deref().unwrap_or_default()
                )
            })
            .collect();
        events.sort();
        events.dedup();
        evidence.extend(events);

        let node_lost = node.as_deref().and_then(|n| self.node_not_ready(n));
        if let Some(lines) = &node_lost {
            evidence.extend(lines.iter().cloned());
            if pod
                .metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.kind == "StatefulSet")
            {
                evidence.push(
                    "a StatefulSet pod: forcing it away while its node may still run it risks two pods with one identity (split brain)".into(),
                );
            }
        }
        let terminal = matches!(phase.as_deref(), Some("Succeeded" | "Failed"));
        let rejecting = if terminal && all_terminated {
            self.dead_webhooks_on_pod_delete()
        } else {
            Vec::new()
        };
        for line in &rejecting {
            evidence.push(line.clone());
        }
        // A kubelet that reports the network plugin failing is alive: its
        // node may be NotReady (the runtime's network is not ready), not
        // lost.
        let hint = if network_teardown {
            PodStuckHint::NetworkTeardown
        } else if node_lost.is_some()
            || status.and_then(|s| s.reason.as_deref()) == Some("NodeLost")
        {
            PodStuckHint::NodeLost
        } else if any_running || kill_events {
            PodStuckHint::RuntimeKill
        } else if !rejecting.is_empty() {
            PodStuckHint::DeleteRejected
        } else if terminal && all_terminated {
            PodStuckHint::VolumeTeardown
        } else {
            PodStuckHint::Unknown
        };
        let explain = match hint {
            PodStuckHint::NodeLost => {
                "its node is not answering, so no kubelet confirms the kill; bring the kubelet back, and force it away only once the node is known to be down"
            }
            PodStuckHint::RuntimeKill => {
                "the container runtime does not stop its containers (check the runtime and shim on the node)"
            }
            PodStuckHint::VolumeTeardown => {
                "its containers are gone but the kubelet has not reclaimed it: most likely a volume that cannot be unmounted (check mounts on the node)"
            }
            PodStuckHint::NetworkTeardown => {
                "the network plugin fails to tear down its sandbox (FailedKillPod: failed to destroy network for sandbox); repair the CNI plugin or its configuration on the node, then the kubelet's next retry finishes it"
            }
            PodStuckHint::DeleteRejected => {
                "its containers are gone but the kubelet's final DELETE is rejected by an admission webhook that fails closed with its backend gone (see the DeadWebhook finding)"
            }
            PodStuckHint::Unknown => "the API shows no cause; look at the kubelet on its node",
        };
        findings.push(Finding {
            kind: FindingKind::PodStuckTerminating,
            subject: ObjectRef::pod(&pod.metadata),
            summary: format!(
                "pod {} is {} past its grace period and not deleted: {explain}",
                display_name(&pod.metadata),
                fmt_secs(overdue.as_secs())
            ),
            evidence,
            detail: FindingDetail::Pod {
                node,
                phase,
                overdue_seconds: overdue.as_secs(),
                hint,
            },
        });
    }
}

impl Diagnosis<'_> {
    /// The proof that a webhook rejects everything it matches: it fails
    /// closed (`failurePolicy: Fail`), calls a Service, and the collector's
    /// lookup proves that Service's backend gone ([`super::backend::judge`]).
    /// The Service, the reason (`ServiceNotFound` / `NoReadyEndpoints`)
    /// and the evidence lines; `None` without that proof (a URL webhook,
    /// an ExternalName or selectorless Service, a backend restarting, a
    /// lookup that failed or was not made).
    fn dead_backend(&self, w: &WebhookView<'_>) -> Option<(ServiceKey, &'static str, Vec<String>)> {
        if w.failure_policy != "Fail" {
            return None;
        }
        let service = w.service()?;
        let j = super::backend::judge(self.snapshot.service_lookup(&service));
        match j.state {
            super::backend::BackendState::Gone(reason) => Some((service, reason, j.evidence)),
            _ => None,
        }
    }

    /// Why a webhook's backend is not proven gone, for the report.
    fn backend_not_proven(&self, name: &str) -> Vec<String> {
        let Some(w) = webhooks(self.snapshot).into_iter().find(|w| w.name == name) else {
            return vec![format!("webhook {name:?} is not registered any more")];
        };
        match w.service() {
            None => vec![format!(
                "webhook {name:?} calls a URL ({}); a URL backend is never judged gone",
                w.client_config.url.as_deref().unwrap_or("?")
            )],
            Some(service) => super::backend::judge(self.snapshot.service_lookup(&service))
                .evidence
                .into_iter()
                .map(|e| format!("webhook {name:?}: {e}"))
                .collect(),
        }
    }

    /// Webhooks with a dead backend ([`Diagnosis::dead_backend`]) that
    /// match DELETE of pods: each rejects the kubelet's final DELETE of a
    /// pod whose containers are gone. One evidence line each.
    fn dead_webhooks_on_pod_delete(&self) -> Vec<String> {
        webhooks(self.snapshot)
            .iter()
            .filter(|w| w.matches_operation_on_pods("DELETE"))
            .filter_map(|w| {
                let (service, _, _) = self.dead_backend(w)?;
                Some(format!(
                    "{} {} webhook {:?} (failurePolicy Fail) matches pod DELETE and its Service {service} has no backend: the kubelet's final DELETE (grace 0) is rejected, as a --force delete would be",
                    w.config_kind.kind(),
                    w.config_name,
                    w.name
                ))
            })
            .collect()
    }
}

fn api_service_group_version(api: &APIService, name: &str) -> String {
    let spec = api.spec.as_ref();
    match (
        spec.and_then(|s| s.group.as_deref()),
        spec.and_then(|s| s.version.as_deref()),
    ) {
        (Some(g), Some(v)) if !g.is_empty() => format!("{g}/{v}"),
        (_, Some(v)) => v.to_owned(),
        // `v1beta1.metrics.k8s.io` -> `metrics.k8s.io/v1beta1`.
        _ => match name.split_once('.') {
            Some((v, g)) if !g.is_empty() => format!("{g}/{v}"),
            Some((v, _)) => v.to_owned(),
            None => name.to_owned(),
        },
    }
}

type RecordKey<'a> = (Option<&'a str>, &'a str, &'a str, &'a str, Option<&'a str>);

fn record_key(r: &ObjectRecord) -> RecordKey<'_> {
    (
        r.namespace(),
        r.name(),
        r.api_version.as_str(),
        r.kind.as_str(),
        r.metadata.uid.as_deref(),
    )
}

fn record_ref(r: &ObjectRecord) -> ObjectRef {
    ObjectRef {
        api_version: r.api_version.clone(),
        kind: r.kind.clone(),
        namespace: r.namespace().map(str::to_owned),
        name: r.name().to_owned(),
        uid: r.metadata.uid.clone(),
    }
}

/// Which field managers last wrote `metadata.finalizers` (from
/// managedFields, when the collector kept them): a hint at who added a key.
fn finalizer_managers(meta: &ObjectMeta) -> Vec<String> {
    meta.managed_fields
        .iter()
        .flatten()
        .filter(|m| {
            m.fields_v1
                .as_ref()
                .and_then(|f| f.0.get("f:metadata"))
                .and_then(|m| m.get("f:finalizers"))
                .is_some()
        })
        .map(|m| {
            format!(
                "managedFields: manager {:?} ({}) owns metadata.finalizers{}",
                m.manager.as_deref().unwrap_or_default(),
                m.operation.as_deref().unwrap_or_default(),
                m.time
                    .as_ref()
                    .map(|t| format!(", last written {}", t.0))
                    .unwrap_or_default()
            )
        })
        .collect()
}
