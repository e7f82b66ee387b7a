//! Facts about, and the few direct actions on, the machine the harness runs
//! on: processes, mounts, cgroups and signals. Everything here reads /proc
//! and /sys itself rather than shelling out to `ps`, `findmnt` or `fuser`,
//! so the parsing is ours and unit-tested.
#![allow(unsafe_code)] // libc calls for kill, umount2 and prctl; each is a single syscall.

use std::{
    fs,
    path::{Path, PathBuf},
};

/// One running process, as /proc shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Process {
    pub pid: i32,
    /// Start time in clock ticks since boot (field 22 of /proc/PID/stat):
    /// with the pid it names a process uniquely even after pid reuse.
    pub start_time: u64,
    /// Single-letter state (R, S, D, T for stopped, Z, ...).
    pub state: char,
    pub cmdline: Vec<String>,
}

impl Process {
    pub fn command_line(&self) -> String {
        self.cmdline.join(" ")
    }
}

/// Reads one process, or `None` when it is gone.
pub fn process(pid: i32) -> Option<Process> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (state, start_time) = parse_stat(&stat)?;
    let cmdline = fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    Some(Process {
        pid,
        start_time,
        state,
        cmdline: split_cmdline(&cmdline),
    })
}

/// Every process on the machine (those that vanish while listing are skipped).
pub fn processes() -> Vec<Process> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut out: Vec<Process> = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(process)
        .collect();
    out.sort_by_key(|p| p.pid);
    out
}

/// Parses state and start time out of /proc/PID/stat. The command name in
/// parentheses may itself hold spaces and parentheses, so fields are counted
/// from the last ')'.
pub fn parse_stat(stat: &str) -> Option<(char, u64)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state is field 3 overall (index 0 here), starttime field 22 (index 19).
    let state = fields.first()?.chars().next()?;
    let start = fields.get(19)?.parse().ok()?;
    Some((state, start))
}

fn split_cmdline(raw: &[u8]) -> Vec<String> {
    raw.split(|b| *b == 0)
        .filter(|s| !s.is_empty())
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect()
}

/// Whether the process that was `pid` at `start_time` still runs.
pub fn is_alive(pid: i32, start_time: u64) -> bool {
    matches!(process(pid), Some(p) if p.start_time == start_time && p.state != 'Z')
}

/// Sends a signal; a process that is already gone is not an error.
pub fn signal(pid: i32, sig: i32) -> std::io::Result<()> {
    // SAFETY: kill(2) takes plain integers and has no memory effects.
    let rc = unsafe { libc::kill(pid, sig) };
    if rc == 0 {
        return Ok(());
    }
    let err = std::io::Error::last_os_error();
    if err.raw_os_error() == Some(libc::ESRCH) {
        Ok(())
    } else {
        Err(err)
    }
}

/// One mount of /proc/self/mountinfo. The parser is the doctor's own (in
/// unstuck-core), so what the harness unmounts and what the doctor
/// diagnoses are read the same way.
pub use unstuck_core::doctor::node::{MountFact as Mount, parse_mountinfo};

/// The machine's mounts as this process sees them.
pub fn mounts() -> Vec<Mount> {
    parse_mountinfo(&fs::read_to_string("/proc/self/mountinfo").unwrap_or_default())
}

/// Mounts at or below `dir`, deepest and newest first: the order they can
/// be unmounted in (mountinfo lists mounts in the order they were made).
pub fn mounts_under(dir: &Path) -> Vec<Mount> {
    let mut found: Vec<(usize, Mount)> = mounts()
        .into_iter()
        .enumerate()
        .filter(|(_, m)| m.mount_point.starts_with(dir))
        .collect();
    found.sort_by_key(|(i, m)| std::cmp::Reverse((m.mount_point.components().count(), *i)));
    found.into_iter().map(|(_, m)| m).collect()
}

/// Unmounts `path`; `lazy` detaches it even while busy (MNT_DETACH).
pub fn unmount(path: &Path, lazy: bool) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(|_| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, "path holds a NUL byte")
    })?;
    let flags = if lazy { libc::MNT_DETACH } else { 0 };
    // SAFETY: c is a valid NUL-terminated string that outlives the call.
    let rc = unsafe { libc::umount2(c.as_ptr(), flags) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Mounts a small tmpfs (1 MiB) labelled `label` on `target`, which must
/// exist: how a fault injector makes a directory busy.
pub fn mount_tmpfs(target: &Path, label: &str) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let invalid = || {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "NUL byte in path or label",
        )
    };
    let src = std::ffi::CString::new(label).map_err(|_| invalid())?;
    let tgt = std::ffi::CString::new(target.as_os_str().as_bytes()).map_err(|_| invalid())?;
    // SAFETY: every pointer is a valid NUL-terminated string that outlives the call.
    let rc = unsafe {
        libc::mount(
            src.as_ptr(),
            tgt.as_ptr(),
            c"tmpfs".as_ptr(),
            0,
            c"size=1m,mode=0755".as_ptr().cast(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Asks the kernel to SIGKILL the calling thread's children when that thread
/// dies. Used in `pre_exec`, so a killed harness takes its cluster with it.
pub fn die_with_parent() -> std::io::Result<()> {
    // SAFETY: prctl(PR_SET_PDEATHSIG) and setpgid only change this process's own attributes;
    // both are async-signal-safe, as pre_exec requires.
    unsafe {
        if libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        ) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Puts the calling process into a process group of its own (in `pre_exec`),
/// so a Ctrl-C at the terminal reaches the harness, which then stops the
/// components in order, rather than every component at once.
pub fn own_process_group() -> std::io::Result<()> {
    // SAFETY: see die_with_parent.
    if unsafe { libc::setpgid(0, 0) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Restores the default SIGPIPE action, so `unstuck doctor | head` ends
/// quietly like any command-line tool instead of panicking on a closed
/// stdout (Rust ignores SIGPIPE by default). An owned cluster is still torn
/// down by its reaper.
pub fn default_sigpipe() {
    // SAFETY: setting a signal disposition to SIG_DFL installs no handler code.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// Whether the effective user is root.
/// inotify instances open on the machine (every process's fds that are
/// `anon_inode:inotify`) and the per-user limit, when it can be read.
/// The kubelet, containerd and the control plane each open several; a
/// kubelet that cannot get one exits ("inotify_init: too many open files").
pub fn inotify_instances() -> (usize, Option<usize>) {
    let limit = std::fs::read_to_string("/proc/sys/fs/inotify/max_user_instances")
        .ok()
        .and_then(|s| s.trim().parse().ok());
    let in_use = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .flat_map(|e| {
            std::fs::read_dir(e.path().join("fd"))
                .into_iter()
                .flatten()
                .flatten()
        })
        .filter(|fd| {
            std::fs::read_link(fd.path()).is_ok_and(|t| t.as_os_str() == "anon_inode:inotify")
        })
        .count();
    (in_use, limit)
}

/// Opens (creating) `path` and takes an exclusive `flock` on it, waiting
/// for another holder; held until the returned file is dropped. The kernel
/// releases it when its holder dies, so a SIGKILLed holder never wedges
/// the next one.
pub fn lock_file(path: &Path) -> std::io::Result<std::fs::File> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)?;
    file.lock()?;
    Ok(file)
}

pub fn is_root() -> bool {
    // SAFETY: geteuid cannot fail and touches no memory.
    unsafe { libc::geteuid() == 0 }
}

/// The cgroup v1 hierarchies mounted under /sys/fs/cgroup, or an empty list
/// on a pure cgroup v2 host.
pub fn cgroup_v1_hierarchies() -> Vec<PathBuf> {
    mounts()
        .into_iter()
        .filter(|m| m.fs_type == "cgroup" && m.mount_point.starts_with("/sys/fs/cgroup"))
        .map(|m| m.mount_point)
        .collect()
}

/// Every cgroup hierarchy mounted under /sys/fs/cgroup: the v1 ones and
/// the unified (v2) one, which a hybrid host mounts at
/// `/sys/fs/cgroup/unified` beside them. runc makes a container's cgroup
/// in each, so a cluster's cgroups are removed from each.
pub fn cgroup_hierarchies() -> Vec<PathBuf> {
    mounts()
        .into_iter()
        .filter(|m| {
            matches!(m.fs_type.as_str(), "cgroup" | "cgroup2")
                && m.mount_point.starts_with("/sys/fs/cgroup")
        })
        .map(|m| m.mount_point)
        .collect()
}

/// Processes whose cgroup (in any hierarchy) lies under `/<root>`.
pub fn pids_in_cgroup_tree(hierarchies: &[PathBuf], root: &str) -> Vec<i32> {
    let mut pids = Vec::new();
    for h in hierarchies {
        walk_procs(&h.join(root.trim_start_matches('/')), &mut pids);
    }
    pids.sort_unstable();
    pids.dedup();
    pids
}

fn walk_procs(dir: &Path, pids: &mut Vec<i32>) {
    if let Ok(text) = fs::read_to_string(dir.join("cgroup.procs")) {
        pids.extend(text.lines().filter_map(|l| l.trim().parse::<i32>().ok()));
    }
    if let Ok(entries) = fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                walk_procs(&e.path(), pids);
            }
        }
    }
}

/// Removes a cgroup directory tree bottom-up (cgroupfs only allows rmdir of
/// empty groups, which is all a cgroup directory can be once its processes are gone).
///
/// A group that is already gone is no error: the kernel, runc or a second
/// teardown may remove it between the listing and the rmdir, and a report
/// that named it would read as a leak where there is none.
pub fn remove_cgroup_tree(dir: &Path) -> std::io::Result<()> {
    let gone_is_fine = |r: std::io::Result<()>| match r {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        r => r,
    };
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) => return gone_is_fine(Err(e)),
    };
    for e in entries.flatten() {
        if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            remove_cgroup_tree(&e.path())?;
        }
    }
    gone_is_fine(fs::remove_dir(dir))
}

/// Thaws every frozen cgroup at or below `dir`, parents first, and
/// returns the ones it thawed. A frozen process cannot die: a SIGKILL
/// stays pending until it is thawed (v1 freezer), so a cgroup frozen by
/// a fault (scenario `freezeCgroup`) whose run was killed keeps its
/// processes, and so itself, until something thaws it.
///
/// v1 (`freezer.state`): a child reads FROZEN while its parent is frozen,
/// and writing THAWED to the child does not thaw it, hence parents first.
/// v2 (`cgroup.freeze`): each group's own flag is cleared. A group that
/// goes while the tree is walked is skipped.
pub fn thaw_cgroup_tree(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut thawed = Vec::new();
    thaw_into(dir, &mut thawed)?;
    Ok(thawed)
}

fn thaw_into(dir: &Path, thawed: &mut Vec<PathBuf>) -> std::io::Result<()> {
    let gone_is_fine = |r: std::io::Result<()>| match r {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        r => r,
    };
    for (file, thawed_value) in [("freezer.state", "THAWED"), ("cgroup.freeze", "0")] {
        let path = dir.join(file);
        let Ok(now) = fs::read_to_string(&path) else {
            continue;
        };
        if now.trim() != thawed_value {
            gone_is_fine(fs::write(&path, thawed_value))?;
            thawed.push(dir.to_path_buf());
        }
    }
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    for e in entries.flatten() {
        if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            thaw_into(&e.path(), thawed)?;
        }
    }
    Ok(())
}

/// Whether a process belongs to the pod with UID `pod_uid`: its cgroup
/// path names the pod (`pod<uid>` with cgroupfs, `pod<uid_with_underscores>`
/// in a systemd slice).
pub fn in_pod_cgroup(pid: i32, pod_uid: &str) -> bool {
    if pod_uid.is_empty() {
        return false;
    }
    let Ok(text) = fs::read_to_string(format!("/proc/{pid}/cgroup")) else {
        return false;
    };
    let systemd = pod_uid.replace('-', "_");
    text.lines().any(|l| {
        let path = l.splitn(3, ':').nth(2).unwrap_or_default();
        path.contains(&format!("pod{pod_uid}")) || path.contains(&format!("pod{systemd}"))
    })
}

/// What the kernel shows of one process: wait channel, stack, the system
/// call it is blocked in, the file that call names and the mount holding
/// it. Best effort: anything unreadable is left out, never an error.
pub fn kernel_task(p: &Process) -> unstuck_core::doctor::node::KernelTask {
    use unstuck_core::doctor::node::kernel::{
        FileArg, mount_of, parse_stack, parse_syscall, syscall_info,
    };
    let pid = p.pid;
    let read = |what: &str| fs::read_to_string(format!("/proc/{pid}/{what}")).ok();
    let wchan = read("wchan").map(|w| w.trim().to_owned());
    let stack = read("stack").map(|s| parse_stack(&s)).unwrap_or_default();
    let syscall = read("syscall").map(|s| s.trim().to_owned());
    let path = syscall.as_deref().and_then(parse_syscall).and_then(|call| {
        match syscall_info(call.number)?.1? {
            FileArg::Path(n) => read_c_string(pid, call.args[n]).map(PathBuf::from),
            FileArg::Fd(n) => fs::read_link(format!("/proc/{pid}/fd/{}", call.args[n])).ok(),
        }
    });
    let mount = path.as_ref().and_then(|path| {
        let mounts = unstuck_core::doctor::node::parse_mountinfo(&read("mountinfo")?);
        mount_of(&mounts, path).cloned()
    });
    unstuck_core::doctor::node::KernelTask {
        pid,
        start_time: p.start_time,
        state: p.state,
        command: p.command_line(),
        wchan,
        stack,
        syscall,
        path,
        mount,
    }
}

/// Reads a NUL-terminated string (at most 4 KiB, PATH_MAX) at `addr` in
/// a process's memory. A blocked `openat` keeps its path only there.
fn read_c_string(pid: i32, addr: u64) -> Option<String> {
    use std::os::unix::fs::FileExt;
    if addr == 0 {
        return None;
    }
    let mem = fs::File::open(format!("/proc/{pid}/mem")).ok()?;
    let mut buf = vec![0u8; 4096];
    let mut len = 0;
    // Read page-sized pieces: the string may end right before an unmapped page.
    while len < buf.len() {
        let chunk = (4096 - ((addr as usize + len) % 4096)).min(buf.len() - len);
        let n = mem
            .read_at(&mut buf[len..len + chunk], addr + len as u64)
            .ok()?;
        if n == 0 {
            break;
        }
        if let Some(end) = buf[len..len + n].iter().position(|&b| b == 0) {
            return Some(String::from_utf8_lossy(&buf[..len + end]).into_owned());
        }
        len += n;
    }
    None
}

#[cfg(test)]
mod tests;
