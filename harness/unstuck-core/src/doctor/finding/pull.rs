//! What a [`super::PodStartCause::ImagePull`] finding says about the pull:
//! which image, what the registry did, in the kubelet's own words. The
//! types are the model's ([`crate::doctor::model::pull`]); here the words
//! are read and explained.

pub use crate::doctor::model::pull::{ImagePull, PullProblem};
use crate::text::quoted;

impl ImagePull {
    /// One line: what the registry did, and the way to fix it.
    pub fn explain(&self) -> String {
        let (image, registry) = (&self.image, &self.registry);
        match self.problem {
            PullProblem::RegistryUnreachable => format!(
                "its image {image} cannot be pulled: nothing answers at registry {registry} (down, or not reachable from the node); start it or fix the way to it, the kubelet retries"
            ),
            PullProblem::NotFound => format!(
                "its image {image} cannot be pulled: registry {registry} answers but has no such manifest (a deleted or never pushed tag); push it again or point the pod at a tag that exists"
            ),
            PullProblem::NoCredentials => format!(
                "its image {image} cannot be pulled: registry {registry} wants credentials and the pod has no imagePullSecrets (nor its service account); add a pull secret, then recreate the pod"
            ),
            PullProblem::CredentialsRefused => format!(
                "its image {image} cannot be pulled: registry {registry} refused the credentials of pull secret(s) {}; fix the secret (the kubelet reads it again at the next retry)",
                self.pull_secrets.join(", ")
            ),
            PullProblem::SecretMissing => format!(
                "its image {image} cannot be pulled: the kubelet cannot read pull secret(s) {} and registry {registry} refused the pull without them; create the secret in the pod's namespace",
                self.missing_secrets.join(", ")
            ),
            PullProblem::Slow => format!(
                "its image {image} has been pulling from registry {registry} for {} with no end yet (a slow registry or network, or a large image); it is not failing, it is slow",
                super::super::owner::fmt_secs(self.pulling_for_seconds.unwrap_or_default())
            ),
            PullProblem::NeverPull => format!(
                "its image {image} is not on the node and imagePullPolicy is Never; load it onto the node or allow the pull"
            ),
            PullProblem::InvalidName => {
                format!(
                    "its image name {image} is not a valid reference; fix the pod's spec",
                    image = quoted(image)
                )
            }
            PullProblem::Other => format!(
                "its image {image} cannot be pulled from registry {registry} (check the image name, the registry and pull secrets): the kubelet's words are in the evidence"
            ),
        }
    }
}

/// The registry host of an image reference, as the kubelet and containerd
/// read it: the first path component when it has a `.` or `:` or is
/// `localhost`, else Docker Hub.
pub fn registry_of(image: &str) -> String {
    match image.split_once('/') {
        Some((first, _)) if first.contains(['.', ':']) || first == "localhost" => first.to_string(),
        _ => "docker.io".to_string(),
    }
}

/// What the kubelet's message about a failed pull says happened. Matched
/// on containerd's and Go's own error words (containerd 1.6-2.x
/// `remotes/docker`, `net`).
pub fn problem_of(message: &str, has_secrets: bool) -> PullProblem {
    let m = message.to_ascii_lowercase();
    let any = |words: &[&str]| words.iter().any(|w| m.contains(w));
    if any(&[
        "connect: connection refused",
        "connect: no route to host",
        "i/o timeout",
        "no such host",
        "connect: network is unreachable",
        "connection reset by peer",
    ]) {
        PullProblem::RegistryUnreachable
    } else if any(&[
        "401 unauthorized",
        "403 forbidden",
        "authorization failed",
        "failed to authorize",
        "pull access denied",
        "no basic auth credentials",
    ]) {
        match has_secrets {
            true => PullProblem::CredentialsRefused,
            false => PullProblem::NoCredentials,
        }
    } else if any(&[": not found", "manifest unknown", "404 not found"]) {
        PullProblem::NotFound
    } else {
        PullProblem::Other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_is_the_first_component_when_it_looks_like_a_host() {
        assert_eq!(
            registry_of("shop.registry.unstuck.local/app:v1"),
            "shop.registry.unstuck.local"
        );
        assert_eq!(registry_of("localhost:5000/app"), "localhost:5000");
        assert_eq!(registry_of("library/busybox"), "docker.io");
        assert_eq!(registry_of("busybox"), "docker.io");
    }
}
