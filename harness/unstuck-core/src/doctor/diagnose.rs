//! From a [`Snapshot`] to [`Finding`]s: pure, deterministic, no I/O.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::SignedDuration;

use super::model::{Finding, FindingKind, ObjectRecord, ObjectRef, Snapshot};
use super::owner::{OwnerCache, fmt_secs};

mod apiservice;
mod failing;
mod load_balancer;
mod namespace;
mod objects;
mod pods;
mod webhook;

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
    /// How long an APIService whose backend is installed but not serving
    /// (its Service there, no ready endpoint, a pod's cause named) must
    /// have been unavailable, by the API server's clock, before the
    /// doctor offers to remove its registration
    /// (`--apiservice-outage-after`). Default 5 min: longer than an image
    /// pull or a rollout that recovers on its own.
    pub apiservice_outage_after: Duration,
    /// APIServices a person allowed the doctor to remove after such an
    /// outage (`--allow-apiservice-removal=NAME`). Nothing is removed for
    /// an outage without it.
    pub allow_apiservice_removal: Vec<String>,
}

impl Default for DiagnoseOptions {
    fn default() -> Self {
        DiagnoseOptions {
            stuck_after: Duration::from_secs(10),
            assume_dead: Vec::new(),
            apiservice_outage_after: Duration::from_secs(300),
            allow_apiservice_removal: Vec::new(),
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
        outage_after: SignedDuration::try_from(opts.apiservice_outage_after)
            .unwrap_or(SignedDuration::MAX),
        allow_apiservice_removal: &opts.allow_apiservice_removal,
        owners: OwnerCache::new(snapshot),
    };
    let mut findings = Vec::new();

    let blocked_namespaces = d.discovery_blocked_namespaces();
    let dead_api_services = d.dead_api_services(&blocked_namespaces, &mut findings);
    let content_failures = d.content_failure_namespaces();
    let dead_webhooks = d.dead_webhooks(&content_failures, &mut findings);
    d.failing_webhooks(&content_failures, &dead_webhooks, &mut findings);
    d.not_serving_webhooks(&content_failures, &dead_webhooks, &mut findings);
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
    failing::drop_idle_not_serving(&mut findings);
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
        f.kind(),
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
    outage_after: SignedDuration,
    allow_apiservice_removal: &'a [String],
    owners: OwnerCache<'a>,
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
