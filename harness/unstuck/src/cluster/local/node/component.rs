//! The node's components (containerd, the kubelet) as processes of this
//! machine: finding the live one, stopping it, starting it again with the
//! command line `up` used.

use std::{
    future::Future,
    io::Read,
    path::Path,
    time::{Duration, Instant},
};

use super::LocalNode;
use crate::text::quoted;
use crate::{
    cluster::local::{
        process::{self, Lifetime},
        state::{self, ClusterState},
    },
    host,
    node::{ComponentRestart, ComponentStop, NodeError, ProcRef},
    wait::{self, Poll},
};

impl LocalNode {
    /// The live process of component `name` of this cluster: the recorded
    /// one, or (when it was restarted by hand) whichever runs its program
    /// with its first argument (`--config=<cluster dir>/...`, which names
    /// this cluster).
    pub(super) fn find_component(&self, st: &ClusterState, name: &str) -> Option<ProcRef> {
        let recorded = st
            .components
            .iter()
            .find(|c| c.name == name)
            .map(|c| c.process.clone())
            .filter(ProcRef::is_alive);
        recorded.or_else(|| {
            let cmd = self.command(name).ok()?;
            let program = cmd.program.file_name()?;
            let first = cmd.args.first()?;
            host::processes()
                .into_iter()
                .find(|p| {
                    p.state != 'Z'
                        && p.cmdline
                            .first()
                            .is_some_and(|a| Path::new(a).file_name() == Some(program))
                        && p.cmdline.contains(first)
                })
                .map(|p| ProcRef::of(&p))
        })
    }

    /// Stops component `name` (SIGTERM, SIGKILL after 10 s) if it runs.
    pub(super) async fn stop_component(&self, name: &str) -> Result<ComponentStop, NodeError> {
        let st = self.state()?;
        let Some(old) = self.find_component(&st, name) else {
            return Ok(ComponentStop {
                component: name.into(),
                stopped: None,
                killed: false,
            });
        };
        let stopped = host::process(old.pid)
            .filter(|p| p.start_time == old.start_time)
            .map(|p| ProcRef::of(&p));
        let killed = process::stop(&old, Duration::from_secs(10)).await;
        if old.is_alive() {
            return Err(self.failed(format!("{name} {} survives SIGKILL", old.pid)));
        }
        Ok(ComponentStop {
            component: name.into(),
            stopped,
            killed,
        })
    }

    /// Stops component `name` if it runs, starts it again with the command
    /// line `up` used, records the new pid in state.json (so `down` and
    /// the reaper stop the right one), and waits until `answers` says it
    /// does. The new process is [`Lifetime::Detached`]: the caller may be
    /// a short-lived test thread, and PR_SET_PDEATHSIG would kill the
    /// component when that thread ends; teardown finds it anyway, by the
    /// recorded pid and by its command line, which names the cluster
    /// directory.
    pub(super) async fn restart_component<F, Fut, E>(
        &self,
        name: &str,
        timeout: Duration,
        mut answers: F,
    ) -> Result<ComponentRestart, NodeError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<(), E>>,
        E: std::fmt::Display,
    {
        let started = Instant::now();
        let cmd = self.command(name)?;
        let st = self.state()?;
        let old = self.find_component(&st, name);
        let killed = match &old {
            Some(p) => process::stop(p, Duration::from_secs(10)).await,
            None => false,
        };
        let log = self.layout.log_file(name);
        let mut child = process::spawn(&cmd, &log, Lifetime::Detached)
            .map_err(self.caused(format!("starting {name}")))?;
        let new_pid = child.id() as i32;
        // Reap it whenever it ends, so it never lingers as our zombie.
        std::thread::spawn(move || child.wait());
        let new_ref = ProcRef::of_pid(new_pid)
            .ok_or_else(|| self.failed(format!("{name} {new_pid} exited right after start")))?;
        state::record_component(&self.layout.dir, name, new_ref.clone())
            .map_err(self.caused(format!("recording the restarted {name}")))?;
        wait::until(
            format!("the restarted {name} to answer"),
            timeout,
            Duration::from_millis(200),
            || {
                let alive = new_ref.is_alive();
                let probe = answers();
                async move {
                    if !alive {
                        return Poll::Ready(Err(()));
                    }
                    match probe.await {
                        Ok(()) => Poll::Ready(Ok(())),
                        Err(e) => Poll::Pending(e.to_string()),
                    }
                }
            },
        )
        .await
        .map_err(self.caused(format!("restarting {name}")))?
        .map_err(|()| {
            self.failed(format!(
                "the restarted {name} ({new_pid}) exited; see {}",
                log.display()
            ))
        })?;
        Ok(ComponentRestart {
            component: name.into(),
            old_pid: old.map(|p| p.pid),
            new_pid,
            killed,
            took_ms: started.elapsed().as_millis(),
        })
    }
}

/// `GET /healthz` on the kubelet's healthz port: `Ok` on 200 `ok`.
pub(super) async fn kubelet_healthz(port: u16) -> std::io::Result<()> {
    tokio::task::spawn_blocking(move || {
        use std::io::{Error, Write};
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
        let timeout = Duration::from_secs(2);
        let at = |e: Error| Error::new(e.kind(), format!("healthz {addr}: {e}"));
        let mut s = std::net::TcpStream::connect_timeout(&addr, timeout).map_err(at)?;
        s.set_read_timeout(Some(timeout)).map_err(at)?;
        s.set_write_timeout(Some(timeout)).map_err(at)?;
        s.write_all(b"GET /healthz HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
            .map_err(at)?;
        let mut reply = String::new();
        s.read_to_string(&mut reply).map_err(at)?;
        let status = reply.lines().next().unwrap_or_default();
        let body = reply.split_once("\r\n\r\n").map_or("", |(_, b)| b).trim();
        if status.split_whitespace().nth(1) == Some("200") && body == "ok" {
            Ok(())
        } else {
            Err(Error::other(format!(
                "healthz {addr}: {status} {body}",
                body = quoted(body)
            )))
        }
    })
    .await
    .map_err(std::io::Error::other)?
}
