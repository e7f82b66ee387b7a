//! Where one local cluster lives: its directory, ports, addresses, link
//! and cgroup names. All of it derives from the cluster's name and a slot
//! number, so two clusters on one machine never share a port, socket,
//! bridge, subnet or cgroup, and a crashed run's leftovers can be found
//! again from its directory alone.

use std::{
    net::Ipv4Addr,
    path::{Path, PathBuf},
};

/// Slots a machine can hold at once.
pub const MAX_SLOTS: u8 = 48;
/// First port of slot 0; every slot owns a block of 100 ports.
const PORT_BASE: u16 = 21000;

/// The fixed coordinates of one local cluster.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Layout {
    pub name: String,
    pub slot: u8,
    pub dir: PathBuf,
}

impl Layout {
    pub fn new(name: &str, slot: u8, state_root: &Path) -> Self {
        Self {
            name: name.to_string(),
            slot,
            dir: state_root.join(name),
        }
    }

    fn port(&self, offset: u16) -> u16 {
        PORT_BASE + u16::from(self.slot) * 100 + offset
    }

    pub fn etcd_client_port(&self) -> u16 {
        self.port(1)
    }
    pub fn etcd_peer_port(&self) -> u16 {
        self.port(2)
    }
    pub fn apiserver_port(&self) -> u16 {
        self.port(43)
    }
    pub fn controller_manager_port(&self) -> u16 {
        self.port(57)
    }
    pub fn scheduler_port(&self) -> u16 {
        self.port(59)
    }
    pub fn kubelet_port(&self) -> u16 {
        self.port(50)
    }
    pub fn kubelet_healthz_port(&self) -> u16 {
        self.port(48)
    }

    /// Every TCP port the cluster listens on, with the component that owns it.
    pub fn ports(&self) -> Vec<(&'static str, Ipv4Addr, u16)> {
        let lo = Ipv4Addr::LOCALHOST;
        vec![
            ("etcd client", lo, self.etcd_client_port()),
            ("etcd peer", lo, self.etcd_peer_port()),
            ("kube-apiserver", self.node_ip(), self.apiserver_port()),
            (
                "kube-controller-manager",
                lo,
                self.controller_manager_port(),
            ),
            ("kube-scheduler", lo, self.scheduler_port()),
            ("kubelet", self.node_ip(), self.kubelet_port()),
            ("kubelet healthz", lo, self.kubelet_healthz_port()),
        ]
    }

    /// The node's address: on a bridge the cluster creates itself, so the
    /// `kubernetes` Service endpoint is not loopback and nothing leaves the machine.
    pub fn node_ip(&self) -> Ipv4Addr {
        Ipv4Addr::new(10, 213, self.slot, 1)
    }
    /// The host bridge carrying [`Self::node_ip`].
    pub fn host_link(&self) -> String {
        format!("unstk{}h", self.slot)
    }
    /// The CNI bridge pods attach to.
    pub fn pod_bridge(&self) -> String {
        format!("unstk{}p", self.slot)
    }
    pub fn pod_subnet(&self) -> String {
        format!("10.214.{}.0/24", self.slot)
    }
    pub fn service_cidr(&self) -> String {
        format!("10.215.{}.0/24", self.slot)
    }
    /// First address of the service range: the `kubernetes` Service's ClusterIP.
    pub fn service_ip(&self) -> Ipv4Addr {
        Ipv4Addr::new(10, 215, self.slot, 1)
    }

    pub fn node_name(&self) -> String {
        format!("{}-node", self.name)
    }
    /// The cgroup subtree (in every hierarchy) holding all the cluster's pods.
    pub fn cgroup_root(&self) -> String {
        format!("/unstuck-{}", self.name)
    }

    pub fn pki_dir(&self) -> PathBuf {
        self.dir.join("pki")
    }
    pub fn logs_dir(&self) -> PathBuf {
        self.dir.join("logs")
    }
    pub fn log_file(&self, component: &str) -> PathBuf {
        self.logs_dir().join(format!("{component}.log"))
    }
    pub fn etcd_dir(&self) -> PathBuf {
        self.dir.join("etcd")
    }
    pub fn kubelet_dir(&self) -> PathBuf {
        self.dir.join("kubelet")
    }
    pub fn containerd_dir(&self) -> PathBuf {
        self.dir.join("containerd")
    }
    pub fn containerd_socket(&self) -> PathBuf {
        self.dir.join("containerd.sock")
    }
    /// containerd's `config_path`: registry hosts a scenario adds.
    pub fn registry_hosts_dir(&self) -> PathBuf {
        self.dir.join("containerd/certs.d")
    }
    pub fn cni_conf_dir(&self) -> PathBuf {
        self.dir.join("cni/net.d")
    }
    pub fn cni_data_dir(&self) -> PathBuf {
        self.dir.join("cni/ipam")
    }
    pub fn state_file(&self) -> PathBuf {
        self.dir.join("state.json")
    }
    /// The admin kubeconfig a user or test points kubectl at.
    pub fn admin_kubeconfig(&self) -> PathBuf {
        self.dir.join("admin.kubeconfig")
    }
    pub fn kubeconfig(&self, user: &str) -> PathBuf {
        self.dir.join(format!("{user}.kubeconfig"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn two_slots_share_no_port_link_subnet_or_directory() {
        let root = Path::new("/var/lib/unstuck/clusters");
        let a = Layout::new("a", 0, root);
        let b = Layout::new("b", 1, root);
        let pa: HashSet<u16> = a.ports().iter().map(|p| p.2).collect();
        let pb: HashSet<u16> = b.ports().iter().map(|p| p.2).collect();
        assert_eq!(
            pa.len(),
            a.ports().len(),
            "ports within one slot are distinct"
        );
        assert!(pa.is_disjoint(&pb));
        assert_ne!(a.host_link(), b.host_link());
        assert_ne!(a.pod_bridge(), b.pod_bridge());
        assert_ne!(a.pod_subnet(), b.pod_subnet());
        assert_ne!(a.node_ip(), b.node_ip());
        assert_ne!(a.dir, b.dir);
        assert_ne!(a.cgroup_root(), b.cgroup_root());
    }

    #[test]
    fn link_names_fit_the_kernel_limit_for_every_slot() {
        let l = Layout::new("x", MAX_SLOTS - 1, Path::new("/r"));
        assert!(l.host_link().len() <= 15 && l.pod_bridge().len() <= 15);
    }
}
