//! Which image a pod waits for and what its registry did, from the
//! kubelet's own words: the `Failed` event (`Failed to pull image "X":
//! ...`, pkg/kubelet/images/image_manager.go), the container's waiting
//! message, `FailedToRetrieveImagePullSecret` (pkg/kubelet/kuberuntime),
//! and a `Pulling` event with no `Pulled` or `Failed` after it.

use k8s_openapi::api::core::v1::{Event, Pod, PodStatus};
use k8s_openapi::jiff::Timestamp;

use crate::doctor::finding::pull::{problem_of, registry_of};
use crate::doctor::model::{ImagePull, PullProblem, Snapshot, container_statuses};
use crate::text::quoted;

/// The kubelet's waiting reasons for a container whose image cannot be had.
const PULL_FAILED: [&str; 2] = ["ErrImagePull", "ImagePullBackOff"];

/// The pull that keeps `pod` from starting, if one does: the first
/// container that waits on its image.
pub(super) fn image_pull(snapshot: &Snapshot, pod: &Pod, status: &PodStatus) -> Option<ImagePull> {
    let events: Vec<&Event> = snapshot.pod_events(&pod.metadata).collect();
    let pull_secrets: Vec<String> = pod
        .spec
        .as_ref()
        .and_then(|s| s.image_pull_secrets.as_ref())
        .into_iter()
        .flatten()
        .map(|r| r.name.clone())
        .collect();
    for cs in container_statuses(status) {
        let Some(w) = cs.state.as_ref().and_then(|s| s.waiting.as_ref()) else {
            continue;
        };
        let reason = w.reason.as_deref().unwrap_or_default();
        let message = w.message.clone().unwrap_or_default();
        let image = cs.image.clone();
        let make = |problem, quote: String| ImagePull {
            registry: registry_of(&image),
            image: image.clone(),
            problem,
            quote,
            pull_secrets: pull_secrets.clone(),
            missing_secrets: Vec::new(),
            pulling_for_seconds: None,
        };
        match reason {
            "ErrImageNeverPull" => return Some(make(PullProblem::NeverPull, message)),
            "InvalidImageName" => return Some(make(PullProblem::InvalidName, message)),
            r if PULL_FAILED.contains(&r) => {
                let quote = newest(
                    &events,
                    "Failed",
                    &format!("Failed to pull image {image}", image = quoted(&image)),
                )
                .map(|e| e.message.clone().unwrap_or_default())
                .unwrap_or(message);
                let mut pull = make(problem_of(&quote, !pull_secrets.is_empty()), quote);
                let missing = missing_secrets(&events);
                if !missing.is_empty()
                    && matches!(
                        pull.problem,
                        PullProblem::CredentialsRefused | PullProblem::NoCredentials
                    )
                {
                    pull.problem = PullProblem::SecretMissing;
                }
                pull.missing_secrets = missing;
                return Some(pull);
            }
            "ContainerCreating" | "PodInitializing" => {
                if let Some((pulling, since)) = unfinished_pull(&events, &image) {
                    let mut pull = make(PullProblem::Slow, pulling);
                    pull.pulling_for_seconds = Some(snapshot.age_of(since).as_secs());
                    return Some(pull);
                }
            }
            _ => {}
        }
    }
    None
}

/// When an event was last seen.
fn seen(e: &Event) -> Option<Timestamp> {
    e.last_timestamp
        .as_ref()
        .map(|t| t.0)
        .or(e.event_time.as_ref().map(|t| t.0))
        .or(e.first_timestamp.as_ref().map(|t| t.0))
}

/// The newest event of `reason` whose message starts with `prefix`.
fn newest<'a>(events: &[&'a Event], reason: &str, prefix: &str) -> Option<&'a Event> {
    events
        .iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .filter(|e| e.message.as_deref().unwrap_or_default().starts_with(prefix))
        .max_by_key(|e| seen(e))
        .copied()
}

/// The kubelet's `Pulling image "X"` when nothing it says about `image`
/// came after it: its message and when it was said.
fn unfinished_pull(events: &[&Event], image: &str) -> Option<(String, Timestamp)> {
    let pulling = newest(
        events,
        "Pulling",
        &format!("Pulling image {image}", image = quoted(image)),
    )?;
    let since = seen(pulling)?;
    let ended = events.iter().any(|e| {
        matches!(e.reason.as_deref(), Some("Pulled" | "Failed" | "BackOff"))
            && e.message.as_deref().unwrap_or_default().contains(image)
            && seen(e).is_some_and(|t| t >= since)
    });
    (!ended).then(|| (pulling.message.clone().unwrap_or_default(), since))
}

/// The secret names of `Unable to retrieve some image pull secrets (a, b);
/// attempting to pull the image may not succeed.`
fn missing_secrets(events: &[&Event]) -> Vec<String> {
    let Some(e) = events
        .iter()
        .filter(|e| e.reason.as_deref() == Some("FailedToRetrieveImagePullSecret"))
        .max_by_key(|e| seen(e))
    else {
        return Vec::new();
    };
    let message = e.message.as_deref().unwrap_or_default();
    let names = message
        .split_once('(')
        .and_then(|(_, rest)| rest.split_once(')'))
        .map(|(inside, _)| inside)
        .unwrap_or_default();
    names
        .split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .map(str::to_string)
        .collect()
}
