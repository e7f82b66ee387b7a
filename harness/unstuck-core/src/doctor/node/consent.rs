//! What a person's yes to a node plan covers.
//!
//! On the local provider the node is the person's own machine: a kill, an
//! unmount, a daemon restart there are consented like an API write. The
//! dry run prints each stuck pod's ladder; `--apply` then climbs it one
//! rung at a time with a fresh look between rungs, and a fresh look plans
//! the ladder again. A rung it plans is taken only when the plan shown
//! covers it: the same remedy, on targets the person saw. A process is
//! its PID *and* its start time (a PID reused by another process is not
//! the one shown); paths and cgroups must each have been shown; a restart
//! of the kubelet or of the runtime is one thing whenever it was shown.
//! Waiting for the kubelet changes nothing on the node, so a wait the
//! plan shows is covered whatever time its retry is now announced for.

use super::plan::{NodeRemedy, NodeStep};

/// How much of a rung a fresh look planned the ladder shown covers.
#[derive(Clone, Debug, PartialEq)]
pub enum Covered {
    /// All of it.
    Whole,
    /// Only this part: the rung on the targets that were shown. What it
    /// leaves out (a process started since, say a shell loop's next
    /// `sleep`) is named in `left`.
    Part { step: NodeStep, left: Vec<String> },
    /// None of it: another remedy, or only targets nobody was shown.
    Not,
}

/// How much of `step` (a rung a fresh look planned during `--apply`)
/// `shown` (the ladder printed before the question) covers.
pub fn covered(shown: &[NodeStep], step: &NodeStep) -> Covered {
    shown
        .iter()
        .filter(|s| s.force == step.force)
        .map(|s| narrow(&s.remedy, step))
        .min_by_key(|c| match c {
            Covered::Whole => 0,
            Covered::Part { left, .. } => left.len(),
            Covered::Not => usize::MAX,
        })
        .unwrap_or(Covered::Not)
}

/// Whether `shown` covers all of `step`.
pub fn shown_covers(shown: &[NodeStep], step: &NodeStep) -> bool {
    covered(shown, step) == Covered::Whole
}

fn narrow(shown: &NodeRemedy, planned: &NodeStep) -> Covered {
    /// The planned targets that were shown, and the others described.
    fn split<T: PartialEq + Clone>(
        planned: &[T],
        shown: &[T],
        say: impl Fn(&T) -> String,
    ) -> (Vec<T>, Vec<String>) {
        let (kept, left): (Vec<&T>, Vec<&T>) = planned.iter().partition(|p| shown.contains(p));
        (
            kept.into_iter().cloned().collect(),
            left.into_iter().map(say).collect(),
        )
    }
    /// The rung on `remedy`'s targets, the shown ones (`nothing` when
    /// none of them was shown).
    fn part(planned: &NodeStep, remedy: NodeRemedy, nothing: bool, left: Vec<String>) -> Covered {
        if nothing {
            return Covered::Not;
        }
        if left.is_empty() {
            return Covered::Whole;
        }
        Covered::Part {
            step: NodeStep {
                remedy,
                ..planned.clone()
            },
            left,
        }
    }
    let process = |p: &super::diagnose::ProcessTarget| format!("process {} ({})", p.pid, p.command);
    let path = |p: &std::path::PathBuf| format!("mount {}", p.display());
    match (shown, &planned.remedy) {
        (NodeRemedy::RestartKubelet, NodeRemedy::RestartKubelet)
        | (NodeRemedy::RestartRuntime, NodeRemedy::RestartRuntime)
        | (NodeRemedy::AwaitKubelet { .. }, NodeRemedy::AwaitKubelet { .. }) => Covered::Whole,
        (NodeRemedy::KillShim { shims: a }, NodeRemedy::KillShim { shims: b }) => {
            let (shims, left) = split(b, a, process);
            let nothing = shims.is_empty();
            part(planned, NodeRemedy::KillShim { shims }, nothing, left)
        }
        (NodeRemedy::ThawCgroup { cgroups: a }, NodeRemedy::ThawCgroup { cgroups: b }) => {
            let (cgroups, left) = split(b, a, |c| format!("cgroup {}", c.path.display()));
            let nothing = cgroups.is_empty();
            part(planned, NodeRemedy::ThawCgroup { cgroups }, nothing, left)
        }
        (
            NodeRemedy::ReleaseHolder {
                stop: a,
                unmount: ua,
            },
            NodeRemedy::ReleaseHolder {
                stop: b,
                unmount: ub,
            },
        ) => {
            let (stop, mut left) = split(b, a, process);
            let (unmount, left_mounts) = split(ub, ua, path);
            left.extend(left_mounts);
            let nothing = stop.is_empty() && unmount.is_empty();
            part(
                planned,
                NodeRemedy::ReleaseHolder { stop, unmount },
                nothing,
                left,
            )
        }
        (NodeRemedy::LazyUnmount { paths: a }, NodeRemedy::LazyUnmount { paths: b }) => {
            let (paths, left) = split(b, a, path);
            let nothing = paths.is_empty();
            part(planned, NodeRemedy::LazyUnmount { paths }, nothing, left)
        }
        (
            NodeRemedy::RestoreCniConfig {
                path: a,
                content: ca,
            },
            NodeRemedy::RestoreCniConfig {
                path: b,
                content: cb,
            },
        ) if a == b && ca == cb => Covered::Whole,
        (NodeRemedy::ForceDelete { uid: a, .. }, NodeRemedy::ForceDelete { uid: b, .. })
            if a.is_some() && a == b =>
        {
            Covered::Whole
        }
        _ => Covered::Not,
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use k8s_openapi::jiff::Timestamp;

    use super::*;
    use crate::doctor::node::ProcessTarget;

    fn rung(remedy: NodeRemedy) -> NodeStep {
        NodeStep {
            remedy,
            why: "why".into(),
            force: false,
        }
    }

    fn proc(pid: i32, start_time: u64) -> ProcessTarget {
        ProcessTarget {
            pid,
            start_time,
            command: "sleep".into(),
        }
    }

    #[test]
    fn a_holder_is_covered_only_as_the_process_shown() {
        let shown = [rung(NodeRemedy::ReleaseHolder {
            stop: vec![proc(41, 900)],
            unmount: vec![PathBuf::from("/k/pods/u/volumes/data/x")],
        })];
        let same = rung(NodeRemedy::ReleaseHolder {
            stop: vec![proc(41, 900)],
            unmount: vec![],
        });
        assert!(shown_covers(&shown, &same));
        // The PID reused by a process started later is another process.
        let reused = rung(NodeRemedy::ReleaseHolder {
            stop: vec![proc(41, 1200)],
            unmount: vec![],
        });
        assert!(!shown_covers(&shown, &reused));
        // A process started since (a shell loop's next `sleep`) is left
        // out, and said; the one shown is still stopped.
        let more = rung(NodeRemedy::ReleaseHolder {
            stop: vec![proc(41, 900), proc(77, 950)],
            unmount: vec![],
        });
        assert!(!shown_covers(&shown, &more));
        match covered(&shown, &more) {
            Covered::Part { step, left } => {
                assert_eq!(
                    step.remedy,
                    NodeRemedy::ReleaseHolder {
                        stop: vec![proc(41, 900)],
                        unmount: vec![]
                    }
                );
                assert_eq!(left, ["process 77 (sleep)"]);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(covered(&shown, &reused), Covered::Not);
        let other_mount = rung(NodeRemedy::ReleaseHolder {
            stop: vec![],
            unmount: vec![PathBuf::from("/k/pods/u/volumes/other")],
        });
        assert!(!shown_covers(&shown, &other_mount));
    }

    #[test]
    fn a_rung_never_shown_is_not_covered_and_a_wait_always_is() {
        let shown = [
            rung(NodeRemedy::KillShim {
                shims: vec![proc(5, 1)],
            }),
            rung(NodeRemedy::AwaitKubelet { until: None }),
        ];
        assert!(!shown_covers(&shown, &rung(NodeRemedy::RestartRuntime)));
        assert!(!shown_covers(&shown, &rung(NodeRemedy::RestartKubelet)));
        assert!(shown_covers(
            &shown,
            &rung(NodeRemedy::AwaitKubelet {
                until: Some(Timestamp::UNIX_EPOCH)
            })
        ));
        assert!(!shown_covers(
            &shown,
            &rung(NodeRemedy::KillShim {
                shims: vec![proc(6, 1)]
            })
        ));
    }

    #[test]
    fn a_force_delete_is_covered_only_for_the_pod_shown_and_only_as_force() {
        let fd = |uid: Option<&str>| NodeStep {
            remedy: NodeRemedy::ForceDelete {
                namespace: "ns".into(),
                name: "p".into(),
                uid: uid.map(str::to_owned),
            },
            why: "last".into(),
            force: true,
        };
        let shown = [fd(Some("u1"))];
        assert!(shown_covers(&shown, &fd(Some("u1"))));
        assert!(!shown_covers(&shown, &fd(Some("u2"))));
        assert!(!shown_covers(&[fd(None)], &fd(None)));
        let mut unforced = fd(Some("u1"));
        unforced.force = false;
        assert!(!shown_covers(&shown, &unforced));
    }
}
