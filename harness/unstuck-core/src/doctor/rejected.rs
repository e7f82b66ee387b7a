//! Blockers behind blockers: a stuck object is released by a write (a
//! finalizer removed, a namespace finalized), and a webhook that fails
//! closed rejects that write before anyone (the doctor, or a live
//! controller) can make it: one whose backend is gone, and one whose
//! backend is there but failing (slow, misconfigured), which the doctor
//! never fails open. Namespace conditions never name such a webhook for
//! the write: it rejects an UPDATE, not the namespace controller's DELETE.
//! So every dead or failing webhook is matched ([`admission`]) against the
//! write each stuck finding's release needs, and both sides say so: the
//! webhook which writes it rejects, the stuck object which webhook stands
//! in the way.

use super::admission::{self, Match, Write};
use super::model::{DeadWebhookFacts, FinalizerFacts, Finding, FindingDetail, ObjectRef, Snapshot};
use super::webhook::webhooks;

pub use super::model::RejectedWrite;
use crate::text::quoted;

/// The write that would release a stuck finding's subject (or, for a
/// dead registration, the doctor's remedy on it).
struct Release<'a> {
    finding: usize,
    operation: &'static str,
    resource: &'a str,
    subresource: &'static str,
    purpose: &'static str,
}

fn release_of(i: usize, f: &Finding) -> Option<Release<'_>> {
    let update = |resource, subresource, purpose| ("UPDATE", resource, subresource, purpose);
    let (operation, resource, subresource, purpose) = match &f.detail {
        FindingDetail::NamespaceOrphanMetadataFinalizer(_) => {
            update("namespaces", "", "removing its metadata finalizers")
        }
        FindingDetail::NamespaceSpecFinalizerStuck { .. } => {
            update("namespaces", "finalize", "finalizing it (/finalize)")
        }
        FindingDetail::OrphanFinalizer(rem) => {
            update(rem.resource.as_str(), "", "removing its finalizers")
        }
        FindingDetail::WaitingOnLiveController(FinalizerFacts { resource, .. })
        | FindingDetail::UnknownFinalizerOwner(FinalizerFacts { resource, .. }) => {
            update(resource.as_str(), "", "removing its finalizers")
        }
        // The doctor's own remedies on dead registrations are writes too:
        // a webhook on `*/*` takes them like any other.
        FindingDetail::DeadApiService(_) => (
            "DELETE",
            "apiservices",
            "",
            "deleting the dead registration",
        ),
        FindingDetail::DeadConversionWebhook(_) => update(
            "customresourcedefinitions",
            "",
            "setting its conversion strategy to None",
        ),
        _ => return None,
    };
    Some(Release {
        finding: i,
        operation,
        resource,
        subresource,
        purpose,
    })
}

/// Links dead and failing webhooks to the releases they reject, in place:
/// the webhook's detail lists them and both findings say it in their
/// evidence.
pub fn link(findings: &mut [Finding], snapshot: &Snapshot) {
    let links = find_links(findings, snapshot);
    record_links(findings, links);
}

/// (webhook finding, stuck finding, the rejected write) for every dead
/// webhook and every stuck finding whose release it takes.
fn find_links(findings: &[Finding], snapshot: &Snapshot) -> Vec<(usize, usize, RejectedWrite)> {
    let releases: Vec<Release<'_>> = findings
        .iter()
        .enumerate()
        .filter_map(|(i, f)| release_of(i, f))
        .collect();
    let all = webhooks(snapshot);
    let mut links: Vec<(usize, usize, RejectedWrite)> = Vec::new();
    for (wi, wf) in findings.iter().enumerate() {
        let view = match &wf.detail {
            FindingDetail::DeadWebhook(DeadWebhookFacts {
                configuration,
                configuration_name,
                index,
                ..
            }) => all.iter().find(|w| {
                w.config_kind == *configuration
                    && w.config_name == configuration_name
                    && w.index == *index
            }),
            FindingDetail::WebhookBackendFailing {
                configuration,
                configuration_name,
                webhook,
                ..
            } => all.iter().find(|w| {
                w.config_kind == *configuration
                    && w.config_name == configuration_name
                    && w.name == webhook
            }),
            _ => None,
        };
        let Some(view) = view else {
            continue;
        };
        for r in &releases {
            let subject = &findings[r.finding].subject;
            let labels = labels_of(subject, snapshot);
            let write = Write {
                operation: r.operation,
                api_version: &subject.api_version,
                resource: r.resource,
                subresource: r.subresource,
                namespace: subject.namespace.as_deref(),
                name: &subject.name,
                labels,
            };
            let assumed = match admission::matches(view, &write, snapshot) {
                Match::No => continue,
                Match::Yes => None,
                Match::Assumed(why) => Some(why),
            };
            let resource = if r.subresource.is_empty() {
                r.resource.to_owned()
            } else {
                format!("{}/{}", r.resource, r.subresource)
            };
            links.push((
                wi,
                r.finding,
                RejectedWrite {
                    subject: subject.clone(),
                    operation: r.operation.into(),
                    resource,
                    purpose: r.purpose.into(),
                    assumed,
                },
            ));
        }
    }
    links
}

/// Writes the links into both findings' evidence and the webhook's detail
/// and summary.
fn record_links(findings: &mut [Finding], links: Vec<(usize, usize, RejectedWrite)>) {
    for (wi, si, write) in links {
        let (webhook_line, stuck_line) = {
            let (w, s) = (&findings[wi], &findings[si]);
            let (name, why) = match &w.detail {
                FindingDetail::DeadWebhook(DeadWebhookFacts { webhook, .. }) => (
                    webhook.as_str(),
                    "rejects while it fails closed with its backend gone".to_string(),
                ),
                FindingDetail::WebhookBackendFailing {
                    webhook, verdict, ..
                } => (
                    webhook.as_str(),
                    format!("fails while it fails closed and its backend is {verdict}"),
                ),
                _ => ("", String::new()),
            };
            let maybe = write
                .assumed
                .as_deref()
                .map(|why| format!(" (assumed: {why})"))
                .unwrap_or_default();
            (
                format!(
                    "rejects {} {} of {}: {}{maybe}",
                    write.operation, write.resource, s.subject, write.purpose
                ),
                format!(
                    "{} needs {} {}, which webhook {name} ({} {}) {why}{maybe}",
                    write.purpose,
                    write.operation,
                    write.resource,
                    w.subject.kind,
                    w.subject.name,
                    name = quoted(name)
                ),
            )
        };
        findings[si].evidence.push(stuck_line);
        let w = &mut findings[wi];
        w.evidence.push(webhook_line);
        if let FindingDetail::DeadWebhook(DeadWebhookFacts { rejects, .. })
        | FindingDetail::WebhookBackendFailing { rejects, .. } = &mut w.detail
        {
            rejects.push(write);
        }
    }
    for f in findings.iter_mut() {
        if let FindingDetail::DeadWebhook(DeadWebhookFacts {
            rejects,
            blocks_namespaces,
            ..
        })
        | FindingDetail::WebhookBackendFailing {
            rejects,
            blocks_namespaces,
            ..
        } = &f.detail
            && !rejects.is_empty()
        {
            let n = rejects.len();
            f.summary.push_str(&format!(
                "; it rejects the write that would release {n} stuck object(s){}",
                if blocks_namespaces.is_empty() {
                    ""
                } else {
                    " as well"
                }
            ));
        }
    }
}

fn labels_of<'a>(
    subject: &ObjectRef,
    snapshot: &'a Snapshot,
) -> Option<&'a std::collections::BTreeMap<String, String>> {
    if subject.kind == "Namespace" && subject.api_version == "v1" {
        return snapshot
            .namespace(&subject.name)
            .map(|n| n.metadata.labels.as_ref().unwrap_or(&admission::NO_LABELS));
    }
    let meta = snapshot
        .terminating
        .iter()
        .map(|r| &r.metadata)
        .chain(snapshot.pods.iter().map(|p| &p.metadata))
        .find(|m| {
            m.name.as_deref() == Some(subject.name.as_str())
                && m.namespace == subject.namespace
                && (subject.uid.is_none() || m.uid == subject.uid)
        })?;
    Some(meta.labels.as_ref().unwrap_or(&admission::NO_LABELS))
}
