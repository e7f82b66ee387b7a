//! The node doctor's I/O for a frozen pod cgroup: read the freezer of
//! every cgroup of the pod ([`cgroup_facts`]), thaw what the plan names
//! ([`thaw`]), and after the pod left, say whether any cgroup of it is
//! still frozen ([`proof`]).

use unstuck_core::doctor::node::{CgroupFact, ThawTarget};

use crate::node::{Node, cgroup};

/// The pod's cgroups and those above it; empty (and a warning) when the
/// node cannot say, as for every other best-effort fact.
pub(super) async fn cgroup_facts(node: &dyn Node, uid: &str) -> Vec<CgroupFact> {
    match cgroup::pod_cgroups(node, uid).await {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!("cannot read the cgroups of pod {uid}: {e}");
            Vec::new()
        }
    }
}

/// Thaws each target that is still frozen by a write to it, outermost
/// first, and reads it back. `ok` is whether every one reads thawed.
pub(super) async fn thaw(node: &dyn Node, targets: &[ThawTarget]) -> (bool, Vec<String>) {
    let mut ok = true;
    let mut lines = Vec::new();
    for t in targets {
        let before = match cgroup::read_cgroup(node, &t.path, t.version).await {
            Ok(c) => c,
            Err(e) => {
                ok = false;
                lines.push(format!("reading {}: {e}", t.path.display()));
                continue;
            }
        };
        if !before.frozen_here() {
            lines.push(format!(
                "{} is no longer frozen by a write to it ({}); left alone",
                t.path.display(),
                before.quote()
            ));
            continue;
        }
        lines.push(
            match cgroup::set_frozen(node, &t.path, t.version, false).await {
                Ok(after) => format!(
                    "wrote {}: now {} (was {})",
                    t.describe(),
                    after.quote(),
                    before.quote()
                ),
                Err(e) => {
                    ok = false;
                    format!("thawing {}: {e}", t.path.display())
                }
            },
        );
    }
    (ok, lines)
}

/// What [`proof`] found of the pod's cgroups after it left.
pub(super) enum Proof {
    /// None is frozen: the line for the report's proof.
    Thawed(String),
    /// Still frozen, or unreadable: the report's leftovers.
    Left(Vec<String>),
}

/// After the pod left the API: its cgroups that are still frozen (the
/// kubelet removes a deleted pod's cgroups in its housekeeping, so most
/// are simply gone).
pub(super) async fn proof(node: &dyn Node, uid: &str) -> Proof {
    let cgroups = match cgroup::pod_cgroups(node, uid).await {
        Ok(c) => c,
        Err(e) => return Proof::Left(vec![format!("reading the pod's cgroups: {e}")]),
    };
    let frozen: Vec<String> = cgroups
        .iter()
        .filter(|c| c.is_frozen())
        .map(|c| format!("cgroup {} still frozen ({})", c.path.display(), c.quote()))
        .collect();
    if !frozen.is_empty() {
        return Proof::Left(frozen);
    }
    let own = cgroups
        .iter()
        .filter(|c| {
            c.role(uid)
                .is_some_and(|r| r != unstuck_core::doctor::node::freezer::CgroupRole::Ancestor)
        })
        .count();
    Proof::Thawed(if own == 0 {
        "no cgroup of the pod is left on the node (the kubelet removed them)".to_owned()
    } else {
        format!("none of the pod's {own} remaining cgroup(s) is frozen")
    })
}
