//! Starting and stopping component processes.
#![allow(unsafe_code)] // pre_exec hooks; each calls only async-signal-safe syscalls.

use std::{
    fs,
    os::unix::process::CommandExt,
    path::{Path, PathBuf},
    process::{Child, Stdio},
    time::Duration,
};

use super::{config::ComponentCommand, state::ProcessRef};
use crate::host;

#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    #[error("failed to open log file {path}: {source}")]
    Log {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("failed to start {component} ({program}): {source}")]
    Spawn {
        component: String,
        program: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// How a component's life is tied to the harness.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lifetime {
    /// Dies with the thread that started it (PR_SET_PDEATHSIG): the
    /// cluster of a test or `unstuck run`. Start such clusters from a
    /// thread that lives as long as the cluster (the main thread).
    Owned,
    /// Survives the harness: the cluster of `unstuck cluster up`.
    Detached,
}

/// Starts one component with stdout and stderr appended to `log`.
pub fn spawn(
    cmd: &ComponentCommand,
    log: &Path,
    lifetime: Lifetime,
) -> Result<Child, ProcessError> {
    let out = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|source| ProcessError::Log {
            path: log.to_path_buf(),
            source,
        })?;
    let err = out.try_clone().map_err(|source| ProcessError::Log {
        path: log.to_path_buf(),
        source,
    })?;
    let mut command = std::process::Command::new(&cmd.program);
    command
        .args(&cmd.args)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err);
    // SAFETY: the hook runs between fork and exec and calls only prctl/setpgid.
    unsafe {
        command.pre_exec(move || {
            host::own_process_group()?;
            if lifetime == Lifetime::Owned {
                host::die_with_parent()?;
            }
            Ok(())
        });
    }
    command.spawn().map_err(|source| ProcessError::Spawn {
        component: cmd.name.to_string(),
        program: cmd.program.clone(),
        source,
    })
}

/// Stops a process: SIGTERM, then SIGKILL after `grace`. Returns whether it
/// had to be killed.
pub async fn stop(p: &ProcessRef, grace: Duration) -> bool {
    if !p.is_alive() {
        return false;
    }
    let _ = host::signal(p.pid, libc::SIGTERM);
    let deadline = tokio::time::Instant::now() + grace;
    while tokio::time::Instant::now() < deadline {
        if !p.is_alive() {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let _ = host::signal(p.pid, libc::SIGKILL);
    for _ in 0..50 {
        if !p.is_alive() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    true
}
