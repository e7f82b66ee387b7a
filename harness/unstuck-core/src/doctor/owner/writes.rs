//! Source: the object's own managedFields. A manager named for the owner
//! that wrote to the object in the last two minutes is at work on it (a
//! controller without leader election leaves no Lease, but it does write).
//! Writes by other managers (the kubelet, the user who deleted it) prove
//! nothing about this key's owner and are left out.

use super::{Ctx, RECENT_SECS, fmt_secs, verdict::SourceReport};

pub(super) fn check(ctx: &Ctx) -> SourceReport {
    let mut r = SourceReport::default();
    let Some(meta) = ctx.object else {
        r.checked = "writes: the object's managedFields were not at hand".to_owned();
        return r;
    };
    let mut older = Vec::new();
    let entries = meta.managed_fields.as_deref().unwrap_or_default();
    for m in entries {
        let manager = m.manager.as_deref().unwrap_or_default();
        let Some(how) = ctx.target.named_in(manager) else {
            continue;
        };
        let Some(time) = &m.time else {
            continue;
        };
        let age = ctx.snapshot.age_of(time.0).as_secs();
        let line = format!(
            "manager {manager:?} ({how}) wrote to the object {} ago ({}{})",
            fmt_secs(age),
            m.operation.as_deref().unwrap_or_default(),
            m.subresource
                .as_deref()
                .map(|s| format!(" {s}"))
                .unwrap_or_default()
        );
        if age <= RECENT_SECS {
            r.alive.push(line);
        } else {
            older.push(line);
        }
    }
    r.checked = format!(
        "writes: no manager named for {} wrote to the object in the last 2 minutes ({} managedFields entries checked){}",
        ctx.target.describe(),
        entries.len(),
        if older.is_empty() {
            String::new()
        } else {
            format!("; only {}", older.join("; "))
        }
    );
    r
}
