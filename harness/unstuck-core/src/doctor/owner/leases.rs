//! Source: leader-election Leases. A fresh lease naming the owner shows it
//! running; one that went stale less than ten minutes ago shows it
//! installed and perhaps restarting (`Unknown`); an older one is only
//! reported.

use k8s_openapi::api::coordination::v1::Lease;

use super::{Ctx, INSTALLED_SECS, fmt_secs, unreadable, verdict::SourceReport};
use crate::doctor::model::{Snapshot, display_name};
use crate::text::quoted;

/// What in a lease names the target: its name (the domain rule:
/// controller-runtime IDs look like `8d3f5d2a.example.com`), or a product
/// word in its name or holder.
fn names(ctx: &Ctx, lease: &Lease) -> Option<String> {
    let name = lease.metadata.name.as_deref().unwrap_or_default();
    let holder = lease
        .spec
        .as_ref()
        .and_then(|s| s.holder_identity.as_deref())
        .unwrap_or_default();
    for d in &ctx.target.domains {
        if name == d || name.ends_with(&format!(".{d}")) || name.ends_with(&format!("-{d}")) {
            return Some(format!("its name matches {d}"));
        }
        if holder.contains(d.as_str()) {
            return Some(format!(
                "its holderIdentity {holder} contains {d}",
                holder = quoted(holder)
            ));
        }
    }
    if let Some(m) = ctx.target.named_in(name) {
        return Some(format!("its name carries the {m}"));
    }
    ctx.target.named_in(holder).map(|m| {
        format!(
            "its holderIdentity {holder} carries the {m}",
            holder = quoted(holder)
        )
    })
}

pub(super) fn check(ctx: &Ctx) -> SourceReport {
    let snapshot = ctx.snapshot;
    let mut r = SourceReport {
        unreadable: unreadable(
            snapshot,
            "leases.coordination.k8s.io",
            "coordination.k8s.io/v1",
        ),
        ..SourceReport::default()
    };
    let mut old = Vec::new();
    // Node heartbeats are named after nodes, not controllers.
    for lease in snapshot
        .leases
        .iter()
        .filter(|l| l.metadata.namespace.as_deref() != Some("kube-node-lease"))
    {
        let Some(how) = names(ctx, lease) else {
            continue;
        };
        let holder = lease
            .spec
            .as_ref()
            .and_then(|s| s.holder_identity.as_deref())
            .unwrap_or_default();
        let line = format!(
            "lease {} ({how}; holder {holder}, renewed {})",
            display_name(&lease.metadata),
            renew_age(snapshot, lease),
            holder = quoted(holder)
        );
        let renewed_secs = lease
            .spec
            .as_ref()
            .and_then(|s| s.renew_time.as_ref())
            .map(|t| snapshot.age_of(t.0).as_secs());
        if snapshot.lease_is_fresh(lease) {
            r.alive.push(format!("fresh {line}"));
        } else if renewed_secs.is_some_and(|s| s < INSTALLED_SECS) {
            r.installed.push(format!(
                "stale {line}: stale for less than 10 minutes, its holder may be restarting"
            ));
        } else {
            old.push(format!("stale {line}"));
        }
    }
    let words = if ctx.target.words.is_empty() {
        String::new()
    } else {
        format!(
            " (nor does a name or holder carry the word {})",
            ctx.target.words.join(" or ")
        )
    };
    r.checked = format!(
        "leases: no fresh lease names {}; {} leases checked{words}, none stale for less than 10 minutes{}",
        ctx.target.domains.join(" or "),
        snapshot.leases.len(),
        if old.is_empty() {
            String::new()
        } else {
            format!("; only {}", old.join("; "))
        }
    );
    r
}

/// When `lease` was last renewed, in words (`4s ago`, `never`).
pub(super) fn renew_age(snapshot: &Snapshot, lease: &Lease) -> String {
    match lease.spec.as_ref().and_then(|s| s.renew_time.as_ref()) {
        Some(t) => format!("{} ago", fmt_secs(snapshot.age_of(t.0).as_secs())),
        None => "never".to_owned(),
    }
}
