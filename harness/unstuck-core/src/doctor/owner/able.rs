//! Source: what could remove the key, whatever it is called. Every
//! ServiceAccount RBAC lets `update` or `patch` the object ([`rbac`]), and
//! what runs as it: pods that are not finished, and workloads whose pod
//! template uses it.
//!
//! How a grant counts:
//! - a Running and Ready pod whose grant names the object's own API group,
//!   when that group is not one of Kubernetes' own (a CRD's group: the
//!   rights an operator's ClusterRole gives it on its resources), shows the
//!   owner running: `Alive`;
//! - a pod whose grant covers every group (`apiGroups: ["*"]`: a
//!   cluster-admin binding, a GitOps controller such as Argo CD's) could
//!   remove any finalizer but is no sign that it serves this one; a pod
//!   with rights on a built-in type (ConfigMaps, Namespaces, Pods: rights
//!   many operators hold) likewise. Either keeps the key `Unknown`, named
//!   so a person can confirm and use `--assume-dead`;
//! - a pod that is starting or not Ready, or a workload with no pod
//!   running, shows the owner installed but not running: `Unknown`.
//!
//! A pod that carries the key in its own finalizers waits on the owner
//! rather than serving it, and is left out.
//!
//! [`rbac`]: super::rbac

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::{
    Ctx,
    builtin::pod_running_ready,
    rbac::{Breadth, Grant, Request},
    verdict::SourceReport,
};
use crate::doctor::model::{Snapshot, display_name};
use crate::text::quoted;

/// RBAC's resources, as the collector records them when it cannot list them.
const RBAC_RESOURCES: [&str; 4] = [
    "roles.rbac.authorization.k8s.io",
    "clusterroles.rbac.authorization.k8s.io",
    "rolebindings.rbac.authorization.k8s.io",
    "clusterrolebindings.rbac.authorization.k8s.io",
];

/// Whether `group` is one of Kubernetes' own API groups, whose types
/// many unrelated controllers have rights on.
pub(super) fn built_in_group(group: &str) -> bool {
    group.is_empty() || !group.contains('.') || group.ends_with(".k8s.io") || group == "k8s.io"
}

fn service_account(spec: Option<&PodSpec>) -> &str {
    spec.and_then(|s| {
        s.service_account_name
            .as_deref()
            .or(s.service_account.as_deref())
    })
    .filter(|s| !s.is_empty())
    .unwrap_or("default")
}

fn finished(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

fn waits_on(meta: &ObjectMeta, key: &str) -> bool {
    meta.finalizers.iter().flatten().any(|f| f == key)
}

/// The fresh Lease `pod` holds, if any: client-go's and controller-runtime's
/// leader election put the pod's host name (its name) first in the holder
/// identity.
fn held_lease(snapshot: &Snapshot, pod: &Pod) -> Option<String> {
    let name = pod.metadata.name.as_deref()?;
    snapshot.fresh_leases().find_map(|l| {
        let holder = l.spec.as_ref()?.holder_identity.as_deref()?;
        let held = holder == name
            || holder
                .strip_prefix(name)
                .is_some_and(|rest| rest.starts_with(['_', '-']));
        held.then(|| {
            format!(
                "it holds the fresh lease {} (holder {holder}, renewed {})",
                display_name(&l.metadata),
                super::leases::renew_age(snapshot, l),
                holder = quoted(holder)
            )
        })
    })
}

fn request_text(req: &Request) -> String {
    if req.group.is_empty() {
        req.resource.to_owned()
    } else {
        format!("{}.{}", req.resource, req.group)
    }
}

fn grant_text(g: &Grant, req: &Request) -> String {
    format!(
        "may update {} by {} -> {} ({})",
        request_text(req),
        g.binding,
        g.role,
        g.rule
    )
}

pub(super) fn check(ctx: &Ctx, req: Option<&Request>) -> SourceReport {
    let s = ctx.snapshot;
    let mut r = SourceReport::default();
    let Some(req) = req else {
        r.unreadable = Some(
            "rbac: the object's resource was not at hand, so what could remove the key was not asked".to_owned(),
        );
        return r;
    };
    if let Some(u) = s
        .unreadable
        .iter()
        .find(|u| RBAC_RESOURCES.contains(&u.resource.as_str()))
    {
        r.unreadable = Some(format!(
            "rbac: {} could not be read ({}), so what could remove the key is not known",
            u.resource, u.message
        ));
        return r;
    }
    let Some(rbac) = &s.rbac else {
        r.unreadable = Some(
            "rbac: the cluster's Roles and bindings are not in this snapshot, so what could remove the key is not known".to_owned(),
        );
        return r;
    };
    let grants = rbac.grants(req);
    let specific_group = !built_in_group(req.group);
    // One line per pod, from its narrowest grant.
    let mut pods: BTreeMap<String, (String, bool)> = BTreeMap::new();
    let mut used_accounts = 0;
    for g in &grants.to_service_accounts {
        let mut any = false;
        for pod in s.pods.iter().filter(|p| !finished(p)) {
            let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
            let sa = service_account(pod.spec.as_ref());
            if !g.grantee.covers(ns, sa) || waits_on(&pod.metadata, ctx.finalizer) {
                continue;
            }
            any = true;
            let name = display_name(&pod.metadata);
            if pods.contains_key(&name) {
                continue;
            }
            let (line, alive) = pod_line(ctx, g, req, pod, &name, specific_group);
            pods.insert(name, (line, alive));
        }
        if any {
            used_accounts += 1;
            continue;
        }
        // Nothing runs as it: a workload that would (scaled to zero, its
        // pods not yet made) shows the owner installed.
        if let super::rbac::Grantee::ServiceAccount { namespace, name } = &g.grantee {
            for (kind, meta, spec) in workload_templates(s) {
                if meta.namespace.as_deref() == Some(namespace.as_str())
                    && service_account(spec) == name
                    && !waits_on(meta, ctx.finalizer)
                {
                    r.installed.push(format!(
                        "{kind} {} would run as ServiceAccount {namespace}/{name}, which {}, but no pod of it runs",
                        display_name(meta),
                        grant_text(g, req)
                    ));
                }
            }
        }
    }
    for (_, (line, alive)) in pods {
        if alive {
            r.alive.push(line);
        } else {
            r.installed.push(line);
        }
    }
    // An owner outside the cluster is seen only as a subject of a grant:
    // no pod, no Lease. A grant that names the object's group keeps the
    // key Unknown until a person confirms that identity is not its owner.
    for g in &grants.to_outside {
        r.installed.push(format!(
            "{} may update {} by {} -> {} ({}): an identity outside the cluster (a controller in another cluster or machine) may be the owner, acting from there; confirm it is not, then --assume-dead {}",
            g.subject,
            request_text(req),
            g.binding,
            g.role,
            g.rule,
            ctx.finalizer
        ));
    }
    // A ServiceAccount nothing here runs as may still have its token used
    // from outside; one granted rights on a group that is not Kubernetes'
    // own (an operator's CRDs) is that operator's identity.
    if specific_group {
        for g in grants
            .to_service_accounts
            .iter()
            .filter(|g| g.breadth != Breadth::Wildcard)
        {
            let super::rbac::Grantee::ServiceAccount { namespace, name } = &g.grantee else {
                continue;
            };
            // A namespace that is no longer there holds no ServiceAccount,
            // and so no token (the binding is a leftover of an uninstall).
            let namespace_gone = !s.namespaces.is_empty()
                && !s.unreadable.iter().any(|u| u.resource == "namespaces")
                && s.namespace(namespace).is_none();
            if namespace_gone {
                continue;
            }
            let runs = s.pods.iter().filter(|p| !finished(p)).any(|p| {
                p.metadata.namespace.as_deref() == Some(namespace.as_str())
                    && service_account(p.spec.as_ref()) == name
            });
            if !runs
                && !r
                    .installed
                    .iter()
                    .any(|l| l.contains(&format!("ServiceAccount {namespace}/{name},")))
            {
                r.installed.push(format!(
                    "ServiceAccount {namespace}/{name} {}, and no pod here runs as it: its token may be used from outside the cluster; confirm it is not, then --assume-dead {}",
                    grant_text(g, req),
                    ctx.finalizer
                ));
            }
        }
    }
    let others = if grants.to_others.is_empty() {
        String::new()
    } else {
        format!(
            "; outside the cluster {} also may (their writes would show in managedFields)",
            grants.to_others.join(", ")
        )
    };
    r.checked = format!(
        "rbac: {} grant(s) of update/patch on {}{} to ServiceAccounts; no pod or workload runs as any of them ({} with pods){others}",
        grants.to_service_accounts.len(),
        req.resource,
        if req.group.is_empty() {
            String::new()
        } else {
            format!(".{}", req.group)
        },
        used_accounts,
    );
    r
}

/// What one pod running as a granted ServiceAccount shows: its line and
/// whether it argues the owner alive (Running and Ready, with a grant that
/// names the object's own, non-built-in group).
fn pod_line(
    ctx: &Ctx,
    g: &super::rbac::Grant,
    req: &Request,
    pod: &k8s_openapi::api::core::v1::Pod,
    name: &str,
    specific_group: bool,
) -> (String, bool) {
    let s = ctx.snapshot;
    let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
    let sa = service_account(pod.spec.as_ref());
    let ready = pod_running_ready(pod);
    let lease = held_lease(s, pod);
    let state = if ready {
        "is Running and Ready".to_owned()
    } else {
        format!(
            "is {} and not Ready (starting, restarting or failing)",
            pod.status
                .as_ref()
                .and_then(|st| st.phase.as_deref())
                .unwrap_or("in no phase yet")
        )
    };
    let mut line = format!(
        "pod {name} {state}, running as ServiceAccount {ns}/{sa}, which {}",
        grant_text(g, req)
    );
    let alive = ready && specific_group && g.breadth != Breadth::Wildcard;
    if let Some(l) = lease {
        line.push_str(&format!("; {l}"));
    }
    if ready && !alive {
        line.push_str(&format!(
            "; {} it could remove {}, but that is no sign it serves it: confirm, then --assume-dead {}",
            if g.breadth == Breadth::Wildcard {
                "with rights on every API group"
            } else {
                "with rights on a built-in type"
            },
            ctx.finalizer,
            ctx.finalizer
        ));
    }
    (line, alive)
}

type Template<'a> = (&'static str, &'a ObjectMeta, Option<&'a PodSpec>);

fn workload_templates(s: &Snapshot) -> impl Iterator<Item = Template<'_>> {
    let d = s.deployments.iter().map(|w| {
        (
            "Deployment",
            &w.metadata,
            w.spec.as_ref().and_then(|x| x.template.spec.as_ref()),
        )
    });
    let st = s.stateful_sets.iter().map(|w| {
        (
            "StatefulSet",
            &w.metadata,
            w.spec.as_ref().and_then(|x| x.template.spec.as_ref()),
        )
    });
    let ds = s.daemon_sets.iter().map(|w| {
        (
            "DaemonSet",
            &w.metadata,
            w.spec.as_ref().and_then(|x| x.template.spec.as_ref()),
        )
    });
    // A ReplicaSet makes pods for whatever owns it (a Deployment, an Argo
    // Rollout, an operator in the middle of an upgrade).
    // One a Deployment owns is that Deployment's, listed above.
    let rs = s
        .replica_sets
        .iter()
        .filter(|w| !owned_by_deployment(&w.metadata))
        .map(|w| {
            (
                "ReplicaSet",
                &w.metadata,
                w.spec
                    .as_ref()
                    .and_then(|x| x.template.as_ref())
                    .and_then(|t| t.spec.as_ref()),
            )
        });
    // A Job that has not finished makes pods again; a CronJob makes Jobs
    // on its schedule, with no pod between runs.
    let jobs = s.jobs.iter().filter(|j| !job_finished(j)).map(|w| {
        (
            "Job",
            &w.metadata,
            w.spec.as_ref().and_then(|x| x.template.spec.as_ref()),
        )
    });
    let cron = s.cron_jobs.iter().map(|w| {
        (
            "CronJob",
            &w.metadata,
            w.spec
                .as_ref()
                .and_then(|x| x.job_template.spec.as_ref())
                .and_then(|j| j.template.spec.as_ref()),
        )
    });
    d.chain(st).chain(ds).chain(rs).chain(jobs).chain(cron)
}

fn owned_by_deployment(meta: &ObjectMeta) -> bool {
    meta.owner_references
        .iter()
        .flatten()
        .any(|o| o.kind == "Deployment" && o.api_version == "apps/v1")
}

/// A Job whose `Complete` or `Failed` condition is true makes no pod again.
fn job_finished(job: &k8s_openapi::api::batch::v1::Job) -> bool {
    job.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| {
            c.iter()
                .any(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True")
        })
}
