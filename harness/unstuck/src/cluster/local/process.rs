//! Starting and stopping component processes.
#![allow(unsafe_code)] // pre_exec hooks; each calls only async-signal-safe syscalls.

use std::{
    fs,
    os::unix::process::CommandExt,
    path::Path,
    process::{Child, Stdio},
    time::Duration,
};

use super::config::ComponentCommand;
use crate::host;
use crate::{cluster::ClusterError, node::ProcRef};

pub use crate::cluster::provider::Lifetime;

/// Starts one component with stdout and stderr appended to `log`.
pub fn spawn(
    cmd: &ComponentCommand,
    log: &Path,
    lifetime: Lifetime,
) -> Result<Child, ClusterError> {
    let out = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|source| ClusterError::ProcessLog {
            path: log.to_path_buf(),
            source,
        })?;
    let err = out.try_clone().map_err(|source| ClusterError::ProcessLog {
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
    command.spawn().map_err(|source| ClusterError::Spawn {
        component: cmd.name.to_string(),
        program: cmd.program.clone(),
        source,
    })
}

/// Stops a process: SIGTERM, then SIGKILL after `grace`. Returns whether it
/// had to be killed.
pub async fn stop(p: &ProcRef, grace: Duration) -> bool {
    if !p.is_alive() {
        return false;
    }
    signal(p, libc::SIGTERM);
    let deadline = tokio::time::Instant::now() + grace;
    while tokio::time::Instant::now() < deadline {
        if !p.is_alive() {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    signal(p, libc::SIGKILL);
    for _ in 0..50 {
        if !p.is_alive() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    true
}

/// Sends `sig` to `p`; one that is gone is fine (see [`host::signal`]),
/// any other failure is said, and the caller's wait shows what it did.
fn signal(p: &ProcRef, sig: i32) {
    if let Err(e) = host::signal(p.pid, sig) {
        tracing::warn!("signal {sig} to {} ({}): {e}", p.pid, p.command);
    }
}

/// The last `lines` lines of a log file, read from its end (component
/// logs grow to tens of megabytes); a log that cannot be read says why.
pub fn log_tail(path: &Path, lines: usize) -> String {
    match read_tail(path, lines) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => format!("({} unreadable: {e})", path.display()),
    }
}

fn read_tail(path: &Path, lines: usize) -> std::io::Result<String> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(path)?;
    let len = f.metadata()?.len();
    // A window of 4 KiB a line: klog lines are well under that.
    let start = len.saturating_sub(4096 * lines as u64);
    f.seek(SeekFrom::Start(start))?;
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes)?;
    let text = String::from_utf8_lossy(&bytes);
    let all: Vec<&str> = text.lines().collect();
    // The first line may be cut in two by the window's start.
    let from = all.len().saturating_sub(lines).max(usize::from(start > 0));
    Ok(all[from.min(all.len())..].join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_tail_is_the_last_whole_lines() {
        let dir = std::env::temp_dir().join(format!("unstuck-tail-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("c.log");
        let text: String = (0..5000).map(|i| format!("line {i}\n")).collect();
        std::fs::write(&path, text).unwrap();
        assert_eq!(log_tail(&path, 2), "line 4998\nline 4999");
        std::fs::write(&path, "only\n").unwrap();
        assert_eq!(log_tail(&path, 3), "only");
        assert_eq!(log_tail(&dir.join("missing.log"), 3), "");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
