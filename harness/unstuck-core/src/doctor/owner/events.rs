//! Source: Events reported by a component named for the owner. One from
//! the last two minutes shows it running; one from the last ten minutes
//! shows it was running a moment ago and may be restarting (`Unknown`).

use k8s_openapi::api::core::v1::Event;
use k8s_openapi::jiff::Timestamp;

use super::{Ctx, INSTALLED_SECS, RECENT_SECS, fmt_secs, unreadable, verdict::SourceReport};
use crate::text::quoted;

pub(super) fn when(e: &Event) -> Option<Timestamp> {
    e.series
        .as_ref()
        .and_then(|s| s.last_observed_time.as_ref())
        .map(|t| t.0)
        .or_else(|| e.last_timestamp.as_ref().map(|t| t.0))
        .or_else(|| e.event_time.as_ref().map(|t| t.0))
        .or_else(|| e.first_timestamp.as_ref().map(|t| t.0))
        .or_else(|| e.metadata.creation_timestamp.as_ref().map(|t| t.0))
}

pub(super) fn check(ctx: &Ctx) -> SourceReport {
    let s = ctx.snapshot;
    let mut r = SourceReport {
        unreadable: unreadable(s, "events", "v1"),
        ..SourceReport::default()
    };
    let mut older = 0;
    for e in &s.events {
        let reporters = [
            e.source.as_ref().and_then(|s| s.component.as_deref()),
            e.reporting_component.as_deref(),
        ];
        let Some((reporter, how)) = reporters
            .into_iter()
            .flatten()
            .find_map(|c| ctx.target.named_in(c).map(|m| (c, m)))
        else {
            continue;
        };
        let Some(at) = when(e) else {
            continue;
        };
        let age = s.age_of(at).as_secs();
        let o = &e.involved_object;
        let line = format!(
            "event {} {} from {reporter} ({how}) about {} {}, {} ago",
            e.type_.as_deref().unwrap_or_default(),
            quoted(e.reason.as_deref().unwrap_or_default()),
            o.kind.as_deref().unwrap_or_default(),
            o.name.as_deref().unwrap_or_default(),
            fmt_secs(age),
            reporter = quoted(reporter)
        );
        if age <= RECENT_SECS {
            r.alive.push(line);
        } else if age < INSTALLED_SECS {
            r.installed.push(format!(
                "{line}: reported less than 10 minutes ago, it may be restarting"
            ));
        } else {
            older += 1;
        }
    }
    r.checked = format!(
        "events: none in the last 10 minutes from a component named for {} ({} events checked{})",
        ctx.target.describe(),
        s.events.len(),
        if older > 0 {
            format!(", {older} older ones from it")
        } else {
            String::new()
        }
    );
    r
}

/// Reporters that are Kubernetes' own components: their events are about
/// their own work (a kubelet killing a container, the scheduler placing a
/// pod), whose keys the built-in table judges.
const CONTROL_PLANE_REPORTERS: &[&str] = &[
    "kubelet",
    "default-scheduler",
    "kube-scheduler",
    "kube-controller-manager",
    "kube-apiserver",
    "kube-proxy",
    "cloud-controller-manager",
    "deployment-controller",
    "replicaset-controller",
    "statefulset-controller",
    "daemonset-controller",
    "job-controller",
    "cronjob-controller",
    "endpoint-controller",
    "endpoint-slice-controller",
    "endpoint-slice-mirroring-controller",
    "namespace-controller",
    "persistentvolume-controller",
    "persistentvolume-expander",
    "attachdetach-controller",
    "garbage-collector-controller",
    "horizontal-pod-autoscaler",
    "disruption-controller",
    "service-controller",
    "node-controller",
    "node-lifecycle-controller",
    "taint-eviction-controller",
    "ttl-after-finished-controller",
    "resource-claim-controller",
    "pvc-protection-controller",
    "pv-protection-controller",
    "cidrallocator",
    "route-controller",
];

/// Whether event `e` is about the object `meta` of `kind` (by UID when
/// both sides have one, else by kind, namespace and name).
pub(super) fn is_about(
    e: &Event,
    kind: &str,
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> bool {
    let o = &e.involved_object;
    match (o.uid.as_deref(), meta.uid.as_deref()) {
        (Some(a), Some(b)) => a == b,
        _ => {
            o.kind.as_deref() == Some(kind)
                && o.name == meta.name
                && o.namespace.as_deref().unwrap_or_default()
                    == meta.namespace.as_deref().unwrap_or_default()
        }
    }
}

/// Source: Events about the object itself, from any reporter that is not
/// Kubernetes' own nor unstuck: whoever reports on it is acting on it,
/// whatever it is called. One in the last ten minutes keeps the key from
/// `Dead` (`Unknown`): a reporter need not be the key's owner (a policy
/// engine reports on what it checks), so this alone never makes it
/// `Alive`; one from a reporter named for the key does, in [`check`].
pub(super) fn about_object(ctx: &Ctx) -> SourceReport {
    let s = ctx.snapshot;
    let mut r = SourceReport {
        unreadable: unreadable(s, "events", "v1"),
        ..SourceReport::default()
    };
    let Some(record) = ctx.record else {
        r.unreadable = Some("events: the object was not at hand".to_owned());
        return r;
    };
    let mut about = 0;
    for e in s
        .events
        .iter()
        .filter(|e| is_about(e, &record.kind, &record.metadata))
    {
        about += 1;
        let reporter = e
            .reporting_component
            .as_deref()
            .filter(|c| !c.is_empty())
            .or_else(|| e.source.as_ref().and_then(|s| s.component.as_deref()))
            .unwrap_or_default();
        if reporter.is_empty()
            || CONTROL_PLANE_REPORTERS.contains(&reporter)
            || reporter.starts_with("unstuck")
            || ctx.target.named_in(reporter).is_some()
        {
            continue;
        }
        let Some(at) = when(e) else {
            continue;
        };
        let age = s.age_of(at).as_secs();
        if age < INSTALLED_SECS {
            r.installed.push(format!(
                "event {} {} about the object from {}, {} ago: {reporter} acts on it",
                e.type_.as_deref().unwrap_or_default(),
                quoted(e.reason.as_deref().unwrap_or_default()),
                quoted(reporter),
                fmt_secs(age)
            ));
        }
    }
    r.checked = format!(
        "events about the object: none in the last 10 minutes from a reporter other than Kubernetes' own ({about} about it, {} checked)",
        s.events.len()
    );
    r
}
