//! Sources: Deployments, StatefulSets, DaemonSets and pods whose name,
//! labels, service account or images name the owner. One with a ready
//! replica (a pod Running and Ready) shows it running; one with none
//! (scaled to zero, crash-looping, pending) shows it installed but not
//! running (`Unknown`).
//!
//! Left out: anything that carries the key in its own finalizers (the
//! stuck object among them: it is what waits, not what serves), and
//! finished pods.

use std::collections::BTreeMap;

use k8s_openapi::{
    api::core::v1::{Pod, PodSpec},
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};

use super::{Ctx, builtin::pod_running_ready, unreadable, verdict::SourceReport};
use crate::doctor::model::{container_statuses, display_name};

/// What in an object and its pod template names the target.
fn names(
    ctx: &Ctx,
    meta: &ObjectMeta,
    spec: Option<&PodSpec>,
    template_labels: Option<&BTreeMap<String, String>>,
) -> Option<String> {
    let t = ctx.target;
    if let Some(m) = meta.name.as_deref().and_then(|n| t.named_in(n)) {
        return Some(format!("its name carries the {m}"));
    }
    for labels in [meta.labels.as_ref(), template_labels]
        .into_iter()
        .flatten()
    {
        for (k, v) in labels {
            if let Some(m) = t.named_in(v).or_else(|| t.named_in(k)) {
                return Some(format!("its label {k}={v} carries the {m}"));
            }
        }
    }
    let spec = spec?;
    if let Some(sa) = spec.service_account_name.as_deref()
        && let Some(m) = t.named_in(sa)
    {
        return Some(format!("its service account {sa} carries the {m}"));
    }
    spec.init_containers
        .iter()
        .flatten()
        .chain(spec.containers.iter())
        .filter_map(|c| c.image.as_deref())
        .find_map(|image| {
            t.named_in(without_registry(image))
                .map(|m| format!("its image {image} carries the {m}"))
        })
}

/// An image reference without its registry host (Docker's rule: a first
/// component with a `.` or `:`, or `localhost`): where an image is stored
/// (`quay.io`, a cluster's local registry) says nothing about what it is.
fn without_registry(image: &str) -> &str {
    match image.split_once('/') {
        Some((host, rest)) if host.contains(['.', ':']) || host == "localhost" => rest,
        _ => image,
    }
}

/// Whether `meta` waits on the same key (the stuck object among them).
fn excluded(ctx: &Ctx, meta: &ObjectMeta) -> bool {
    meta.finalizers.iter().flatten().any(|f| f == ctx.finalizer)
}

pub(super) fn check_workloads(ctx: &Ctx) -> SourceReport {
    let s = ctx.snapshot;
    let mut r = SourceReport {
        unreadable: [
            ("deployments.apps", "apps/v1"),
            ("statefulsets.apps", "apps/v1"),
            ("daemonsets.apps", "apps/v1"),
        ]
        .iter()
        .find_map(|(res, gv)| unreadable(s, res, gv)),
        ..SourceReport::default()
    };
    let mut judge = |kind: &str,
                     meta: &ObjectMeta,
                     spec: Option<&PodSpec>,
                     labels: Option<&BTreeMap<String, String>>,
                     ready: i32,
                     want: i32| {
        if excluded(ctx, meta) {
            return;
        }
        let Some(how) = names(ctx, meta, spec, labels) else {
            return;
        };
        let deleting = if meta.deletion_timestamp.is_some() {
            ", itself being deleted"
        } else {
            ""
        };
        let line = format!(
            "{kind} {} ({how}) has {ready}/{want} ready{deleting}",
            display_name(meta)
        );
        if ready > 0 && meta.deletion_timestamp.is_none() {
            r.alive.push(line);
        } else {
            r.installed
                .push(format!("{line}: installed but not shown running"));
        }
    };
    // Deployments and StatefulSets: two API types with the same fields.
    macro_rules! judge_replicated {
        ($list:expr, $kind:literal) => {
            for d in $list {
                let spec = d.spec.as_ref();
                let st = d.status.as_ref();
                judge(
                    $kind,
                    &d.metadata,
                    spec.and_then(|s| s.template.spec.as_ref()),
                    spec.and_then(|s| s.template.metadata.as_ref())
                        .and_then(|m| m.labels.as_ref()),
                    st.and_then(|s| s.ready_replicas).unwrap_or(0),
                    spec.and_then(|s| s.replicas).unwrap_or(1),
                );
            }
        };
    }
    judge_replicated!(&s.deployments, "Deployment");
    judge_replicated!(&s.stateful_sets, "StatefulSet");
    for d in &s.daemon_sets {
        let spec = d.spec.as_ref();
        let st = d.status.as_ref();
        judge(
            "DaemonSet",
            &d.metadata,
            spec.and_then(|s| s.template.spec.as_ref()),
            spec.and_then(|s| s.template.metadata.as_ref())
                .and_then(|m| m.labels.as_ref()),
            st.map(|s| s.number_ready).unwrap_or(0),
            st.map(|s| s.desired_number_scheduled).unwrap_or(0),
        );
    }
    r.checked = format!(
        "workloads: no Deployment, StatefulSet or DaemonSet names {} ({} checked)",
        ctx.target.describe(),
        s.deployments.len() + s.stateful_sets.len() + s.daemon_sets.len()
    );
    r
}

/// A pod's state in a few words: `Running, not Ready; container manager
/// waiting CrashLoopBackOff, 5 restarts`.
fn pod_state(pod: &Pod) -> String {
    let Some(status) = &pod.status else {
        return "no status".to_owned();
    };
    let mut out = status
        .phase
        .clone()
        .unwrap_or_else(|| "no phase".to_owned());
    out.push_str(if pod_running_ready(pod) {
        ", Ready"
    } else {
        ", not Ready"
    });
    for c in container_statuses(status) {
        let waiting = c
            .state
            .as_ref()
            .and_then(|s| s.waiting.as_ref())
            .and_then(|w| w.reason.as_deref());
        if waiting.is_some() || c.restart_count > 0 {
            out.push_str(&format!(
                "; container {}{}, {} restarts",
                c.name,
                waiting.map(|w| format!(" waiting {w}")).unwrap_or_default(),
                c.restart_count
            ));
        }
    }
    out
}

pub(super) fn check_pods(ctx: &Ctx) -> SourceReport {
    let s = ctx.snapshot;
    let mut r = SourceReport {
        unreadable: unreadable(s, "pods", "v1"),
        ..SourceReport::default()
    };
    let mut finished = 0;
    for pod in &s.pods {
        if excluded(ctx, &pod.metadata) {
            continue;
        }
        let Some(how) = names(ctx, &pod.metadata, pod.spec.as_ref(), None) else {
            continue;
        };
        let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
        if matches!(phase, Some("Succeeded" | "Failed")) {
            finished += 1;
            continue;
        }
        let deleting = pod.metadata.deletion_timestamp.is_some();
        let line = format!(
            "pod {} ({how}) is {}{}",
            display_name(&pod.metadata),
            pod_state(pod),
            if deleting {
                ", itself being deleted"
            } else {
                ""
            }
        );
        if pod_running_ready(pod) && !deleting {
            r.alive.push(line);
        } else {
            r.installed
                .push(format!("{line}: installed but not shown running"));
        }
    }
    r.checked = format!(
        "pods: none running or starting names {} ({} pods checked{})",
        ctx.target.describe(),
        s.pods.len(),
        if finished > 0 {
            format!(", {finished} finished ones that do name it left out")
        } else {
            String::new()
        }
    );
    r
}

#[cfg(test)]
mod tests {
    use super::without_registry;

    #[test]
    fn registry_hosts_are_not_names() {
        assert_eq!(
            without_registry("unstuck.local/busybox:1.35"),
            "busybox:1.35"
        );
        assert_eq!(
            without_registry("quay.io/jetstack/cert-manager-controller:v1.16.1"),
            "jetstack/cert-manager-controller:v1.16.1"
        );
        assert_eq!(without_registry("localhost:5000/kiali"), "kiali");
        assert_eq!(
            without_registry("kiali/kiali-operator"),
            "kiali/kiali-operator"
        );
        assert_eq!(without_registry("busybox"), "busybox");
    }
}
