//! The kind node's components are systemd services: finding their
//! processes, stopping and restarting them through `systemctl`, and
//! waiting until a restarted one answers.

use std::{
    path::Path,
    time::{Duration, Instant},
};

use super::KindNode;
use crate::{
    exec::Cmd,
    host,
    node::{ComponentRestart, Node, NodeError},
    wait::{self, Poll},
};

/// `GET /healthz` on the kubelet's healthz port: exit 0 on `200` `ok`.
pub(super) const KUBELET_HEALTHZ_SCRIPT: &str = r#"exec 3<>/dev/tcp/127.0.0.1/10248 || exit 1
printf 'GET /healthz HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
r=$(timeout 2 cat <&3) || exit 1
case "$r" in "HTTP/1."*" 200 "*ok) exit 0 ;; *) echo "$r"; exit 1 ;; esac"#;

impl KindNode {
    /// One process, or `None` when it is gone.
    pub(super) async fn process(&self, pid: i32) -> Result<Option<host::Process>, NodeError> {
        Ok(self
            .processes()
            .await?
            .into_iter()
            .find(|p| p.pid == pid && p.state != 'Z'))
    }

    /// The running process whose program is `program` (by its path's last
    /// part: `/usr/bin/kubelet`, `/usr/bin/containerd`).
    pub(super) async fn component(
        &self,
        program: &str,
    ) -> Result<Option<host::Process>, NodeError> {
        Ok(self.processes().await?.into_iter().find(|p| {
            p.state != 'Z'
                && p.cmdline.first().is_some_and(|a| {
                    Path::new(a).file_name().and_then(|n| n.to_str()) == Some(program)
                })
        }))
    }

    pub(super) async fn systemctl(&self, verb: &str, unit: &str) -> Result<(), NodeError> {
        self.run(
            Cmd::new("systemctl")
                .args([verb, unit])
                .timeout(Duration::from_secs(120)),
        )
        .await
        .map(drop)
        .map_err(self.run_error())
    }

    /// `systemctl restart UNIT`, then waits until `answers` says the new
    /// process does.
    pub(super) async fn restart_unit(
        &self,
        unit: &str,
        program: &str,
        probe: Cmd,
        timeout: Duration,
    ) -> Result<ComponentRestart, NodeError> {
        let started = Instant::now();
        let old = self.component(program).await?;
        self.systemctl("restart", unit).await?;
        let new = wait::until(
            format!("the restarted {unit} to answer"),
            timeout,
            Duration::from_millis(300),
            || {
                let probe = probe.clone();
                async move {
                    match self.run(probe).await {
                        Ok(_) => match self.component(program).await {
                            Ok(Some(p)) => Poll::Ready(p),
                            Ok(None) => Poll::Pending(format!("no {program} process")),
                            Err(e) => Poll::Pending(e.to_string()),
                        },
                        Err(e) => Poll::Pending(e.to_string()),
                    }
                }
            },
        )
        .await
        .map_err(|source| NodeError::Provider {
            node: self.container.clone(),
            what: format!("restarting {unit}"),
            source: Box::new(source),
        })?;
        Ok(ComponentRestart {
            component: unit.into(),
            old_pid: old.map(|p| p.pid),
            new_pid: new.pid,
            killed: false,
            took_ms: started.elapsed().as_millis(),
        })
    }
}
