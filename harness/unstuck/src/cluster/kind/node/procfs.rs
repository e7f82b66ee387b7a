//! What a kind node's /proc says, read by short bash scripts run through
//! `docker exec` (one record per line, builtins only where a line is per
//! process) and parsed here with the local node's own parsers.

use std::path::{Path, PathBuf};

use crate::host;
use crate::node::{HolderUse, HolderUseKind, KernelTask};

/// Field and list separators of the scripts' records (ASCII unit and
/// record separators never occur in /proc's text).
const FIELD: char = '\x1f';
const ITEM: char = '\x1e';

/// One line per process: `pid FIELD stat FIELD argv joined by ITEM`.
/// Builtins only, so listing ~200 processes forks nothing.
pub(super) const PROCESSES_SCRIPT: &str = r#"
for d in /proc/[0-9]*; do
  IFS= read -r s < "$d/stat" 2>/dev/null || continue
  a=(); mapfile -d '' -t a < "$d/cmdline" 2>/dev/null
  IFS=$'\x1e'; printf '%s\x1f%s\x1f%s\n' "${d#/proc/}" "$s" "${a[*]}"; unset IFS
done
"#;

/// The processes whose cgroup names pod `$1`, with what the kernel shows
/// of each: `pid F stat F argv F wchan F syscall F stack lines F fd=target...`.
pub(super) const POD_PROCESSES_SCRIPT: &str = r#"
u="$1"; us="${u//-/_}"
for d in /proc/[0-9]*; do
  m=; while IFS= read -r l; do case "$l" in *"pod$u"*|*"pod$us"*) m=1;; esac; done < "$d/cgroup" 2>/dev/null
  [ -n "$m" ] || continue
  IFS= read -r s < "$d/stat" 2>/dev/null || continue
  a=(); mapfile -d '' -t a < "$d/cmdline" 2>/dev/null
  w=; IFS= read -r w < "$d/wchan" 2>/dev/null
  c=; IFS= read -r c < "$d/syscall" 2>/dev/null
  k=(); mapfile -t k < "$d/stack" 2>/dev/null
  f=$(find "$d/fd" -mindepth 1 -maxdepth 1 -printf '%f=%l\x1e' 2>/dev/null)
  IFS=$'\x1e'; printf '%s\x1f%s\x1f%s\x1f%s\x1f%s\x1f%s\x1f%s\n' "${d#/proc/}" "$s" "${a[*]}" "$w" "$c" "${k[*]}" "$f"; unset IFS
done
"#;

/// Every process's cwd, root and open files as `path TAB target` (one
/// `find`, no fork per process).
pub(super) const LINKS_SCRIPT: &str = r#"find /proc/[0-9]*/cwd /proc/[0-9]*/root /proc/[0-9]*/fd/ -maxdepth 1 -type l -printf '%p\t%l\n' 2>/dev/null; true"#;

/// Parses [`PROCESSES_SCRIPT`] output.
pub(super) fn parse_processes(text: &str) -> Vec<host::Process> {
    let mut out: Vec<host::Process> = text
        .lines()
        .filter_map(|line| {
            let mut f = line.splitn(3, FIELD);
            let pid = f.next()?.parse().ok()?;
            let (state, start_time) = host::parse_stat(f.next()?)?;
            Some(host::Process {
                pid,
                start_time,
                state,
                cmdline: items(f.next().unwrap_or_default()),
            })
        })
        .collect();
    out.sort_by_key(|p| p.pid);
    out
}

fn items(field: &str) -> Vec<String> {
    field
        .split(ITEM)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Parses [`POD_PROCESSES_SCRIPT`] output. The path a blocked call names
/// is known only for fd arguments (a path argument lives in the process's
/// memory, which the local node reads and a shell cannot).
pub(super) fn parse_pod_processes(text: &str) -> Vec<(KernelTask, Vec<(u32, PathBuf)>)> {
    use unstuck_core::doctor::node::kernel::{FileArg, parse_stack, parse_syscall, syscall_info};
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split(FIELD).collect();
            if f.len() < 7 {
                return None;
            }
            let pid = f[0].parse().ok()?;
            let (state, start_time) = host::parse_stat(f[1])?;
            let fds: Vec<(u32, PathBuf)> = items(f[6])
                .into_iter()
                .filter_map(|kv| {
                    let (n, target) = kv.split_once('=')?;
                    Some((n.parse().ok()?, PathBuf::from(target)))
                })
                .collect();
            let syscall = (!f[4].is_empty()).then(|| f[4].trim().to_owned());
            let path = syscall.as_deref().and_then(parse_syscall).and_then(|call| {
                match syscall_info(call.number)?.1? {
                    FileArg::Fd(n) => fds
                        .iter()
                        .find(|(fd, _)| u64::from(*fd) == call.args[n])
                        .map(|(_, p)| p.clone()),
                    FileArg::Path(_) => None,
                }
            });
            let task = KernelTask {
                pid,
                start_time,
                state,
                command: items(f[2]).join(" "),
                wchan: (!f[3].is_empty()).then(|| f[3].trim().to_owned()),
                stack: parse_stack(&items(f[5]).join("\n")),
                syscall,
                path,
                mount: None,
            };
            Some((task, fds))
        })
        .collect()
}

/// Parses [`LINKS_SCRIPT`] output into each process's uses at or below `dir`.
pub(super) fn parse_links(text: &str, dir: &Path) -> Vec<(i32, HolderUse)> {
    let mut uses: Vec<(i32, HolderUse)> = text
        .lines()
        .filter_map(|line| {
            let (link, target) = line.split_once('\t')?;
            // An unlinked file or directory reads as "<path> (deleted)".
            let target = PathBuf::from(target.strip_suffix(" (deleted)").unwrap_or(target));
            if !target.starts_with(dir) {
                return None;
            }
            let rest = link.strip_prefix("/proc/")?;
            let (pid, what) = rest.split_once('/')?;
            let kind = match what {
                "cwd" => HolderUseKind::Cwd,
                "root" => HolderUseKind::Root,
                fd => HolderUseKind::Fd(fd.strip_prefix("fd/")?.parse().ok()?),
            };
            Some((pid.parse().ok()?, HolderUse { kind, path: target }))
        })
        .collect();
    uses.sort_by_key(|(pid, u)| {
        (
            *pid,
            match u.kind {
                HolderUseKind::Cwd => 0,
                HolderUseKind::Root => 1,
                HolderUseKind::Fd(n) => 2 + u64::from(n),
            },
        )
    });
    uses
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_records_parse_with_spaces_and_parentheses_in_names() {
        let text = "1\x1f1 (systemd) S 0 1 1 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 42 0 0\x1f/sbin/init\n\
                    77\x1f77 (containerd-shim (x)) T 1 77 77 0 -1 0 0 0 0 0 0 0 0 0 20 0 10 0 987654 0 0\x1f/usr/bin/containerd-shim-runc-v2\x1e-namespace\x1ek8s.io\x1e-id\x1eabc\x1e-address\x1e/run/containerd/containerd.sock\n\
                    2\x1f2 (kthreadd) S 0 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 3 0 0\x1f\n\
                    garbage line\n";
        let p = parse_processes(text);
        assert_eq!(p.len(), 3);
        assert_eq!(p[0].pid, 1);
        assert_eq!(p[1].pid, 2);
        assert!(p[1].cmdline.is_empty());
        assert_eq!(p[2].state, 'T');
        assert_eq!(p[2].start_time, 987654);
        assert_eq!(p[2].cmdline[1..3], ["-namespace", "k8s.io"]);
    }

    #[test]
    fn links_under_a_directory_become_holder_uses_and_deleted_suffixes_go() {
        let dir = Path::new("/var/lib/kubelet/pods/u1/volumes/kubernetes.io~empty-dir/data");
        let text = "/proc/10/cwd\t/var/lib/kubelet/pods/u1/volumes/kubernetes.io~empty-dir/data/unstuck-busy\n\
                    /proc/10/root\t/\n\
                    /proc/10/fd/3\t/var/lib/kubelet/pods/u1/volumes/kubernetes.io~empty-dir/data/f (deleted)\n\
                    /proc/11/fd/0\t/dev/null\n\
                    /proc/12/cwd\t/var/lib/kubelet/pods/u1/volumes/kubernetes.io~empty-dir/data-other\n";
        let uses = parse_links(text, dir);
        assert_eq!(uses.len(), 2, "{uses:?}");
        assert_eq!(uses[0].0, 10);
        assert_eq!(uses[0].1.kind, HolderUseKind::Cwd);
        assert_eq!(uses[1].1.kind, HolderUseKind::Fd(3));
        assert_eq!(uses[1].1.path, dir.join("f"));
    }

    #[test]
    fn a_pod_process_blocked_on_an_fd_names_its_file() {
        // read(2) on fd 3: number 0, first argument 0x3.
        let text = "4242\x1f4242 (sh) D 1 4242 4242 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 555 0 0\x1fsh\x1e-c\x1ecat f\x1fpipe_read\x1f0 0x3 0x7ffd 0x1000 0x0 0x0 0x0 0x7ffd 0x7f00\x1f[<0>] pipe_read+0x1/0x2\x1e[<0>] vfs_read+0x1/0x2\x1f0=/dev/null\x1e3=/data/f\x1e\n";
        let tasks = parse_pod_processes(text);
        assert_eq!(tasks.len(), 1);
        let (t, fds) = &tasks[0];
        assert_eq!((t.pid, t.state, t.start_time), (4242, 'D', 555));
        assert_eq!(t.command, "sh -c cat f");
        assert_eq!(t.wchan.as_deref(), Some("pipe_read"));
        assert_eq!(t.stack, ["pipe_read", "vfs_read"]);
        assert_eq!(t.path.as_deref(), Some(Path::new("/data/f")));
        assert_eq!(fds.len(), 2);
    }
}
