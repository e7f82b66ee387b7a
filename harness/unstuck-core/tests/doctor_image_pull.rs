//! Pods that never start because of their registry, replayed on snapshots
//! recorded from a real v1.34.4 local cluster (containerd 1.6.20) by the
//! registry scenarios 44-48 (`tests/recorded/real-v1.34.4/registry-*.json`,
//! kept to the scenario's namespace and the node): a registry that is
//! down, a deleted tag, credentials missing or refused, a slow pull. The
//! doctor must say what the registry did in the kubelet's own words, and
//! plan nothing.

mod doctor_support;

use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, LocalObjectReference};
use unstuck_core::doctor::{
    Action, DiagnoseOptions, Finding, FindingDetail, FindingKind, PodStartCause, Snapshot,
    diagnose,
    finding::{ImagePull, PullProblem},
    plan,
};

fn opts() -> DiagnoseOptions {
    DiagnoseOptions {
        stuck_after: Duration::from_secs(3),
        ..Default::default()
    }
}

fn app(findings: &[Finding]) -> &Finding {
    findings
        .iter()
        .find(|f| f.kind() == FindingKind::PodNotStarting && f.subject.name == "app")
        .unwrap_or_else(|| panic!("no PodNotStarting for app in {findings:#?}"))
}

fn pull(f: &Finding) -> (PodStartCause, ImagePull) {
    match &f.detail {
        FindingDetail::PodNotStarting {
            cause,
            pull: Some(pull),
            ..
        } => (*cause, pull.clone()),
        other => panic!("no pull in {other:?}"),
    }
}

fn diagnose_app(s: &Snapshot) -> (Finding, ImagePull) {
    let findings = diagnose(s, &opts());
    let f = app(&findings).clone();
    let (cause, p) = pull(&f);
    assert_eq!(cause, PodStartCause::ImagePull, "{}", f.summary);
    (f, p)
}

/// The run's registry host in a recorded snapshot (`shop-<run>.registry.unstuck.local`).
fn host(s: &Snapshot) -> String {
    let image = &s.pods[0].spec.as_ref().unwrap().containers[0].image;
    image
        .as_deref()
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_string()
}

#[test]
fn each_recorded_registry_fault_is_named_with_the_kubelets_words() {
    // (snapshot, problem, words of the kubelet the quote must hold, words
    // of the summary)
    let table = [
        (
            "registry-down",
            PullProblem::RegistryUnreachable,
            ":5000: connect: no route to host",
            "nothing answers at registry",
        ),
        (
            "registry-tag-deleted",
            PullProblem::NotFound,
            "app:v1: not found",
            "answers but has no such manifest",
        ),
        (
            "registry-auth-without-secret",
            PullProblem::NoCredentials,
            "failed with status code [manifests v1]: 401 Unauthorized",
            "the pod has no imagePullSecrets",
        ),
        (
            "registry-wrong-pull-secret",
            PullProblem::CredentialsRefused,
            "401 Unauthorized",
            "refused the credentials of pull secret(s) registry-creds",
        ),
        (
            "registry-slow-pull",
            PullProblem::Slow,
            "Pulling image",
            "with no end yet",
        ),
    ];
    for (name, problem, quoted, said) in table {
        let s = doctor_support::recorded(name);
        let (f, p) = diagnose_app(&s);
        assert_eq!(p.problem, problem, "{name}: {}", f.summary);
        assert!(p.quote.contains(quoted), "{name}: quote {:?}", p.quote);
        assert!(f.summary.contains(said), "{name}: {}", f.summary);
        assert_eq!(p.registry, host(&s), "{name}");
        assert_eq!(p.image, format!("{}/app:v1", host(&s)), "{name}");
        // The quote is the kubelet's, and the report shows it.
        assert!(
            f.evidence.iter().any(|e| e.contains(quoted)),
            "{name}: evidence {:#?}",
            f.evidence
        );
        // Explained, never remedied: every step the plan has is a refusal.
        let plan = plan(std::slice::from_ref(&f), &s);
        assert!(!plan.steps.is_empty(), "{name}");
        for step in &plan.steps {
            assert!(
                matches!(step.action, Action::Refuse { .. }),
                "{name}: {step:#?}"
            );
        }
    }
}

#[test]
fn the_slow_pull_says_how_long_and_a_pulled_event_ends_it() {
    let s = doctor_support::recorded("registry-slow-pull");
    let (f, p) = diagnose_app(&s);
    assert!(p.pulling_for_seconds.is_some_and(|s| s >= 3), "{p:?}");
    assert!(
        f.summary.contains("it is not failing, it is slow"),
        "{}",
        f.summary
    );

    // The kubelet's Pulled after it: the pull is over, nothing is slow.
    let mut done = s.clone();
    let mut pulled: Event = done
        .events
        .iter()
        .find(|e| e.reason.as_deref() == Some("Pulling"))
        .unwrap()
        .clone();
    pulled.reason = Some("Pulled".into());
    pulled.message = Some(format!(
        "Successfully pulled image \"{}/app:v1\" in 2m10s",
        host(&done)
    ));
    pulled.metadata.name = Some("app.pulled".into());
    done.events.push(pulled);
    let findings = diagnose(&done, &opts());
    let still = findings
        .iter()
        .find(|f| f.kind() == FindingKind::PodNotStarting && f.subject.name == "app");
    if let Some(f) = still {
        match &f.detail {
            FindingDetail::PodNotStarting { pull, .. } => {
                assert!(pull.is_none(), "{}", f.summary)
            }
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn a_pod_with_a_secret_is_refused_credentials_not_missing_them() {
    // The same 401 as the recorded pod without a secret, but the pod names
    // one: the registry refused what the secret gave.
    let mut s = doctor_support::recorded("registry-auth-without-secret");
    s.pods[0].spec.as_mut().unwrap().image_pull_secrets = Some(vec![LocalObjectReference {
        name: "registry-creds".into(),
    }]);
    let (_, p) = diagnose_app(&s);
    assert_eq!(p.problem, PullProblem::CredentialsRefused);
    assert_eq!(p.pull_secrets, ["registry-creds"]);
}

#[test]
fn a_secret_the_kubelet_cannot_read_is_named_missing() {
    // The kubelet's warning when the named secret does not exist
    // (pkg/kubelet/kuberuntime: "Unable to retrieve some image pull
    // secrets (...); attempting to pull the image may not succeed.").
    let mut s = doctor_support::recorded("registry-wrong-pull-secret");
    let mut warning = s
        .events
        .iter()
        .find(|e| e.reason.as_deref() == Some("Failed"))
        .unwrap()
        .clone();
    warning.reason = Some("FailedToRetrieveImagePullSecret".into());
    warning.message = Some(
        "Unable to retrieve some image pull secrets (registry-creds); attempting to pull the image may not succeed.".into(),
    );
    warning.metadata.name = Some("app.secret".into());
    s.events.push(warning);
    let (f, p) = diagnose_app(&s);
    assert_eq!(p.problem, PullProblem::SecretMissing, "{}", f.summary);
    assert_eq!(p.missing_secrets, ["registry-creds"]);
    assert!(
        f.summary
            .contains("cannot read pull secret(s) registry-creds"),
        "{}",
        f.summary
    );
    assert!(
        f.evidence
            .iter()
            .any(|e| e.contains("FailedToRetrieveImagePullSecret")),
        "{:#?}",
        f.evidence
    );
}

#[test]
fn the_kubelets_words_pick_the_problem() {
    use unstuck_core::doctor::finding::pull::problem_of;
    for (words, secrets, problem) in [
        (
            "dial tcp 10.0.0.9:443: connect: connection refused",
            false,
            PullProblem::RegistryUnreachable,
        ),
        (
            "dial tcp: lookup reg.example: no such host",
            false,
            PullProblem::RegistryUnreachable,
        ),
        (
            "dial tcp 10.0.0.9:443: i/o timeout",
            true,
            PullProblem::RegistryUnreachable,
        ),
        (
            "pull access denied, repository does not exist or may require authorization: server message: insufficient_scope: authorization failed",
            false,
            PullProblem::NoCredentials,
        ),
        (
            "failed to authorize: failed to fetch anonymous token: unexpected status: 401 Unauthorized",
            true,
            PullProblem::CredentialsRefused,
        ),
        (
            "docker.io/library/nope:1: not found",
            false,
            PullProblem::NotFound,
        ),
        ("unexpected EOF", false, PullProblem::Other),
    ] {
        assert_eq!(problem_of(words, secrets), problem, "{words}");
    }
}
