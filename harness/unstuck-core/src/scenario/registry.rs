//! The `registry:` step: an image registry beside the cluster, which the
//! node's container runtime pulls the scenario's images from, and the
//! faults real users meet on the way to a pod that never starts.
//!
//! ```yaml
//! - registry:
//!     name: shop              # a DNS label, unique in the scenario
//!     push: [app:v1]          # the test image, pushed as these repo:tag
//!     auth: basic             # none (default) | basic: every pull needs
//!                             # the credentials docs/registry.md gives
//!     fault: down             # none | down | tagDeleted | slow
//! ```
//!
//! Pods pull `shop.registry.unstuck.local/app:v1`: the runner renames the
//! host per run (like an API group: `shop-<run>.registry.unstuck.local`,
//! in fixtures and expected messages alike) and tells the node's
//! containerd, by a `hosts.toml`, where that host is. The first step that
//! names a registry starts it and pushes; a later step with the same name
//! changes only its fault (`fault: none` repairs it).

use std::fmt;

use serde::{Deserialize, Serialize};

use super::located::{Located, Position};
use crate::text::quoted;

/// The domain every scenario registry's host is under.
pub const REGISTRY_DOMAIN: &str = "registry.unstuck.local";

/// A registry a scenario runs (see [`super::Step::Registry`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RegistrySpec {
    /// The scenario's name for it (a DNS label): its host is
    /// `<name>.registry.unstuck.local`.
    pub name: Located<String>,
    /// `repo:tag` names the test image is pushed as, on the step that
    /// starts the registry.
    #[serde(default)]
    pub push: Vec<Located<String>>,
    /// Whether pulls need credentials.
    #[serde(default)]
    pub auth: RegistryAuth,
    /// What is wrong with it from this step on (default `none`).
    #[serde(default)]
    pub fault: RegistryFault,
}

/// Whether a registry wants credentials.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum RegistryAuth {
    /// Anyone may pull.
    #[default]
    None,
    /// HTTP basic auth (htpasswd): a pull without the right credentials
    /// gets 401 Unauthorized.
    Basic,
}

/// What is wrong with a registry.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum RegistryFault {
    /// It serves what was pushed.
    #[default]
    None,
    /// Its port refuses every connection (its host up, its service
    /// stopped).
    Down,
    /// The manifests of the pushed tags are deleted (the blobs stay): a
    /// pull of any of them is "not found".
    TagDeleted,
    /// Its egress is throttled to a few KiB/s: a pull starts and takes
    /// minutes.
    Slow,
}

/// As a scenario writes it (`auth: basic`).
impl fmt::Display for RegistryAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RegistryAuth::None => "none",
            RegistryAuth::Basic => "basic",
        })
    }
}

/// As a scenario writes it (`fault: tagDeleted`).
impl fmt::Display for RegistryFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RegistryFault::None => "none",
            RegistryFault::Down => "down",
            RegistryFault::TagDeleted => "tagDeleted",
            RegistryFault::Slow => "slow",
        })
    }
}

impl RegistrySpec {
    /// The host pods pull from, before the run renames it.
    pub fn host(&self) -> String {
        format!("{}.{REGISTRY_DOMAIN}", *self.name)
    }

    /// What the loader checks beyond the format: each pushed name.
    pub fn check(&self) -> Result<(), (Position, String)> {
        for p in &self.push {
            check_repo_tag(p).map_err(|why| (p.position, why))?;
        }
        Ok(())
    }
}

/// `app:v1`, `team/app:1.0`: a repository path of lowercase components and
/// a tag, as the distribution spec allows them.
fn check_repo_tag(name: &str) -> Result<(), String> {
    let example = "like app:v1 or team/app:1.0";
    let (repo, tag) = name.rsplit_once(':').ok_or_else(|| {
        format!(
            "push {name} has no tag; write repo:tag, {example}",
            name = quoted(name)
        )
    })?;
    let component_ok = |c: &str| {
        !c.is_empty()
            && c.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b))
            && c.as_bytes()[0].is_ascii_alphanumeric()
    };
    if repo.is_empty() || !repo.split('/').all(component_ok) {
        return Err(format!(
            "push {name}: repository {repo} must be lowercase path components (a-z, 0-9, '.', '_', '-'), {example}",
            name = quoted(name),
            repo = quoted(repo)
        ));
    }
    let tag_ok = !tag.is_empty()
        && tag.len() <= 128
        && tag
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        && (tag.as_bytes()[0].is_ascii_alphanumeric() || tag.as_bytes()[0] == b'_');
    if !tag_ok {
        return Err(format!(
            "push {name}: tag {tag} must be 1-128 of A-Z, a-z, 0-9, '.', '_', '-', {example}",
            name = quoted(name),
            tag = quoted(tag)
        ));
    }
    Ok(())
}

impl fmt::Display for RegistrySpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "registry {}", self.host())?;
        if !self.push.is_empty() {
            let pushed: Vec<&str> = self.push.iter().map(|p| p.as_str()).collect();
            write!(f, " (pushing {})", pushed.join(", "))?;
        }
        if self.auth == RegistryAuth::Basic {
            f.write_str(", basic auth")?;
        }
        write!(f, ", fault {}", self.fault)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pushed_names_are_repo_and_tag() {
        for ok in ["app:v1", "team/app:1.0", "a.b/c_d-e:_x"] {
            assert_eq!(check_repo_tag(ok), Ok(()), "{ok}");
        }
        for (bad, says) in [
            ("app", "has no tag"),
            ("App:v1", "lowercase"),
            ("team//app:v1", "lowercase"),
            ("app:", "tag \"\""),
            ("app:-x", "tag \"-x\""),
        ] {
            let err = check_repo_tag(bad).unwrap_err();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }
}
