//! What the kernel says about a stuck pod's processes.
//!
//! When the runtime cannot stop a container, restarting the runtime only
//! helps if the runtime is what is wedged. A process in uninterruptible
//! sleep (state `D`) ignores SIGKILL until the kernel call it waits in
//! returns: no runtime, shim or kubelet restart changes that. So before
//! any runtime remedy the node doctor reads, for every process of the pod,
//! its state, the kernel function it waits in (`wchan`, `stack`), the
//! system call it is blocked in (`/proc/PID/syscall`) with the path that
//! call names, and the filesystem behind that path. This module reads
//! those recorded facts; the I/O half collects them.
//!
//! Checked on this project's test kernel (Linux 6.18): a writer on an ext4
//! frozen with FIFREEZE stays `D` in `percpu_rwsem_wait` after SIGKILL,
//! blocked in `openat(2)` for a shell's `>>` redirect (the path is only in
//! the process's memory), and the kubelet reports the same words as for a
//! wedged shim (`FailedKillPod ... KillContainerError`).
//!
//! A task frozen by the cgroup freezer shows `D` too, but is not such a
//! cause: it waits for a thaw, not for a kernel call, and [`super::freezer`]
//! reads it from the cgroup's own files. Run here (cgroup v1, runc 1.1.5):
//! runc thaws a *container's* frozen cgroup when it sends SIGKILL, so that
//! pod dies; a frozen *pod* cgroup (the container's parent) it cannot
//! thaw, and that pod stays Terminating (finding `CgroupFrozen`). A frozen
//! task's `wchan` is `__refrigerator` only when it was frozen on its way
//! back to user space; one frozen inside a sleep shows that sleep
//! (`hrtimer_nanosleep`), so the wait channel alone does not tell.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::mounts::MountFact;

/// One process of the pod, as the kernel shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KernelTask {
    pub pid: i32,
    /// Clock ticks since boot: with the pid, names the process uniquely.
    pub start_time: u64,
    /// Single-letter state from /proc/PID/stat.
    pub state: char,
    pub command: String,
    /// `/proc/PID/wchan`: the kernel function it sleeps in, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wchan: Option<String>,
    /// `/proc/PID/stack`, function names only, innermost first (readable
    /// by root only; empty when it could not be read).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stack: Vec<String>,
    /// `/proc/PID/syscall` as read: `running`, or the number, six
    /// arguments, stack and instruction pointers in hex.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub syscall: Option<String>,
    /// The path the blocked call names, read from the process's memory
    /// (path arguments) or its fd table (fd arguments), as the process
    /// sees it (relative to its own root).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<PathBuf>,
    /// The mount holding that path, from the process's own mountinfo.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mount: Option<MountFact>,
}

/// What a process in `D` waits for, as far as the kernel shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum KernelWait {
    /// A write to a filesystem frozen with FIFREEZE (`fsfreeze`): waits on
    /// the superblock's write rwsem until somebody thaws it.
    FrozenFilesystem,
    /// A FUSE request its daemon never answers.
    Fuse,
    /// An NFS/RPC call to a server that does not answer.
    Network,
    /// The cgroup freezer (`__refrigerator`, `do_freezer_trap`): a wait
    /// for a thaw, which [`super::freezer`] judges from the cgroup itself.
    Freezer,
    /// Anything else: disk I/O, a driver, a lock.
    Other,
}

impl KernelWait {
    pub fn describe(self) -> &'static str {
        match self {
            KernelWait::FrozenFilesystem => "a write to a frozen filesystem",
            KernelWait::Fuse => "a FUSE daemon that does not answer",
            KernelWait::Network => "a network filesystem server that does not answer",
            KernelWait::Freezer => "the cgroup freezer",
            KernelWait::Other => "the kernel",
        }
    }
}

/// A decoded `/proc/PID/syscall` line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Syscall {
    pub number: i64,
    pub args: [u64; 6],
}

/// Parses `/proc/PID/syscall`; `None` for `running`, for a task not in a
/// system call (`-1 sp pc`) and for anything malformed.
pub fn parse_syscall(text: &str) -> Option<Syscall> {
    let mut fields = text.split_whitespace();
    let number: i64 = fields.next()?.parse().ok()?;
    if number < 0 {
        return None;
    }
    let mut args = [0u64; 6];
    for a in &mut args {
        let f = fields.next()?;
        *a = u64::from_str_radix(f.trim_start_matches("0x"), 16).ok()?;
    }
    Some(Syscall { number, args })
}

/// Where a system call names the file it works on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileArg {
    /// Argument N is a pointer to a path string.
    Path(usize),
    /// Argument N is a file descriptor.
    Fd(usize),
}

/// The x86_64 name of a system call and where it names its file, for the
/// calls a process can block in on a filesystem. `None` for the rest.
pub fn syscall_info(number: i64) -> Option<(&'static str, Option<FileArg>)> {
    use FileArg::{Fd, Path as P};
    let info = match number {
        0 => ("read", Some(Fd(0))),
        1 => ("write", Some(Fd(0))),
        2 => ("open", Some(P(0))),
        4 => ("stat", Some(P(0))),
        6 => ("lstat", Some(P(0))),
        17 => ("pread64", Some(Fd(0))),
        18 => ("pwrite64", Some(Fd(0))),
        19 => ("readv", Some(Fd(0))),
        20 => ("writev", Some(Fd(0))),
        74 => ("fsync", Some(Fd(0))),
        75 => ("fdatasync", Some(Fd(0))),
        76 => ("truncate", Some(P(0))),
        77 => ("ftruncate", Some(Fd(0))),
        82 => ("rename", Some(P(0))),
        83 => ("mkdir", Some(P(0))),
        84 => ("rmdir", Some(P(0))),
        85 => ("creat", Some(P(0))),
        86 => ("link", Some(P(0))),
        87 => ("unlink", Some(P(0))),
        90 => ("chmod", Some(P(0))),
        91 => ("fchmod", Some(Fd(0))),
        92 => ("chown", Some(P(0))),
        162 => ("sync", None),
        257 => ("openat", Some(P(1))),
        258 => ("mkdirat", Some(P(1))),
        260 => ("fchownat", Some(P(1))),
        262 => ("newfstatat", Some(P(1))),
        263 => ("unlinkat", Some(P(1))),
        264 => ("renameat", Some(P(1))),
        265 => ("linkat", Some(P(1))),
        268 => ("fchmodat", Some(P(1))),
        280 => ("utimensat", Some(P(1))),
        285 => ("fallocate", Some(Fd(0))),
        295 => ("preadv", Some(Fd(0))),
        296 => ("pwritev", Some(Fd(0))),
        306 => ("syncfs", Some(Fd(0))),
        316 => ("renameat2", Some(P(1))),
        332 => ("statx", Some(P(1))),
        _ => return None,
    };
    Some(info)
}

/// Parses `/proc/PID/stack` into function names, innermost first
/// (`[<0>] percpu_rwsem_wait+0x12f/0x160` -> `percpu_rwsem_wait`).
pub fn parse_stack(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            let f = l.rsplit(' ').next()?.trim();
            let name = f.split('+').next()?.trim();
            (!name.is_empty()).then(|| name.to_owned())
        })
        .collect()
}

/// The mount holding `path`: the longest mount point that is a prefix of
/// it (mount points and path both as the process sees them).
pub fn mount_of<'a>(mounts: &'a [MountFact], path: &Path) -> Option<&'a MountFact> {
    mounts
        .iter()
        .filter(|m| path.starts_with(&m.mount_point))
        .max_by_key(|m| m.mount_point.components().count())
}

impl KernelTask {
    /// In uninterruptible sleep: SIGKILL waits until the kernel call
    /// returns.
    pub fn is_uninterruptible(&self) -> bool {
        self.state == 'D'
    }

    fn waits_in(&self, needle: &str) -> bool {
        self.wchan.as_deref().is_some_and(|w| w.contains(needle))
            || self.stack.iter().any(|f| f.contains(needle))
    }

    /// What it waits for; `None` unless it is in `D`.
    pub fn wait(&self) -> Option<KernelWait> {
        if !self.is_uninterruptible() {
            return None;
        }
        // The freeze protection of a superblock is a per-cpu rwsem taken
        // by every write path (sb_start_write, mnt_want_write); a frozen
        // filesystem holds it for writing.
        let frozen = self.waits_in("percpu_rwsem")
            || self.waits_in("sb_start_write")
            || self.waits_in("mnt_want_write")
            || self.waits_in("sb_start_pagefault");
        Some(if frozen {
            KernelWait::FrozenFilesystem
        } else if self.waits_in("__refrigerator") || self.waits_in("do_freezer_trap") {
            KernelWait::Freezer
        } else if self.waits_in("fuse") || self.waits_in("request_wait_answer") {
            KernelWait::Fuse
        } else if self.waits_in("rpc_wait") || self.waits_in("nfs") {
            KernelWait::Network
        } else {
            KernelWait::Other
        })
    }

    /// The blocked call's name, e.g. `openat`.
    pub fn syscall_name(&self) -> Option<&'static str> {
        let call = parse_syscall(self.syscall.as_deref()?)?;
        syscall_info(call.number).map(|(name, _)| name)
    }

    /// One line of evidence, e.g. `pid 4242 (sh -c ...) state D
    /// (uninterruptible) in percpu_rwsem_wait, blocked in openat on
    /// /data/log (ext4 /dev/loop3 at /data)`.
    pub fn describe(&self) -> String {
        let mut s = format!("pid {} ({}) state {}", self.pid, self.command, self.state);
        if self.is_uninterruptible() {
            s.push_str(" (uninterruptible: SIGKILL waits for the kernel call to return)");
        }
        let wait = self
            .wchan
            .clone()
            .filter(|w| !w.is_empty() && w != "0")
            .or_else(|| self.stack.first().cloned());
        if let Some(w) = wait {
            s.push_str(&format!(" in {w}"));
        }
        if let Some(name) = self.syscall_name() {
            s.push_str(&format!(", blocked in {name}"));
        }
        if let Some(p) = &self.path {
            s.push_str(&format!(" on {}", p.display()));
        }
        if let Some(m) = &self.mount {
            s.push_str(&format!(
                " ({} {} at {})",
                m.fs_type,
                m.source,
                m.mount_point.display()
            ));
        }
        s
    }
}

/// The pod's processes stuck in the kernel, with what they wait for,
/// freezer waits left out (a frozen cgroup is its own finding).
pub fn kernel_stalls(tasks: &[KernelTask]) -> Vec<(&KernelTask, KernelWait)> {
    tasks
        .iter()
        .filter_map(|t| t.wait().map(|w| (t, w)))
        .filter(|(_, w)| *w != KernelWait::Freezer)
        .collect()
}
