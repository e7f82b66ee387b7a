//! The configuration files and command lines of one local cluster's
//! components, rendered from its [`Layout`]. Pure text: tested without
//! starting anything.

use std::path::{Path, PathBuf};

use super::layout::Layout;

/// A kubeconfig with embedded paths to a client certificate.
pub fn kubeconfig(server: &str, ca: &Path, cert: &Path, key: &Path, cluster: &str) -> String {
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: {cluster}
  cluster:
    server: {server}
    certificate-authority: {ca}
users:
- name: {cluster}
  user:
    client-certificate: {cert}
    client-key: {key}
contexts:
- name: {cluster}
  context:
    cluster: {cluster}
    user: {cluster}
current-context: {cluster}
",
        ca = ca.display(),
        cert = cert.display(),
        key = key.display(),
    )
}

/// The apiserver URL every component and user dials.
pub fn server_url(l: &Layout) -> String {
    format!("https://{}:{}", l.node_ip(), l.apiserver_port())
}

/// containerd's config: everything (root, state, sockets, runc root, netns
/// mounts, CNI config) under the cluster's own directory, so a second
/// containerd on the machine never meets this one.
pub fn containerd_toml(l: &Layout) -> String {
    let d = l.containerd_dir();
    format!(
        r#"version = 2
root = "{root}"
state = "{state}"
# Plugins that write outside root/state or need kernel features this host lacks.
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp"]

[grpc]
  address = "{sock}"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{pause}"
  # Writing a negative oom_score_adj needs CAP_SYS_RESOURCE, which this
  # kind of VM lacks; clamp instead of failing every sandbox.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  enable_selinux = false
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "{runc_root}"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{cni_conf}"
  # A scenario's registry: step writes <host>/hosts.toml here.
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "{hosts}"
"#,
        root = d.join("root").display(),
        state = d.join("state").display(),
        sock = l.containerd_socket().display(),
        pause = PAUSE_IMAGE,
        runc_root = d.join("runc").display(),
        cni_conf = l.cni_conf_dir().display(),
        hosts = l.registry_hosts_dir().display(),
    )
}

/// The sandbox image, built from files by ci/build-images.sh.
pub const PAUSE_IMAGE: &str = "registry.k8s.io/pause:3.10";
/// The image scenario pods run, built the same way.
pub const TEST_IMAGE: &str = "unstuck.local/busybox:1.35";

/// A bridge network with host-local addresses. No IP masquerade and no
/// portmap: pods need no way out, so the CNI plugins install no iptables
/// rules that could outlive the cluster.
/// The file name of the cluster's CNI configuration in its conf dir.
pub const CNI_CONFLIST_NAME: &str = "10-unstuck.conflist";

pub fn cni_conflist(l: &Layout) -> String {
    serde_json::json!({
        "cniVersion": "1.0.0",
        "name": format!("unstuck-{}", l.name),
        "plugins": [{
            "type": "bridge",
            "bridge": l.pod_bridge(),
            "isGateway": true,
            "ipMasq": false,
            "hairpinMode": true,
            "ipam": {
                "type": "host-local",
                "dataDir": l.cni_data_dir(),
                "ranges": [[{ "subnet": l.pod_subnet() }]],
            }
        }]
    })
    .to_string()
}

/// The kubelet's configuration file.
pub fn kubelet_yaml(l: &Layout, ca: &Path) -> String {
    format!(
        r#"apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: {node_ip}
port: {port}
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: {healthz}
containerRuntimeEndpoint: unix://{sock}
cgroupDriver: cgroupfs
cgroupRoot: {cgroup_root}
# cgroup v1 is what this kind of VM has; v1.35+ refuses it unless told.
failCgroupV1: false
failSwapOn: false
# The default -999 needs CAP_SYS_RESOURCE.
oomScoreAdj: 0
authentication:
  anonymous: {{enabled: false}}
  webhook: {{enabled: true}}
  x509: {{clientCAFile: {ca}}}
authorization: {{mode: Webhook}}
# Images are imported by hand and cannot be pulled again: never collect them.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {{memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}}
clusterDomain: cluster.local
serializeImagePulls: false
# Faster reactions than production defaults: a throwaway test node
# (docs/timing.md gives each setting's default and why the behaviour a
# scenario proves stays the same).
nodeStatusUpdateFrequency: 5s
# Renewed every quarter of this (5 s; default 40 s, renewed every 10 s), so
# that the controller-manager's shorter --node-monitor-grace-period still
# allows four missed renewals before it calls the node Unknown.
nodeLeaseDurationSeconds: 20
syncFrequency: 10s
fileCheckFrequency: 10s
# Deadline of each CRI call (default 2m): a wedged runtime shows the same
# "DeadlineExceeded" errors, after 10 s instead of minutes. Healthy calls
# on this machine take well under a second.
runtimeRequestTimeout: 10s
shutdownGracePeriod: 0s
localStorageCapacityIsolation: false
"#,
        node_ip = l.node_ip(),
        port = l.kubelet_port(),
        healthz = l.kubelet_healthz_port(),
        sock = l.containerd_socket().display(),
        cgroup_root = l.cgroup_root(),
        ca = ca.display(),
    )
}

/// One component's command line.
#[derive(Clone, Debug)]
pub struct ComponentCommand {
    pub name: &'static str,
    pub program: PathBuf,
    pub args: Vec<String>,
}

fn p(path: PathBuf) -> String {
    path.display().to_string()
}

/// The flags that point a control-plane component (controller-manager,
/// scheduler) at its kubeconfig: for its own API calls and for checking
/// who calls its secure port.
fn kubeconfig_flags(kubeconfig: &Path) -> [String; 3] {
    let kc = kubeconfig.display();
    [
        format!("--kubeconfig={kc}"),
        format!("--authentication-kubeconfig={kc}"),
        format!("--authorization-kubeconfig={kc}"),
    ]
}

/// Command lines of the control plane and node components, in start order.
/// Past 100 lines on purpose: it is one table of six command lines, read
/// (and compared with local-up-cluster.sh) as a whole.
pub fn component_commands(l: &Layout, bins: &crate::components::Binaries) -> Vec<ComponentCommand> {
    let pki = l.pki_dir();
    let k = |f: &str| p(pki.join(f));
    let etcd_url = format!("http://127.0.0.1:{}", l.etcd_client_port());
    let peer_url = format!("http://127.0.0.1:{}", l.etcd_peer_port());
    vec![
        ComponentCommand {
            name: "etcd",
            program: bins.etcd.clone(),
            args: vec![
                "--name=default".into(),
                format!("--data-dir={}", p(l.etcd_dir())),
                format!("--listen-client-urls={etcd_url}"),
                format!("--advertise-client-urls={etcd_url}"),
                format!("--listen-peer-urls={peer_url}"),
                format!("--initial-advertise-peer-urls={peer_url}"),
                format!("--initial-cluster=default={peer_url}"),
                // A throwaway cluster: durability is not worth the fsync latency.
                "--unsafe-no-fsync".into(),
                "--quota-backend-bytes=2147483648".into(),
            ],
        },
        ComponentCommand {
            name: "kube-apiserver",
            program: bins.k8s("kube-apiserver"),
            args: vec![
                format!("--etcd-servers={etcd_url}"),
                format!("--advertise-address={}", l.node_ip()),
                format!("--bind-address={}", l.node_ip()),
                format!("--secure-port={}", l.apiserver_port()),
                format!("--tls-cert-file={}", k("apiserver.crt")),
                format!("--tls-private-key-file={}", k("apiserver.key")),
                format!("--client-ca-file={}", k("ca.crt")),
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local".into(),
                format!("--service-account-key-file={}", k("sa.pub")),
                format!("--service-account-signing-key-file={}", k("sa.key")),
                format!("--service-cluster-ip-range={}", l.service_cidr()),
                "--authorization-mode=Node,RBAC".into(),
                "--enable-admission-plugins=NodeRestriction".into(),
                "--allow-privileged=true".into(),
                format!(
                    "--kubelet-client-certificate={}",
                    k("apiserver-kubelet-client.crt")
                ),
                format!("--kubelet-client-key={}", k("apiserver-kubelet-client.key")),
                "--kubelet-preferred-address-types=InternalIP".into(),
                // Aggregation layer: these make APIService objects real,
                // with Available conditions computed by the aggregator.
                format!("--requestheader-client-ca-file={}", k("front-proxy-ca.crt")),
                "--requestheader-allowed-names=front-proxy-client".into(),
                "--requestheader-username-headers=X-Remote-User".into(),
                "--requestheader-group-headers=X-Remote-Group".into(),
                "--requestheader-extra-headers-prefix=X-Remote-Extra-".into(),
                format!("--proxy-client-cert-file={}", k("front-proxy-client.crt")),
                format!("--proxy-client-key-file={}", k("front-proxy-client.key")),
                // Route to endpoint IPs directly: no kube-proxy runs here.
                "--enable-aggregator-routing=true".into(),
                "--profiling=false".into(),
            ],
        },
        ComponentCommand {
            name: "kube-controller-manager",
            program: bins.k8s("kube-controller-manager"),
            args: [
                kubeconfig_flags(&l.kubeconfig("controller-manager")).to_vec(),
                vec![
                    format!("--service-account-private-key-file={}", k("sa.key")),
                    format!("--root-ca-file={}", k("ca.crt")),
                    format!("--cluster-signing-cert-file={}", k("ca.crt")),
                    format!("--cluster-signing-key-file={}", k("ca.key")),
                    "--use-service-account-credentials=true".into(),
                    "--controllers=*".into(),
                    // Leader election stays on: its Lease is the evidence the
                    // doctor uses to call kube-controller-manager alive.
                    "--leader-elect=true".into(),
                    "--bind-address=127.0.0.1".into(),
                    format!("--secure-port={}", l.controller_manager_port()),
                    format!("--service-cluster-ip-range={}", l.service_cidr()),
                    // A silent node is called Unknown ("Kubelet stopped
                    // posting node status.") after 20 s instead of the
                    // default 50 s; the kubelet renews its lease every 5 s.
                    "--node-monitor-grace-period=20s".into(),
                    "--profiling=false".into(),
                ],
            ]
            .concat(),
        },
        ComponentCommand {
            name: "kube-scheduler",
            program: bins.k8s("kube-scheduler"),
            args: [
                kubeconfig_flags(&l.kubeconfig("scheduler")).to_vec(),
                vec![
                    "--leader-elect=false".into(),
                    "--bind-address=127.0.0.1".into(),
                    format!("--secure-port={}", l.scheduler_port()),
                    "--profiling=false".into(),
                ],
            ]
            .concat(),
        },
        ComponentCommand {
            name: "containerd",
            program: bins.containerd.clone(),
            args: vec![format!("--config={}", p(l.dir.join("containerd.toml")))],
        },
        ComponentCommand {
            name: "kubelet",
            program: bins.k8s("kubelet"),
            args: vec![
                format!("--config={}", p(l.dir.join("kubelet.yaml"))),
                format!("--kubeconfig={}", p(l.kubeconfig("kubelet"))),
                format!("--hostname-override={}", l.node_name()),
                format!("--node-ip={}", l.node_ip()),
                format!("--root-dir={}", p(l.kubelet_dir())),
                format!("--cert-dir={}", p(l.kubelet_dir().join("pki"))),
                // v=2 logs every SyncLoop ADD/DELETE and volume operation: the evidence for node-level cases.
                "--v=2".into(),
            ],
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout() -> Layout {
        Layout::new("t", 3, Path::new("/var/lib/unstuck/clusters"))
    }

    #[test]
    fn containerd_keeps_all_its_state_in_the_cluster_directory() {
        let toml = containerd_toml(&layout());
        // Only the (read-only) CNI plugin binaries live elsewhere.
        for line in toml
            .lines()
            .filter(|l| l.contains("= \"/") && !l.contains("bin_dir"))
        {
            assert!(
                line.contains("/var/lib/unstuck/clusters/t/"),
                "path outside the cluster dir: {line}"
            );
        }
        assert!(toml.contains("netns_mounts_under_state_dir = true"));
        assert!(toml.contains("restrict_oom_score_adj = true"));
    }

    #[test]
    fn cni_uses_the_slot_bridge_and_no_masquerade() {
        let v: serde_json::Value = serde_json::from_str(&cni_conflist(&layout())).unwrap();
        assert_eq!(v["plugins"][0]["bridge"], "unstk3p");
        assert_eq!(v["plugins"][0]["ipMasq"], false);
        assert_eq!(
            v["plugins"][0]["ipam"]["ranges"][0][0]["subnet"],
            "10.214.3.0/24"
        );
    }

    #[test]
    fn controller_manager_and_scheduler_each_use_their_own_kubeconfig() {
        let l = layout();
        let bins = crate::components::Binaries {
            k8s_version: "v0.0.0".into(),
            k8s_dir: "/k8s".into(),
            etcd: "/etcd".into(),
            containerd: "/containerd".into(),
            ctr: "/ctr".into(),
            ip: "/ip".into(),
            images: Vec::new(),
        };
        let commands = component_commands(&l, &bins);
        for (component, user) in [
            ("kube-controller-manager", "controller-manager"),
            ("kube-scheduler", "scheduler"),
        ] {
            let args = &commands
                .iter()
                .find(|c| c.name == component)
                .unwrap_or_else(|| panic!("no {component} command"))
                .args;
            let kc = format!("/var/lib/unstuck/clusters/t/{user}.kubeconfig");
            assert_eq!(
                args[..3],
                [
                    format!("--kubeconfig={kc}"),
                    format!("--authentication-kubeconfig={kc}"),
                    format!("--authorization-kubeconfig={kc}"),
                ],
                "{component}"
            );
            assert!(
                !args[3..].iter().any(|a| a.contains("kubeconfig")),
                "{component}: {args:?}"
            );
            assert_eq!(args.last().unwrap(), "--profiling=false", "{component}");
        }
    }

    #[test]
    fn kubelet_config_disables_what_this_host_cannot_do() {
        let y = kubelet_yaml(&layout(), Path::new("/ca.crt"));
        assert!(y.contains("oomScoreAdj: 0"));
        assert!(y.contains("failCgroupV1: false"));
        assert!(y.contains("cgroupRoot: /unstuck-t"));
        assert!(y.contains("port: 21350"));
    }
}
