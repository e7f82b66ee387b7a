//! Where the component binaries are: the version-keyed cache that
//! ci/setup.sh fills, and the Debian packages it installs.

use std::path::{Path, PathBuf};

/// The Kubernetes version unstuck builds and tests by default.
pub const DEFAULT_K8S_VERSION: &str = "v1.34.4";
/// The versions `unstuck run --k8s-version supported` runs, oldest first:
/// the newest patch release of each minor that the Go module proxy serves
/// (built by `ci/setup.sh --k8s-version V`).
pub const SUPPORTED_K8S_VERSIONS: &[&str] =
    &["v1.33.13", "v1.34.4", "v1.35.4", "v1.36.3", "v1.37.2"];
/// The newest of them, which the tests run end to end besides the default.
pub const NEWEST_K8S_VERSION: &str = "v1.37.2";
/// The etcd version built beside it (the one Kubernetes v1.34 pins).
pub const DEFAULT_ETCD_VERSION: &str = "v3.5.21";

const K8S_COMMANDS: [&str; 5] = [
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubelet",
    "kubectl",
];

#[derive(Debug, thiserror::Error)]
pub enum ComponentsError {
    #[error(
        "Kubernetes {version} components are not built: missing {missing}.\n  \
         Build them (tens of minutes the first time, seconds when cached) with:\n    \
         sudo ci/setup.sh --k8s-version {version}"
    )]
    KubernetesMissing { version: String, missing: String },
    #[error("etcd {version} is not built ({path}).\n  Build it with:\n    sudo ci/setup.sh")]
    EtcdMissing { version: String, path: PathBuf },
    #[error(
        "{program} is not installed ({path}).\n  Install the Debian packages unstuck needs with:\n    sudo ci/setup.sh"
    )]
    PackageMissing {
        program: &'static str,
        path: PathBuf,
    },
    #[error(
        "container image archive {path} is missing.\n  Build the images with:\n    sudo ci/setup.sh"
    )]
    ImageMissing { path: PathBuf },
}

/// Resolved paths of every binary and image archive a local cluster needs.
#[derive(Clone, Debug)]
pub struct Binaries {
    pub k8s_version: String,
    pub k8s_dir: PathBuf,
    pub etcd: PathBuf,
    pub containerd: PathBuf,
    pub ctr: PathBuf,
    pub ip: PathBuf,
    pub images: Vec<PathBuf>,
}

impl Binaries {
    pub fn k8s(&self, command: &str) -> PathBuf {
        self.k8s_dir.join(command)
    }
    pub fn kubectl(&self) -> PathBuf {
        self.k8s("kubectl")
    }
}

/// The cache ci/setup.sh builds into: `$UNSTUCK_CACHE`, else ~/.cache/unstuck.
pub fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("UNSTUCK_CACHE") {
        return PathBuf::from(dir);
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/root"));
    home.join(".cache/unstuck")
}

/// The test image (`unstuck.local/busybox:1.35`) as an OCI layout tar,
/// built by ci/setup.sh: what a `registry:` step pushes.
pub fn test_image_archive() -> PathBuf {
    cache_dir().join("images/busybox.tar")
}

/// Finds every binary for `k8s_version`, or says exactly which are missing
/// and the command that builds them.
pub fn locate(k8s_version: &str) -> Result<Binaries, ComponentsError> {
    locate_in(&cache_dir(), k8s_version)
}

pub fn locate_in(cache: &Path, k8s_version: &str) -> Result<Binaries, ComponentsError> {
    let k8s_dir = cache.join("k8s").join(k8s_version).join("bin");
    let missing: Vec<&str> = K8S_COMMANDS
        .iter()
        .copied()
        .filter(|c| !is_executable(&k8s_dir.join(c)))
        .collect();
    if !missing.is_empty() {
        return Err(ComponentsError::KubernetesMissing {
            version: k8s_version.to_string(),
            missing: missing.join(", "),
        });
    }
    let etcd_version =
        std::env::var("UNSTUCK_ETCD_VERSION").unwrap_or_else(|_| DEFAULT_ETCD_VERSION.to_string());
    let etcd = cache.join("etcd").join(&etcd_version).join("bin/etcd");
    if !is_executable(&etcd) {
        return Err(ComponentsError::EtcdMissing {
            version: etcd_version,
            path: etcd,
        });
    }
    let package = |program: &'static str, path: &str| {
        let path = PathBuf::from(path);
        if is_executable(&path) {
            Ok(path)
        } else {
            Err(ComponentsError::PackageMissing { program, path })
        }
    };
    let containerd = package("containerd", "/usr/bin/containerd")?;
    let ctr = package("ctr", "/usr/bin/ctr")?;
    package("runc", "/usr/sbin/runc")?;
    package(
        "containerd-shim-runc-v2",
        "/usr/bin/containerd-shim-runc-v2",
    )?;
    package("the CNI bridge plugin", "/usr/lib/cni/bridge")?;
    package("the CNI host-local plugin", "/usr/lib/cni/host-local")?;
    let ip = package("ip", "/usr/sbin/ip").or_else(|_| package("ip", "/sbin/ip"))?;
    let images: Vec<PathBuf> = ["pause.tar", "busybox.tar"]
        .iter()
        .map(|f| cache.join("images").join(f))
        .collect();
    if let Some(path) = images.iter().find(|p| !p.is_file()) {
        return Err(ComponentsError::ImageMissing { path: path.clone() });
    }
    Ok(Binaries {
        k8s_version: k8s_version.to_string(),
        k8s_dir,
        etcd,
        containerd,
        ctr,
        ip,
        images,
    })
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_cache_names_the_setup_command_and_every_missing_binary() {
        let err = locate_in(Path::new("/nonexistent-cache"), "v1.34.4")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("sudo ci/setup.sh --k8s-version v1.34.4"),
            "{err}"
        );
        assert!(
            err.contains(
                "kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kubectl"
            ),
            "{err}"
        );
    }
}
