//! Seed 004's pods that never start, on real components: each way of not
//! starting is made for real (no node fits, an absent image, a missing
//! ConfigMap for an env var and for a volume, a crash loop), and the
//! doctor must name each cause with the kubelet's or scheduler's own words,
//! leave a healthy pod out, and plan no change for any of them.
//! Needs root and the components built by ci/setup.sh (CI runs both).

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::{Api, api::PostParams};
use unstuck::{
    cluster::local::{self},
    doctor::{self, DoctorOptions, Scope},
    wait::{self, Poll},
};
use unstuck_core::doctor::{
    Action, DiagnoseOptions, Finding, FindingDetail, FindingKind, PodStartCause, plan,
};

mod common;

const NS: &str = "it-start";

fn pod(name: &str, spec: serde_json::Value) -> Pod {
    common::from_json(serde_json::json!({"metadata": {"name": name}, "spec": spec}))
}

fn container(extra: serde_json::Value) -> serde_json::Value {
    let mut c = serde_json::json!({
        "name": "app",
        "image": local::config::TEST_IMAGE,
        "imagePullPolicy": "Never",
        "command": ["sh", "-c", "while :; do sleep 1; done"],
    });
    for (k, v) in extra.as_object().expect("object") {
        c[k] = v.clone();
    }
    c
}

/// Each pod, the cause the doctor must give, and a string its evidence
/// must quote.
fn cases() -> Vec<(Pod, PodStartCause, &'static str)> {
    let spec = |c: serde_json::Value| serde_json::json!({"terminationGracePeriodSeconds": 0, "containers": [c]});
    vec![
        (
            pod(
                "no-node",
                serde_json::json!({
                    "nodeSelector": {"unstuck.test/pool": "absent"},
                    "containers": [container(serde_json::json!({}))],
                }),
            ),
            PodStartCause::Unschedulable,
            "PodScheduled=False (Unschedulable)",
        ),
        (
            pod(
                "no-image",
                spec(container(
                    serde_json::json!({"image": "unstuck.local/absent:0.0"}),
                )),
            ),
            PodStartCause::ImagePull,
            "waiting (ErrImageNeverPull)",
        ),
        (
            pod(
                "no-config",
                spec(container(
                    serde_json::json!({"env": [{"name": "MODE", "valueFrom":
                    {"configMapKeyRef": {"name": "absent-settings", "key": "mode"}}}]}),
                )),
            ),
            PodStartCause::ContainerConfig,
            "waiting (CreateContainerConfigError)",
        ),
        (
            pod(
                "no-volume",
                serde_json::json!({
                    "terminationGracePeriodSeconds": 0,
                    "volumes": [{"name": "cfg", "configMap": {"name": "absent-volume"}}],
                    "containers": [container(serde_json::json!({"volumeMounts": [{"name": "cfg", "mountPath": "/cfg"}]}))],
                }),
            ),
            PodStartCause::VolumeMount,
            "event Warning FailedMount",
        ),
        (
            pod(
                "crashing",
                spec(container(
                    serde_json::json!({"command": ["sh", "-c", "echo cannot start; exit 3"]}),
                )),
            ),
            PodStartCause::CrashLoop,
            "exited 3",
        ),
    ]
}

fn cause_of(findings: &[Finding], name: &str) -> Option<PodStartCause> {
    findings.iter().find_map(|f| match &f.detail {
        FindingDetail::PodNotStarting { cause, .. }
            if f.kind() == FindingKind::PodNotStarting && f.subject.name == name =>
        {
            Some(*cause)
        }
        _ => None,
    })
}

#[tokio::test(flavor = "current_thread")]
async fn the_doctor_explains_each_way_a_pod_does_not_start_and_changes_nothing() {
    let cluster = common::up(&common::cluster_name("it-not-starting")).await;
    let client = cluster.client();

    common::create_namespace(&client, NS).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let cases = cases();
    for (p, _, _) in &cases {
        pods.create(&PostParams::default(), p).await.unwrap();
    }
    pods.create(
        &PostParams::default(),
        &pod(
            "healthy",
            serde_json::json!({"terminationGracePeriodSeconds": 0, "containers": [container(serde_json::json!({}))]}),
        ),
    )
    .await
    .unwrap();

    let doctor_opts = DoctorOptions {
        scope: Scope::Namespaces(vec![NS.into()]),
        diagnose: DiagnoseOptions {
            stuck_after: Duration::from_secs(3),
            ..Default::default()
        },
        ..DoctorOptions::dry_run(std::env::temp_dir())
    };
    // Each cause shows once the kubelet has tried (a crash loop needs a
    // second exit): look until every pod has its cause, and keep the
    // snapshot that showed them all.
    let (snapshot, findings) = wait::until(
        "the doctor to explain every pod",
        Duration::from_secs(120),
        Duration::from_secs(1),
        || {
            let client = client.clone();
            let doctor_opts = doctor_opts.clone();
            let cases = &cases;
            async move {
                let snapshot = match doctor::collect(&client).await {
                    Ok((s, _)) => s,
                    Err(e) => return Poll::Pending(e.to_string()),
                };
                let findings = doctor::findings_in(&snapshot, &doctor_opts);
                let seen: Vec<(String, Option<PodStartCause>)> = cases
                    .iter()
                    .map(|(p, _, _)| {
                        let name = p.metadata.name.clone().unwrap();
                        let cause = cause_of(&findings, &name);
                        (name, cause)
                    })
                    .collect();
                let all = cases
                    .iter()
                    .zip(&seen)
                    .all(|((_, want, _), (_, got))| got == &Some(*want));
                // The healthy pod may still be creating at the first looks.
                if all && cause_of(&findings, "healthy").is_none() {
                    Poll::Ready((snapshot, findings))
                } else {
                    Poll::Pending(format!(
                        "{seen:?}; healthy: {:?}",
                        findings.iter().find(|f| f.subject.name == "healthy")
                    ))
                }
            }
        },
    )
    .await
    .expect("every pod explained");

    for (p, _, quoted) in &cases {
        let name = p.metadata.name.as_deref().unwrap();
        let f = findings
            .iter()
            .find(|f| f.kind() == FindingKind::PodNotStarting && f.subject.name == name)
            .unwrap();
        assert!(
            f.evidence.iter().any(|e| e.contains(quoted)),
            "{name}: expected evidence quoting {quoted:?}: {:#?}",
            f.evidence
        );
    }
    assert_eq!(
        cause_of(&findings, "healthy"),
        None,
        "a running pod is not reported: {findings:#?}"
    );
    let p = plan(&findings, &snapshot);
    assert_eq!(p.steps.len(), cases.len(), "{p:#?}");
    for step in &p.steps {
        assert!(
            matches!(step.action, Action::Refuse { .. }),
            "no change is planned for a pod that does not start: {step:#?}"
        );
    }
    if let Ok(path) = std::env::var("UNSTUCK_RECORD_SNAPSHOT") {
        std::fs::write(&path, serde_json::to_string_pretty(&snapshot).unwrap()).unwrap();
    }

    let report = cluster.down().await;
    assert!(report.errors.is_empty(), "teardown problems: {report}");
}
