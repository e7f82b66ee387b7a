//! A snapshot fit to hand to someone outside the cluster's team (a vendor,
//! an issue tracker): what the doctor reads to diagnose is kept, values a
//! workload was given are not.
//!
//! Removed everywhere:
//! - `kubectl.kubernetes.io/last-applied-configuration` (a Secret's holds
//!   its data, a Deployment's its env values), on every object of every
//!   list; any other annotation value but the doctor's own
//!   (`unstuck.dev/...`) becomes `<redacted: N bytes>` (no diagnosis
//!   reads one, and a short value is no safer than a long one);
//! - Event messages, except those of Kubernetes' own components (the
//!   kubelet, the scheduler, kube-controller-manager's controllers),
//!   which are the evidence a diagnosis quotes; container waiting
//!   messages, except the kubelet's for a pull or a back-off (a runtime's
//!   error for a container it could not start quotes its command line);
//!   PersistentVolume `mountOptions`;
//! - in pods and in the pod templates of Deployments, StatefulSets and
//!   DaemonSets, for containers, init containers and ephemeral
//!   containers: env values (names and `valueFrom` references stay), args
//!   and command (one `<redacted>`), lifecycle hooks and probes (exec
//!   commands and HTTP headers); containers' termination messages (what
//!   the program wrote, or its last log lines); volume sources that carry
//!   values (CSI volume attributes, flexVolume options, a gitRepo's URL);
//! - the same volume values on PersistentVolumes;
//! - the `fieldsV1` of managedFields beyond the top-level field names:
//!   it is not only names. Keys of associative lists carry values
//!   (`k:{"name":"DB_PASSWORD"}`, `k:{"containerPort":5432,...}`, and any
//!   key field a CRD declares), set items are values (`v:"..."`). Kept:
//!   manager, operation, time, subresource, the top-level fields written
//!   (`f:status`, `f:spec`, ...), the `f:metadata` field names, and the
//!   whole `f:metadata.f:finalizers` (its items are finalizer keys, which
//!   the object shows anyway): who wrote the finalizers is evidence;
//! - webhook, CRD conversion webhook and APIService `caBundle` bytes: not
//!   secret, only bulk; and
//!   the image list of Nodes, likewise.
//!
//! Kept: names, namespaces, UIDs, labels, ownerReferences, finalizers,
//! deletion and creation times, statuses and conditions with their
//! messages, images, serviceAccountName, node names, volume names and
//! claims, leases, events (reason, involvedObject, reporter, and the
//! message when Kubernetes' own),
//! webhook rules and services, discovery failures.
//!
//! The snapshot holds no Secret objects, and its metadata-only records
//! (terminating objects, namespace content) never hold `data`: a Secret's
//! values can only reach it through an annotation, handled above. Free
//! text written by Kubernetes' components (their event messages, condition
//! messages) is kept as written, since it is the evidence a diagnosis
//! quotes.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Container, ContainerStatus, EphemeralContainer, Pod, PodSpec, PodStatus, PodTemplateSpec,
    Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ObjectMeta};
use serde_json::Value;

use super::model::{ObjectRecord, Snapshot};

/// What a removed value is replaced with.
pub const REDACTED: &str = "<redacted>";

/// The annotation `kubectl apply` keeps the whole applied manifest in.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Whether a value was put in place of a removed one by [`redact`].
pub fn is_redacted(value: &str) -> bool {
    value.starts_with("<redacted")
}

/// A copy of `snapshot` with the values described in the module
/// documentation removed.
pub fn redact(snapshot: &Snapshot) -> Snapshot {
    let mut s = snapshot.clone();
    redact_in_place(&mut s);
    s
}

/// [`redact`], in place.
///
/// One function past ~100 lines on purpose: it is the one table where every
/// list of the snapshot is destructured and its redaction decided.
pub fn redact_in_place(snapshot: &mut Snapshot) {
    // Every field named, none with `..`: a new list in the snapshot does
    // not compile until its redaction is decided here.
    let Snapshot {
        taken_at: _,
        namespaces,
        api_services,
        terminating,
        namespace_content,
        pods,
        leases,
        discovery_failures: _,
        events,
        persistent_volumes,
        nodes,
        validating_webhooks,
        mutating_webhooks,
        webhook_services: _,
        api_service_backends: _,
        // The apiserver's answers to the doctor's dry-runs: evidence, as
        // event messages are.
        webhook_probes: _,
        api_service_probes: _,
        controller_manager_metrics: _,
        deployments,
        stateful_sets,
        daemon_sets,
        replica_sets,
        jobs,
        cron_jobs,
        unreadable: _,
        rbac,
        persistent_volume_claims,
        conversion_webhook_crds,
        load_balancer_services,
    } = snapshot;

    // A Service's spec and status hold no secret: addresses, ports and
    // selectors are what the finding quotes.
    for s in load_balancer_services {
        meta(&mut s.metadata);
    }

    for n in namespaces {
        meta(&mut n.metadata);
    }
    for a in api_services {
        meta(&mut a.metadata);
        if let Some(spec) = &mut a.spec {
            spec.ca_bundle = None;
        }
    }
    for r in terminating.iter_mut().chain(namespace_content.iter_mut()) {
        record(r);
    }
    for p in pods {
        pod(p);
    }
    for l in leases {
        meta(&mut l.metadata);
    }
    for e in events {
        meta(&mut e.metadata);
        // Kubernetes' own components write what they saw (a pull's
        // error, a kill that timed out): the evidence a diagnosis quotes.
        // An operator's event may carry anything it was given.
        // An event written without `reportingComponent` reads back with
        // it empty, not absent: then `source.component` names the reporter.
        let reporter = e
            .reporting_component
            .as_deref()
            .filter(|c| !c.is_empty())
            .or(e.source.as_ref().and_then(|s| s.component.as_deref()));
        if !reporter.is_some_and(|r| KUBERNETES_REPORTERS.contains(&r))
            && let Some(m) = &mut e.message
        {
            *m = format!("<redacted: {} bytes>", m.len());
        }
    }
    for pv in persistent_volumes {
        meta(&mut pv.metadata);
        if let Some(spec) = &mut pv.spec {
            // `mountOptions` may hold credentials (`password=`, a CIFS
            // `credentials=` path, an NFS export's options).
            list(&mut spec.mount_options);
            if let Some(csi) = &mut spec.csi {
                values(&mut csi.volume_attributes);
            }
            if let Some(flex) = &mut spec.flex_volume {
                values(&mut flex.options);
            }
        }
    }
    for n in nodes {
        meta(&mut n.metadata);
        if let Some(status) = &mut n.status {
            status.images = None;
        }
    }
    for w in validating_webhooks {
        meta(&mut w.metadata);
        for h in w.webhooks.iter_mut().flatten() {
            h.client_config.ca_bundle = None;
        }
    }
    for w in mutating_webhooks {
        meta(&mut w.metadata);
        for h in w.webhooks.iter_mut().flatten() {
            h.client_config.ca_bundle = None;
        }
    }
    for d in deployments {
        meta(&mut d.metadata);
        if let Some(spec) = &mut d.spec {
            template(&mut spec.template);
        }
    }
    for s in stateful_sets {
        meta(&mut s.metadata);
        if let Some(spec) = &mut s.spec {
            template(&mut spec.template);
            for claim in spec.volume_claim_templates.iter_mut().flatten() {
                meta(&mut claim.metadata);
            }
        }
    }
    for d in daemon_sets {
        meta(&mut d.metadata);
        if let Some(spec) = &mut d.spec {
            template(&mut spec.template);
        }
    }
    for r in replica_sets {
        meta(&mut r.metadata);
        if let Some(t) = r.spec.as_mut().and_then(|s| s.template.as_mut()) {
            template(t);
        }
    }
    for j in jobs {
        meta(&mut j.metadata);
        if let Some(spec) = &mut j.spec {
            template(&mut spec.template);
        }
    }
    for c in cron_jobs {
        meta(&mut c.metadata);
        if let Some(spec) = c.spec.as_mut().and_then(|s| s.job_template.spec.as_mut()) {
            template(&mut spec.template);
        }
    }
    // Rules and bindings are what the owner verdict reads, and hold no
    // values; their metadata may carry last-applied copies.
    if let Some(rbac) = rbac {
        for r in &mut rbac.roles {
            meta(&mut r.metadata);
        }
        for r in &mut rbac.cluster_roles {
            meta(&mut r.metadata);
        }
        for b in &mut rbac.role_bindings {
            meta(&mut b.metadata);
        }
        for b in &mut rbac.cluster_role_bindings {
            meta(&mut b.metadata);
        }
    }
    for c in persistent_volume_claims.iter_mut().flatten() {
        meta(&mut c.metadata);
    }
    // Schemas are kept: they are the evidence for the conversion verdict.
    for crd in conversion_webhook_crds {
        meta(&mut crd.metadata);
        let webhook = crd
            .spec
            .conversion
            .as_mut()
            .and_then(|c| c.webhook.as_mut());
        if let Some(cc) = webhook.and_then(|w| w.client_config.as_mut()) {
            cc.ca_bundle = None;
        }
    }
}

fn record(r: &mut ObjectRecord) {
    meta(&mut r.metadata);
}

fn pod(p: &mut Pod) {
    meta(&mut p.metadata);
    if let Some(spec) = &mut p.spec {
        pod_spec(spec);
    }
    if let Some(status) = &mut p.status {
        pod_status(status);
    }
}

fn template(t: &mut PodTemplateSpec) {
    if let Some(m) = &mut t.metadata {
        meta(m);
    }
    if let Some(spec) = &mut t.spec {
        pod_spec(spec);
    }
}

fn pod_spec(spec: &mut PodSpec) {
    for c in spec
        .containers
        .iter_mut()
        .chain(spec.init_containers.iter_mut().flatten())
    {
        container(c);
    }
    for c in spec.ephemeral_containers.iter_mut().flatten() {
        ephemeral_container(c);
    }
    for v in spec.volumes.iter_mut().flatten() {
        volume(v);
    }
}

/// The same fields in [`Container`] and [`EphemeralContainer`], two types.
macro_rules! redact_container {
    ($c:expr) => {{
        let c = $c;
        for e in c.env.iter_mut().flatten() {
            if e.value.is_some() {
                e.value = Some(REDACTED.to_owned());
            }
        }
        list(&mut c.args);
        list(&mut c.command);
        c.lifecycle = None;
        c.liveness_probe = None;
        c.readiness_probe = None;
        c.startup_probe = None;
    }};
}

fn container(c: &mut Container) {
    redact_container!(c);
}

fn ephemeral_container(c: &mut EphemeralContainer) {
    redact_container!(c);
}

fn volume(v: &mut Volume) {
    if let Some(csi) = &mut v.csi {
        values(&mut csi.volume_attributes);
    }
    if let Some(flex) = &mut v.flex_volume {
        values(&mut flex.options);
    }
    if let Some(git) = &mut v.git_repo {
        // A repository URL may carry credentials (`https://user:token@...`).
        git.repository = REDACTED.to_owned();
    }
}

fn pod_status(status: &mut PodStatus) {
    let statuses = status
        .init_container_statuses
        .iter_mut()
        .flatten()
        .chain(status.container_statuses.iter_mut().flatten())
        .chain(status.ephemeral_container_statuses.iter_mut().flatten());
    for cs in statuses {
        container_status(cs);
    }
}

fn container_status(cs: &mut ContainerStatus) {
    for state in [&mut cs.state, &mut cs.last_state].into_iter().flatten() {
        if let Some(t) = &mut state.terminated
            && t.message.is_some()
        {
            t.message = Some(REDACTED.to_owned());
        }
        // The kubelet's words for a pull or a back-off are evidence; a
        // runtime's error for a container it could not create or start
        // quotes the command line, arguments included.
        if let Some(w) = &mut state.waiting
            && !w
                .reason
                .as_deref()
                .is_some_and(|r| WAITING_REASONS_KEPT.contains(&r))
            && let Some(m) = &mut w.message
        {
            *m = format!("<redacted: {} bytes>", m.len());
        }
    }
}

/// Components of Kubernetes whose Event messages are kept (the
/// `reportingComponent`, or the older `source.component`).
const KUBERNETES_REPORTERS: &[&str] = &[
    "kubelet",
    "default-scheduler",
    "kube-controller-manager",
    "node-controller",
    "replicaset-controller",
    "deployment-controller",
    "statefulset-controller",
    "daemonset-controller",
    "job-controller",
    "cronjob-controller",
    "persistentvolume-controller",
    "persistentvolume-expander",
    "attachdetach-controller",
    "endpoint-controller",
    "endpointslice-controller",
    "taint-eviction-controller",
    "namespace-controller",
    "garbage-collector-controller",
    "disruption-controller",
    "service-controller",
    "kube-proxy",
];

/// Container waiting reasons whose message (the kubelet's) is kept.
const WAITING_REASONS_KEPT: &[&str] = &[
    "ContainerCreating",
    "PodInitializing",
    "ErrImagePull",
    "ImagePullBackOff",
    "ErrImageNeverPull",
    "InvalidImageName",
    "CrashLoopBackOff",
    "CreateContainerConfigError",
];

/// A non-empty list becomes one marker: how many items there were, or
/// what they were, says nothing the diagnosis needs.
fn list(l: &mut Option<Vec<String>>) {
    if l.as_ref().is_some_and(|l| !l.is_empty()) {
        *l = Some(vec![REDACTED.to_owned()]);
    }
}

/// Keys kept, values replaced.
fn values(m: &mut Option<BTreeMap<String, String>>) {
    for v in m.iter_mut().flat_map(|m| m.values_mut()) {
        *v = REDACTED.to_owned();
    }
}

/// Annotations and managedFields of any object's metadata.
///
/// Annotation values are kept only for keys the doctor itself writes
/// (`unstuck.dev/...`): no diagnosis reads another, and a short value is
/// no safer than a long one (a 40-character token, a one-line
/// `configuration-snippet` with basic auth). The keys stay, with the size.
fn meta(m: &mut ObjectMeta) {
    if let Some(annotations) = &mut m.annotations {
        annotations.remove(LAST_APPLIED);
        for (k, v) in annotations.iter_mut() {
            if !k.starts_with(KEPT_ANNOTATION_PREFIX) && !is_redacted(v) {
                *v = format!("<redacted: {} bytes>", v.len());
            }
        }
    }
    for entry in m.managed_fields.iter_mut().flatten() {
        if let Some(FieldsV1(fields)) = &mut entry.fields_v1 {
            *fields = field_names(fields);
        }
    }
}

/// The annotations whose values are kept: the doctor's own records.
pub const KEPT_ANNOTATION_PREFIX: &str = "unstuck.dev/";

/// A managedFields `fieldsV1` tree cut down to field names: the top-level
/// fields with nothing below them, except `f:metadata`, whose field names
/// stay, with `f:finalizers` whole. Only `f:` keys survive: `k:`, `v:`
/// and `i:` keys are values.
fn field_names(fields: &Value) -> Value {
    let Value::Object(top) = fields else {
        return Value::Object(Default::default());
    };
    let empty = || Value::Object(Default::default());
    let out = top
        .iter()
        .filter(|(k, _)| k.starts_with("f:"))
        .map(|(k, v)| {
            let kept = match (k.as_str(), v) {
                ("f:metadata", Value::Object(meta)) => Value::Object(
                    meta.iter()
                        .filter(|(k, _)| k.starts_with("f:"))
                        .map(|(k, v)| {
                            let v = if k == "f:finalizers" {
                                v.clone()
                            } else {
                                empty()
                            };
                            (k.clone(), v)
                        })
                        .collect(),
                ),
                _ => empty(),
            };
            (k.clone(), kept)
        })
        .collect();
    Value::Object(out)
}

#[cfg(test)]
mod tests;
