//! Mounts under a pod's directory, and which of them the kubelet owns.
//!
//! The kubelet lays a pod out as `<kubelet_dir>/pods/<uid>/`:
//! `volumes/<plugin>/<volume>` (the plugin name with `/` escaped as `~`,
//! e.g. `kubernetes.io~empty-dir`) and `volume-subpaths/<volume>/<container>/<index>`.
//! A mount exactly at one of those is the kubelet's own: it will unmount
//! it during TearDown. Anything else mounted under the pod directory — in
//! particular a mount *inside* a volume directory — is a stray nobody
//! will remove, and it makes the kubelet's removal of that directory fail
//! with EBUSY.

use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::text::quoted;

/// One mount, the fields the doctor needs (from `/proc/PID/mountinfo`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MountFact {
    pub mount_point: PathBuf,
    pub fs_type: String,
    pub source: String,
}

/// Parses mountinfo text (proc(5)): octal escapes in paths decoded, the
/// optional fields before ` - ` skipped. Malformed lines are skipped.
pub fn parse_mountinfo(text: &str) -> Vec<MountFact> {
    text.lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let l: Vec<&str> = left.split(' ').collect();
            let mut r = right.split(' ');
            Some(MountFact {
                mount_point: PathBuf::from(unescape_octal(l.get(4)?)),
                fs_type: r.next()?.to_owned(),
                source: unescape_octal(r.next().unwrap_or_default()),
            })
        })
        .collect()
}

fn unescape_octal(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `<kubelet_dir>/pods/<uid>`.
pub fn pod_dir(kubelet_dir: &Path, uid: &str) -> PathBuf {
    kubelet_dir.join("pods").join(uid)
}

/// What a mount under a pod's directory is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all_fields = "camelCase")]
pub enum MountRole {
    /// The kubelet's mount of a volume (`volumes/<plugin>/<volume>`).
    Volume { plugin: String, volume: String },
    /// The kubelet's subPath bind mount
    /// (`volume-subpaths/<volume>/<container>/<index>`).
    SubPath {
        volume: String,
        container: String,
        index: String,
    },
    /// A mount inside a volume's directory: not the kubelet's, and it
    /// blocks removing that directory (EBUSY).
    Nested {
        plugin: String,
        volume: String,
        /// The path inside the volume directory.
        inner: PathBuf,
    },
    /// Anything else under the pod directory.
    Other,
}

/// A mount under a pod's directory with its role.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodMount {
    pub mount: MountFact,
    pub role: MountRole,
}

impl PodMount {
    /// Not the kubelet's: nothing on the node will unmount it.
    pub fn is_stray(&self) -> bool {
        matches!(self.role, MountRole::Nested { .. } | MountRole::Other)
    }

    /// The volume it belongs to, if any.
    pub fn volume(&self) -> Option<&str> {
        match &self.role {
            MountRole::Volume { volume, .. }
            | MountRole::SubPath { volume, .. }
            | MountRole::Nested { volume, .. } => Some(volume),
            MountRole::Other => None,
        }
    }
}

impl std::fmt::Display for PodMount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = match &self.role {
            MountRole::Volume { plugin, volume } => {
                format!(
                    "kubelet mount of {plugin} volume {volume}",
                    volume = quoted(volume)
                )
            }
            MountRole::SubPath {
                volume,
                container,
                index,
            } => {
                format!(
                    "kubelet subPath mount of volume {volume} for container {container} (#{index})",
                    volume = quoted(volume),
                    container = quoted(container)
                )
            }
            MountRole::Nested {
                plugin,
                volume,
                inner,
            } => format!(
                "stray mount nested in {plugin} volume {volume} at {}",
                inner.display(),
                volume = quoted(volume)
            ),
            MountRole::Other => "stray mount".to_owned(),
        };
        write!(
            f,
            "{} ({} {}): {what}",
            self.mount.mount_point.display(),
            self.mount.fs_type,
            self.mount.source
        )
    }
}

/// The mounts at or below the pod's directory, classified, deepest first
/// (the order they can be unmounted in).
pub fn classify_pod_mounts(mounts: &[MountFact], kubelet_dir: &Path, uid: &str) -> Vec<PodMount> {
    let dir = pod_dir(kubelet_dir, uid);
    let mut out: Vec<PodMount> = mounts
        .iter()
        .filter_map(|m| {
            let rel = m.mount_point.strip_prefix(&dir).ok()?;
            let parts: Vec<String> = rel
                .components()
                .filter_map(|c| match c {
                    Component::Normal(s) => Some(s.to_string_lossy().into_owned()),
                    _ => None,
                })
                .collect();
            Some(PodMount {
                mount: m.clone(),
                role: role_of(&parts),
            })
        })
        .collect();
    out.sort_by_key(|m| std::cmp::Reverse(m.mount.mount_point.components().count()));
    out
}

fn role_of(parts: &[String]) -> MountRole {
    let plugin = |p: &str| p.replace('~', "/");
    // Older kubelets renamed an emptyDir to `<vol>.deleting~<rand>` before removing it.
    let volume = |v: &str| v.split(".deleting~").next().unwrap_or(v).to_owned();
    match parts {
        [v, p, vol] if v == "volumes" => MountRole::Volume {
            plugin: plugin(p),
            volume: volume(vol),
        },
        [v, p, vol, inner @ ..] if v == "volumes" && !inner.is_empty() => MountRole::Nested {
            plugin: plugin(p),
            volume: volume(vol),
            inner: inner.iter().collect(),
        },
        [s, vol, c, i] if s == "volume-subpaths" => MountRole::SubPath {
            volume: vol.clone(),
            container: c.clone(),
            index: i.clone(),
        },
        _ => MountRole::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_follow_the_kubelet_layout() {
        let kd = Path::new("/k");
        let m = |p: &str| MountFact {
            mount_point: PathBuf::from(p),
            fs_type: "tmpfs".into(),
            source: "tmpfs".into(),
        };
        let mounts = [
            m("/k/pods/u/volumes/kubernetes.io~projected/kube-api-access-x"),
            m("/k/pods/u/volumes/kubernetes.io~empty-dir/data/held"),
            m("/k/pods/u/volume-subpaths/cfg/app/0"),
            m("/k/pods/u/etc-hosts"),
            m("/k/pods/other/volumes/kubernetes.io~empty-dir/data/held"),
        ];
        let got = classify_pod_mounts(&mounts, kd, "u");
        assert_eq!(got.len(), 4);
        assert_eq!(
            got[0].role,
            MountRole::Nested {
                plugin: "kubernetes.io/empty-dir".into(),
                volume: "data".into(),
                inner: "held".into()
            }
        );
        assert!(got[0].is_stray());
        let roles: Vec<_> = got.iter().map(|m| (&m.role, m.is_stray())).collect();
        assert!(roles.contains(&(
            &MountRole::Volume {
                plugin: "kubernetes.io/projected".into(),
                volume: "kube-api-access-x".into()
            },
            false
        )));
        assert!(
            roles
                .iter()
                .any(|(r, s)| matches!(r, MountRole::SubPath { .. }) && !s)
        );
        assert!(roles.contains(&(&MountRole::Other, true)));
    }

    #[test]
    fn mountinfo_decodes_escapes() {
        let m = parse_mountinfo(
            "36 35 98:0 /mnt1 /mnt/with\\040space rw master:1 - ext3 /dev/root rw\n",
        );
        assert_eq!(m[0].mount_point, PathBuf::from("/mnt/with space"));
        assert_eq!(m[0].fs_type, "ext3");
    }
}
