//! Restarts a control-plane component that exits on its own, as the
//! kubelet restarts the static pods of a kubeadm cluster.
//!
//! kube-controller-manager exits by design when it cannot renew its leader
//! lease within the renew deadline ("leaderelection lost"); on a loaded CI
//! machine an apiserver that answers slowly for ten seconds is enough. A
//! real cluster brings it back within seconds; a harness cluster that did
//! not would leave every namespace after it stuck, and the scenarios that
//! happen to run then would fail for a reason that is not theirs. Each
//! exit is recorded with the end of the component's log, so a report can
//! say what happened to the cluster under the scenarios.
//!
//! The kubelet and containerd are not supervised: node faults stop them on
//! purpose (a lost node), and the node doctor restarts them itself.

use std::{
    process::Child,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    thread::JoinHandle,
    time::{Duration, Instant},
};

pub use crate::cluster::exits::{ComponentExit, ExitLog, Restart};

use crate::node::ProcRef;

use super::{
    ClusterError,
    config::ComponentCommand,
    layout::Layout,
    process::{self, Lifetime, log_tail},
    state,
};

/// The components restarted when they exit: those a kubeadm cluster runs
/// as static pods.
pub const SUPERVISED: [&str; 4] = [
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
];

/// How often the children are looked at.
const POLL: Duration = Duration::from_millis(500);
/// Lines of the component's log kept with its exit.
const LOG_LINES: usize = 8;

/// Back-off before the n-th restart (1-based) of one component: 1 s,
/// doubling, at most 16 s (the kubelet's CrashLoopBackOff starts at 10 s;
/// a harness cluster has less time to lose).
pub fn backoff(restarts: u32) -> Duration {
    Duration::from_secs(1u64 << restarts.saturating_sub(1).min(4))
}

/// A running supervisor thread.
pub struct Supervisor {
    stop: Arc<AtomicBool>,
    exits: ExitLog,
    thread: Option<JoinHandle<Vec<Child>>>,
}

impl Supervisor {
    /// Watches `children` (name, process) and restarts each with its
    /// command from `commands` when it exits.
    ///
    /// The restarted processes have the cluster's `lifetime`; for
    /// [`Lifetime::Owned`] they die with the supervisor's thread, which
    /// lives until [`Supervisor::stop`] (the cluster's `down`).
    pub fn start(
        layout: Layout,
        commands: Vec<ComponentCommand>,
        children: Vec<(String, Child)>,
        lifetime: Lifetime,
    ) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let exits = ExitLog::default();
        let watch = Watch {
            layout,
            commands,
            lifetime,
            exits: exits.clone(),
            stop: stop.clone(),
        };
        let thread = std::thread::Builder::new()
            .name("unstuck-supervisor".into())
            .spawn(move || watch.run(children))
            .expect("spawning the supervisor thread");
        Self {
            stop,
            exits,
            thread: Some(thread),
        }
    }

    pub fn exits(&self) -> ExitLog {
        self.exits.clone()
    }

    /// Stops supervising (nothing is restarted from here on) and hands
    /// back the children, still running, for the caller to stop and reap.
    pub fn stop(mut self) -> Vec<Child> {
        self.stop.store(true, Ordering::SeqCst);
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(children)) => children,
            Some(Err(_)) => {
                // Its children are lost to this handle; the teardown finds
                // them by the state record and their command lines.
                tracing::warn!("the supervisor thread panicked");
                Vec::new()
            }
            None => Vec::new(),
        }
    }
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        // Dropped without `stop` (a panic unwinding past the cluster): let
        // the thread end; the cluster's reaper or next sweep removes the rest.
        self.stop.store(true, Ordering::SeqCst);
    }
}

struct Watch {
    layout: Layout,
    commands: Vec<ComponentCommand>,
    lifetime: Lifetime,
    exits: ExitLog,
    stop: Arc<AtomicBool>,
}

/// A component that exited and waits for its back-off to pass.
struct Pending {
    name: String,
    exit_index: usize,
    due: Instant,
}

impl Watch {
    fn run(self, mut children: Vec<(String, Child)>) -> Vec<Child> {
        let mut pending: Vec<Pending> = Vec::new();
        while !self.stopped() {
            std::thread::sleep(POLL);
            if self.stopped() {
                break;
            }
            let mut i = 0;
            while i < children.len() {
                match children[i].1.try_wait() {
                    Ok(Some(status)) => {
                        let (name, _) = children.swap_remove(i);
                        // This exit is the n-th of the component.
                        let n = self
                            .exits
                            .all()
                            .iter()
                            .filter(|e| e.component == name)
                            .count() as u32
                            + 1;
                        let due = Instant::now() + backoff(n);
                        tracing::warn!(
                            "{name} of cluster '{}' exited ({status}); restarting it",
                            self.layout.name
                        );
                        let exit_index = self.exits.push(ComponentExit {
                            component: name.clone(),
                            at: k8s_openapi::jiff::Timestamp::now().to_string(),
                            status: status.to_string(),
                            log_tail: log_tail(&self.layout.log_file(&name), LOG_LINES),
                            restart: Restart::Pending,
                        });
                        pending.push(Pending {
                            name,
                            exit_index,
                            due,
                        });
                    }
                    _ => i += 1,
                }
            }
            let now = Instant::now();
            let (due, waiting): (Vec<Pending>, Vec<Pending>) =
                pending.into_iter().partition(|p| p.due <= now);
            pending = waiting;
            for p in due {
                match self.restart(&p.name) {
                    Ok(child) => {
                        let pid = child.id() as i32;
                        self.exits
                            .set_restart(p.exit_index, Restart::Supervisor { pid });
                        children.push((p.name, child));
                    }
                    Err(error) => {
                        tracing::warn!("{error}");
                        self.exits.set_restart(
                            p.exit_index,
                            Restart::Failed {
                                error: error.to_string(),
                            },
                        );
                    }
                }
            }
        }
        children.into_iter().map(|(_, c)| c).collect()
    }

    fn stopped(&self) -> bool {
        // A teardown from another process (`unstuck cluster down`) marks
        // the directory first; the components it stops stay stopped.
        self.stop.load(Ordering::SeqCst) || state::is_tearing_down(&self.layout.dir)
    }

    fn restart(&self, name: &str) -> Result<Child, ClusterError> {
        let cmd = self
            .commands
            .iter()
            .find(|c| c.name == name)
            .ok_or_else(|| ClusterError::NoCommand(name.into()))?;
        let child = process::spawn(cmd, &self.layout.log_file(name), self.lifetime)?;
        let pid = child.id() as i32;
        let process = ProcRef::of_pid(pid).ok_or_else(|| ClusterError::ExitedAtStart {
            component: name.into(),
            pid,
        })?;
        state::record_component(&self.layout.dir, name, process)?;
        Ok(child)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn back_off_doubles_from_one_second_to_sixteen() {
        let secs: Vec<u64> = (1..=7).map(|n| backoff(n).as_secs()).collect();
        assert_eq!(secs, vec![1, 2, 4, 8, 16, 16, 16]);
    }

    #[test]
    fn an_exit_reads_as_what_happened_and_why() {
        let exit = ComponentExit {
            component: "kube-controller-manager".into(),
            at: "2026-11-24T15:58:02Z".into(),
            status: "exit status: 1".into(),
            // The lines kube-controller-manager v1.34.4 ends with when its
            // lease is lost (leaderelection.go, controllermanager.go:343).
            log_tail: concat!(
                "E1124 15:58:01.907101   16461 leaderelection.go:429] Failed to update lock optimistically: Put \"https://10.244.0.1:6443/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-controller-manager?timeout=5s\": context deadline exceeded\n",
                "I1124 15:58:01.907188   16461 leaderelection.go:297] failed to renew lease kube-system/kube-controller-manager: context deadline exceeded\n",
                "E1124 15:58:01.907254   16461 controllermanager.go:343] \"leaderelection lost\"\n",
            )
            .into(),
            restart: Restart::Supervisor { pid: 4242 },
        };
        assert_eq!(
            exit.to_string(),
            "kube-controller-manager exited at 2026-11-24T15:58:02Z (exit status: 1); restarted as pid 4242; its log ended: E1124 15:58:01.907254   16461 controllermanager.go:343] \"leaderelection lost\""
        );
    }
}
