//! Namespace findings: a Terminating namespace blocked by discovery, by
//! content, by its own metadata or spec finalizers, or by content deletes
//! that fail, and the per-namespace condition views ([`DiscoveryBlocked`],
//! [`ContentFailure`]) the APIService and webhook detectors correlate with.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{Namespace, NamespaceCondition};
use k8s_openapi::jiff::SignedDuration;

use super::{Diagnosis, MAX_LISTED, record_key, record_ref};

mod spec_finalizers;
use crate::doctor::conditions::{
    NS_CONTENT_FAILURE, NS_CONTENT_REMAINING, NS_DISCOVERY_FAILURE, NS_FINALIZERS_REMAINING,
    NS_GV_PARSING_FAILURE, api_service_available, api_service_name, failing_namespace_condition,
    namespace_condition, parse_content_remaining, parse_discovery_failure,
    parse_finalizers_remaining, quote_api_service_condition, quote_namespace_condition,
};
use crate::doctor::model::object::namespace_ref;
use crate::doctor::model::{Finding, FindingDetail, ObjectRecord, ObjectRef, display_name};
use crate::doctor::model::{WebhookId, WebhookView};
use crate::doctor::owner::{controller_manager_alive, fmt_secs};
use crate::doctor::webhook::{failed_webhooks, may_have_failed, webhooks};
use crate::text::quoted;

/// The namespace controller retries a failing namespace at most every 60 s
/// (rate limiter cap, detection-notes 1.2). A `kubernetes` spec token that
/// outlives the content by more than the threshold plus this is not going
/// to be removed by the controller.
const NAMESPACE_RETRY_CAP: SignedDuration = SignedDuration::from_secs(60);

/// A Terminating namespace whose content-deletion-failure condition is
/// set.
pub(super) struct ContentFailure<'a> {
    pub(super) namespace: &'a str,
    pub(super) object: &'a Namespace,
    /// The condition's message, the apiserver's words.
    pub(super) message: &'a str,
}

/// The namespaces, sorted, whose content-failure condition blames webhook
/// `w`: names it, and can mean this one of the webhooks of its name
/// ([`may_have_failed`]).
pub(super) fn namespaces_blaming(
    failures: &[ContentFailure<'_>],
    w: &WebhookView<'_>,
) -> Vec<String> {
    let mut blocks: Vec<String> = failures
        .iter()
        .filter(|f| may_have_failed(w, f.object, f.message))
        .map(|f| f.namespace.to_owned())
        .collect();
    blocks.sort();
    blocks.dedup();
    blocks
}

/// What every finding about one stuck namespace starts from.
struct StuckNamespace<'n> {
    ns: &'n Namespace,
    name: &'n str,
    age: SignedDuration,
    subject: ObjectRef,
    base_evidence: Vec<String>,
    discovery_cond: Option<&'n NamespaceCondition>,
}

/// A Terminating namespace whose discovery-failure condition is set.
pub(super) struct DiscoveryBlocked<'a> {
    pub(super) namespace: &'a str,
    pub(super) group_versions: Vec<String>,
}

impl<'a> Diagnosis<'a> {
    /// Terminating namespaces past the threshold, by name.
    pub(super) fn stuck_namespaces(&self) -> Vec<&'a Namespace> {
        let mut out: Vec<&Namespace> = self
            .snapshot
            .namespaces
            .iter()
            .filter(|ns| self.is_stuck(&ns.metadata).is_some())
            .collect();
        out.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        out
    }

    pub(super) fn discovery_blocked_namespaces(&self) -> Vec<DiscoveryBlocked<'a>> {
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

    pub(super) fn content_failure_namespaces(&self) -> Vec<ContentFailure<'a>> {
        self.snapshot
            .namespaces
            .iter()
            .filter(|ns| ns.metadata.deletion_timestamp.is_some())
            .filter_map(|ns| {
                let c = failing_namespace_condition(ns, NS_CONTENT_FAILURE)?;
                Some(ContentFailure {
                    namespace: ns.metadata.name.as_deref()?,
                    object: ns,
                    message: c.message.as_deref().unwrap_or(""),
                })
            })
            .collect()
    }

    /// A namespace whose content deletes fail: quote the controller's
    /// error and name the dead webhooks it blames.
    pub(super) fn namespace_content_failure(
        &self,
        ns: &Namespace,
        dead_webhooks: &BTreeSet<WebhookId>,
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
            crate::doctor::conversion::explain_message(self.snapshot, &message);
        let mut evidence: Vec<String> = self.deletion_line(&ns.metadata).into_iter().collect();
        evidence.push(quote_namespace_condition(cond));
        evidence.extend(conversion_lines);
        for w in &named {
            let blamed: Vec<WebhookView<'_>> = webhooks(self.snapshot)
                .into_iter()
                .filter(|v| v.name == w && may_have_failed(v, ns, &message))
                .collect();
            if let Some(dead) = blamed.iter().find(|v| dead_webhooks.contains(&v.id())) {
                evidence.push(format!(
                    "webhook {} of {} {} rejects the controller's deletes and its backend is gone",
                    quoted(w),
                    dead.config_kind.kind(),
                    dead.config_name
                ));
            } else {
                evidence.push(format!(
                    "webhook {} rejects the controller's deletes; its backend was not proven gone, so it is not changed",
                    quoted(w)
                ));
                evidence.extend(self.backend_not_proven(w, &blamed));
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
            subject: namespace_ref(ns),
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
            detail: FindingDetail::NamespaceContentDeletionFailed {
                message,
                webhooks: named,
            },
        });
    }

    pub(super) fn namespace(
        &self,
        ns: &Namespace,
        dead_api: &BTreeSet<String>,
        findings: &mut Vec<Finding>,
    ) {
        let Some(name) = ns.metadata.name.as_deref() else {
            return;
        };
        let age = self.is_stuck(&ns.metadata).unwrap_or_default();
        let subject = namespace_ref(ns);
        let base_evidence: Vec<String> = self.deletion_line(&ns.metadata).into_iter().collect();
        let discovery_cond = failing_namespace_condition(ns, NS_DISCOVERY_FAILURE);

        let facts = StuckNamespace {
            ns,
            name,
            age,
            subject,
            base_evidence,
            discovery_cond,
        };

        // Blocked by discovery.
        if let Some(cond) = discovery_cond {
            self.namespace_discovery(&facts, cond, dead_api, findings);
        }

        // Blocked by content.
        self.namespace_content(&facts, findings);

        // The namespace's own metadata.finalizers.
        // The namespace's own metadata.finalizers.
        let meta_finalizers = ns.metadata.finalizers.as_deref().unwrap_or_default();
        if !meta_finalizers.is_empty() {
            let record = ObjectRecord::of_namespace(ns);
            self.finalizer_findings(
                &record,
                age,
                FindingDetail::NamespaceOrphanMetadataFinalizer,
                &[],
                findings,
            );
        }

        // The namespace's spec.finalizers.
        self.namespace_spec_finalizers(facts, findings);
    }

    /// NamespaceBlockedByDiscovery: the controller's discovery-failure
    /// condition, and the APIServices that serve what it names.
    fn namespace_discovery(
        &self,
        facts: &StuckNamespace<'_>,
        cond: &NamespaceCondition,
        dead_api: &BTreeSet<String>,
        findings: &mut Vec<Finding>,
    ) {
        let &StuckNamespace {
            name,
            age,
            ref subject,
            ref base_evidence,
            ..
        } = facts;
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
            detail: FindingDetail::NamespaceBlockedByDiscovery {
                group_versions: gvs,
                api_services,
                dead_api_services: dead,
            },
        });
    }

    /// NamespaceBlockedByContent: remaining content and finalizers the
    /// controller reports, and the terminating objects with finalizers.
    fn namespace_content(&self, facts: &StuckNamespace<'_>, findings: &mut Vec<Finding>) {
        let &StuckNamespace {
            ns,
            name,
            age,
            ref subject,
            ref base_evidence,
            ..
        } = facts;
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
                subject: subject.clone(),
                summary: format!(
                    "namespace {name} has been terminating for {} and still has content: {}",
                    fmt_secs(age.as_secs()),
                    what.join(", ")
                ),
                evidence,
                detail: FindingDetail::NamespaceBlockedByContent {
                    remaining_resources,
                    remaining_finalizers,
                    blocking_objects: blocking.iter().map(|r| record_ref(r)).collect(),
                },
            });
        }
    }

    /// Every object the snapshot lists in namespace `name`, once, as Kind/name.
    fn content_listing(&self, name: &str) -> Vec<String> {
        let mut c: Vec<&ObjectRecord> = self.snapshot.content_of(name).collect();
        c.sort_by(|a, b| record_key(a).cmp(&record_key(b)));
        c.dedup_by(|a, b| record_key(a) == record_key(b));
        c.iter()
            .map(|r| format!("{}/{}", r.kind, r.name()))
            .collect()
    }
}

/// The namespace's failing conditions, quoted.
fn failing_conditions(ns: &Namespace) -> Vec<String> {
    [
        NS_DISCOVERY_FAILURE,
        NS_GV_PARSING_FAILURE,
        NS_CONTENT_FAILURE,
        NS_CONTENT_REMAINING,
        NS_FINALIZERS_REMAINING,
    ]
    .into_iter()
    .filter_map(|t| failing_namespace_condition(ns, t))
    .map(quote_namespace_condition)
    .collect()
}
