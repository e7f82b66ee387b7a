//! Checks made before a local cluster is started, each failing with what is
//! wrong and how to fix it.

use std::net::{Ipv4Addr, SocketAddrV4, TcpListener};

use super::layout::Layout;
use crate::{cluster::ClusterError, host};

/// inotify instances one local cluster opens, with headroom for its pods
/// (measured on v1.34.4: 18 — kubelet 6, kube-apiserver 6,
/// kube-controller-manager 5, containerd 1).
pub const INOTIFY_PER_CLUSTER: usize = 25;

/// Enough inotify instances left for one more cluster. Several clusters
/// side by side (isolated scenarios, parallel tests) run out of the
/// kernel's default 128 quickly.
pub fn check_inotify() -> Result<(), ClusterError> {
    match host::inotify_instances() {
        (in_use, Some(limit)) => inotify_headroom(in_use, limit),
        (_, None) => Ok(()),
    }
}

/// The decision behind [`check_inotify`].
pub fn inotify_headroom(in_use: usize, limit: usize) -> Result<(), ClusterError> {
    if in_use + INOTIFY_PER_CLUSTER > limit {
        Err(ClusterError::InotifyExhausted { in_use, limit })
    } else {
        Ok(())
    }
}

pub fn check_root() -> Result<(), ClusterError> {
    if host::is_root() {
        Ok(())
    } else {
        Err(ClusterError::NotRoot)
    }
}

/// The controllers the kubelet's cgroupfs driver needs on cgroup v1.
const REQUIRED_V1: [&str; 5] = ["cpu", "cpuacct", "cpuset", "memory", "pids"];

pub fn check_cgroups() -> Result<(), ClusterError> {
    let unified = std::path::Path::new("/sys/fs/cgroup/cgroup.controllers").exists();
    check_cgroup_layout(&host::cgroup_v1_hierarchies(), unified)
}

/// The decision behind [`check_cgroups`], on the hierarchies found.
pub fn check_cgroup_layout(
    hierarchies: &[std::path::PathBuf],
    unified_root: bool,
) -> Result<(), ClusterError> {
    if hierarchies.is_empty() {
        if unified_root {
            return Ok(());
        }
        return Err(ClusterError::Cgroups {
            detail: "no cgroup filesystem is mounted under /sys/fs/cgroup".into(),
        });
    }
    // A hierarchy directory is named after its controllers, e.g. cpu,cpuacct.
    let mounted: Vec<String> = hierarchies
        .iter()
        .filter_map(|h| h.file_name())
        .flat_map(|n| {
            n.to_string_lossy()
                .split(',')
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect();
    let missing: Vec<&str> = REQUIRED_V1
        .iter()
        .copied()
        .filter(|c| !mounted.iter().any(|m| m == c))
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(ClusterError::Cgroups {
            detail: format!("missing cgroup v1 controller(s) {}", missing.join(", ")),
        })
    }
}

/// Every port the cluster will listen on must be free. The node IP does not
/// exist yet, so its ports are probed on the wildcard address, which
/// conflicts with a listener on any address.
pub fn check_ports(l: &Layout) -> Result<(), ClusterError> {
    for (component, addr, port) in l.ports() {
        let probe = if addr == Ipv4Addr::LOCALHOST {
            addr
        } else {
            Ipv4Addr::UNSPECIFIED
        };
        if TcpListener::bind(SocketAddrV4::new(probe, port)).is_err() {
            return Err(ClusterError::PortInUse {
                component,
                addr,
                port,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inotify_headroom_names_the_limit_and_the_fix() {
        assert!(inotify_headroom(20, 128).is_ok());
        let e = inotify_headroom(110, 128).unwrap_err().to_string();
        assert!(
            e.contains("110 of fs.inotify.max_user_instances=128"),
            "{e}"
        );
        assert!(
            e.contains("sysctl -w fs.inotify.max_user_instances=1024"),
            "{e}"
        );
    }
    use std::path::Path;

    #[test]
    fn cgroup_layouts_are_judged_by_their_controllers() {
        let v1 = |names: &[&str]| {
            names
                .iter()
                .map(|n| std::path::PathBuf::from("/sys/fs/cgroup").join(n))
                .collect::<Vec<_>>()
        };
        // This VM's hybrid layout.
        assert!(
            check_cgroup_layout(
                &v1(&[
                    "blkio", "cpu", "cpuacct", "cpuset", "memory", "pids", "systemd"
                ]),
                true
            )
            .is_ok()
        );
        assert!(
            check_cgroup_layout(&v1(&["cpu,cpuacct", "cpuset", "memory", "pids"]), false).is_ok()
        );
        assert!(check_cgroup_layout(&[], true).is_ok(), "pure cgroup v2");
        let err = check_cgroup_layout(&v1(&["cpu", "cpuacct", "cpuset"]), false)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("cgroup layout not supported") && err.contains("memory, pids"),
            "{err}"
        );
        assert!(
            check_cgroup_layout(&[], false)
                .unwrap_err()
                .to_string()
                .contains("no cgroup filesystem")
        );
    }

    #[test]
    fn a_taken_port_is_named_with_its_component() {
        let l = Layout::new("p", 15, Path::new("/tmp"));
        let etcd = l.etcd_client_port();
        let _held = TcpListener::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, etcd)).unwrap();
        let err = check_ports(&l).unwrap_err().to_string();
        assert!(
            err.contains(&format!("port {etcd}")) && err.contains("etcd client"),
            "{err}"
        );
    }
}
