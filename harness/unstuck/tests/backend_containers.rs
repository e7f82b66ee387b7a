//! Backend containers (`containers/`, the `container:` step) on the real
//! Docker engine: the image serves what its registration's caBundle
//! trusts (and, for a TLS fault, what it does not), a dropped handle takes
//! its container and network with it, and `unstuck run` of a backend or a
//! registry scenario interrupted with SIGINT, or killed with SIGKILL and
//! followed by `unstuck cluster gc`, leaves no container or network of its
//! own behind.
//!
//! Needs Docker and the image (`ci/images/backend.sh`; `ci/test.sh` builds
//! it) and, for the runs, the local provider's components.

use std::{
    process::{Child, Command, Stdio},
    sync::{Arc, mpsc},
    time::{Duration, Instant},
};

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio_rustls::rustls::{
    self, ClientConfig, RootCertStore,
    pki_types::{CertificateDer, ServerName, pem::PemObject as _},
};
use unstuck::containers::{
    self, BackendFault, BackendRole, BackendSpec, backend::PORT, labels, start_backend,
};

mod common;

/// A TLS handshake and `GET /healthz` with `ca` as the only root, as the
/// apiserver calls a webhook by its Service name.
async fn healthz(ip: std::net::IpAddr, name: &str, ca: &str) -> Result<String, String> {
    let mut roots = RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(ca.as_bytes()) {
        roots
            .add(c.map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
    }
    let config =
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect((ip, PORT))
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let mut tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from(name.to_string()).unwrap(), tcp)
        .await
        .map_err(|e| format!("handshake: {e}"))?;
    tls.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
        .await
        .map_err(|e| e.to_string())?;
    let mut buf = vec![0u8; 256];
    let n = tls.read(&mut buf).await.map_err(|e| e.to_string())?;
    Ok(String::from_utf8_lossy(&buf[..n]).into_owned())
}

fn spec(run: &str, name: &str, fault: BackendFault) -> BackendSpec {
    BackendSpec {
        run: run.into(),
        name: name.into(),
        role: BackendRole::Webhook,
        fault,
        dns_names: vec!["policy-webhook.policy.svc".into()],
        network: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_serves_what_its_ca_bundle_trusts_and_goes_with_its_handle() {
    let run = format!("t{}", std::process::id());
    let ok = start_backend(&spec(&run, "ok", BackendFault::None))
        .await
        .expect("backend starts");
    let bad = start_backend(&spec(&run, "rotated", BackendFault::UnknownAuthority))
        .await
        .expect("backend starts");
    let answer = healthz(ok.ip, "policy-webhook.policy.svc", &ok.tls.ca_bundle).await;
    assert!(
        answer
            .as_deref()
            .is_ok_and(|a| a.starts_with("HTTP/1.1 200")),
        "{answer:?}"
    );
    let refused = healthz(bad.ip, "policy-webhook.policy.svc", &bad.tls.ca_bundle).await;
    assert!(
        refused.as_ref().is_err_and(|e| e.contains("UnknownIssuer")),
        "a certificate from another CA must not verify: {refused:?}"
    );
    let expired = start_backend(&spec(&run, "expired", BackendFault::ExpiredCertificate))
        .await
        .expect("backend starts");
    let refused = healthz(
        expired.ip,
        "policy-webhook.policy.svc",
        &expired.tls.ca_bundle,
    )
    .await;
    assert!(
        refused
            .as_ref()
            .is_err_and(|e| e.contains("certificate expired")),
        "an expired certificate must not verify: {refused:?}"
    );
    assert_eq!(
        common::labelled(labels::RUN, &run).len(),
        6,
        "three containers, three networks"
    );
    // Started through testcontainers, which publishes an image's exposed
    // ports on every host address unless told not to: the cluster reaches
    // a backend by its network address, so nothing may listen on the host.
    let inspected = common::docker(&[
        "container",
        "inspect",
        "--format",
        "{{.HostConfig.PublishAllPorts}} {{len .NetworkSettings.Ports}}{{range $p, $b := .NetworkSettings.Ports}} {{$p}}={{len $b}}{{end}}",
        &ok.managed.container,
    ]);
    assert_eq!(
        inspected.trim(),
        "false 1 8443/tcp=0",
        "the backend's exposed port must not be published on the host"
    );
    assert!(
        common::docker(&["port", &ok.managed.container])
            .trim()
            .is_empty()
    );
    drop(ok);
    drop(expired);
    let errors = bad.remove().await;
    assert!(errors.is_empty(), "{errors:?}");
    let left = common::labelled(labels::RUN, &run);
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// A scenarios folder holding one scenario of `scenarios/` (37: a
/// webhook whose backend hangs; 44: a registry that is down).
fn scenario_dir(tag: &str, file: &str) -> common::Scratch {
    common::scenarios_folder(&format!("be-{tag}"), &[file])
}

const HANG: &str = "37-webhook-backend-hangs.yaml";
const REGISTRY_DOWN: &str = "44-registry-down.yaml";

/// Waits until the run's container (a backend, a registry) is up (labelled with the run
/// process as its owner).
fn wait_for_container(child: &mut Child, rx: &mpsc::Receiver<String>) -> Vec<String> {
    let pid = child.id().to_string();
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        while rx.try_recv().is_ok() {}
        let there = common::labelled(labels::OWNER_PID, &pid);
        if there.iter().any(|t| t.starts_with("container ")) {
            return there;
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("unstuck run ended ({status}) before its container started");
        }
        assert!(Instant::now() < deadline, "no container appeared");
        std::thread::sleep(Duration::from_millis(300));
    }
}

fn wait_exit(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("unstuck run did not end within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn signal(child: &Child, sig: i32) {
    // SAFETY: kill(2) on our own child's pid.
    #[allow(unsafe_code)]
    let rc = unsafe { libc::kill(child.id() as i32, sig) };
    assert_eq!(rc, 0, "signal {sig} to unstuck run");
}

#[test]
fn sigint_mid_scenario_leaves_no_container_or_network() {
    sigint_leaves_nothing("int", HANG);
}

#[test]
fn sigint_mid_registry_scenario_leaves_no_container_or_network() {
    sigint_leaves_nothing("reg-int", REGISTRY_DOWN);
}

fn sigint_leaves_nothing(tag: &str, file: &str) {
    let scenarios = scenario_dir(tag, file);
    let out = scenarios.sibling("out");
    let (mut child, rx) = common::spawn_run(&scenarios, &out);
    let pid = child.id().to_string();
    let there = wait_for_container(&mut child, &rx);
    assert!(
        there.iter().any(|t| t.starts_with("network ")),
        "the container's own network: {there:?}"
    );
    signal(&child, libc::SIGINT);
    let status = wait_exit(&mut child, Duration::from_secs(600));
    let left = common::labelled(labels::OWNER_PID, &pid);
    assert!(!status.success(), "an interrupted run must not pass");
    assert!(left.is_empty(), "left behind after SIGINT: {left:?}");
    // Its reports are written, the scenario skipped with why, not failed.
    let junit = junit_of(&out);
    assert!(
        junit.contains("skipped=\"1\"") && junit.contains("failures=\"0\""),
        "{junit}"
    );
    assert!(junit.contains("interrupted"), "{junit}");
}

/// The junit.xml of the one run under `out` (in its time-stamped folder).
fn junit_of(out: &std::path::Path) -> String {
    let run = std::fs::read_dir(out)
        .expect("the run's output folder")
        .flatten()
        .map(|e| e.path())
        .find(|p| p.is_dir())
        .unwrap_or_else(|| panic!("no run folder in {}", out.display()));
    std::fs::read_to_string(run.join("junit.xml"))
        .unwrap_or_else(|e| panic!("no junit.xml in {}: {e}", run.display()))
}

/// `--out` relative to where unstuck runs, as ci/main.sh gives it: the
/// container step's Service and registration files are written there and
/// must still be found by the apply step (which reads fixtures relative to
/// the fixtures directory). A run of scenario 37 to its end passes.
#[test]
fn a_run_with_a_relative_out_dir_passes() {
    let scenarios = scenario_dir("rel", HANG);
    let cwd = scenarios.parent().unwrap();
    // `unstuck-be-rel-<pid>.out`, beside the scenarios, given relative.
    let out_dir = scenarios.sibling("out");
    let out_name = out_dir.file_name().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_unstuck"))
        .current_dir(cwd)
        .arg("run")
        .arg("--scenarios")
        .arg(&scenarios)
        .arg("--fixtures")
        .arg(common::repo_root().join("fixtures"))
        .arg("--out")
        .arg(out_name)
        .stdin(Stdio::null())
        .output()
        .expect("unstuck run");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // The run's folder is the one entry of --out (named by its start).
    let report = std::fs::read_dir(cwd.join(out_name))
        .ok()
        .and_then(|d| d.flatten().next())
        .and_then(|run| std::fs::read_to_string(run.path().join("report.json")).ok())
        .map(|t| serde_json::from_str::<serde_json::Value>(&t).expect("report.json is JSON"));
    assert!(out.status.success(), "the run failed:\n{text}");
    assert!(text.contains("1 passed, 0 failed"), "{text}");
    // The run report keeps the doctor's findings as data, not only as
    // lines: which doctor, which kind, which object.
    let report = report.expect("the run wrote report.json");
    let found = report["scenarios"][0]["found"]
        .as_array()
        .unwrap_or_else(|| panic!("scenarios[0].found: {report:#}"));
    let webhook = found
        .iter()
        .find(|f| f["kind"] == "WebhookBackendFailing")
        .unwrap_or_else(|| panic!("a WebhookBackendFailing finding: {found:#?}"));
    assert_eq!(webhook["doctor"], "api");
    assert_eq!(webhook["subject"]["kind"], "ValidatingWebhookConfiguration");
    assert!(webhook["subject"]["uid"].is_string(), "{webhook:#}");
}

#[test]
fn sigkill_then_cluster_gc_leaves_no_container_or_network() {
    sigkill_then_gc_leaves_nothing("kill", HANG);
}

#[test]
fn sigkill_mid_registry_scenario_then_cluster_gc_leaves_nothing() {
    sigkill_then_gc_leaves_nothing("reg-kill", REGISTRY_DOWN);
}

fn sigkill_then_gc_leaves_nothing(tag: &str, file: &str) {
    let scenarios = scenario_dir(tag, file);
    let out = scenarios.sibling("out");
    let (mut child, rx) = common::spawn_run(&scenarios, &out);
    let pid = child.id().to_string();
    wait_for_container(&mut child, &rx);
    // From the kill to this gc's report, no other sweep may run.
    let _sweeps = common::sweep_lock();
    signal(&child, libc::SIGKILL);
    let _ = wait_exit(&mut child, Duration::from_secs(60));
    // A killed harness runs no drop: its backend is still there, and the
    // sweep is what removes it.
    let before = common::labelled(labels::OWNER_PID, &pid);
    assert!(
        before.iter().any(|t| t.starts_with("container ")),
        "nothing to sweep: {before:?}"
    );
    let gc = common::unstuck(&["cluster", "gc"]);
    let text = common::output_text(&gc);
    assert!(gc.status.success(), "{text}");
    let left = common::labelled(labels::OWNER_PID, &pid);
    assert!(left.is_empty(), "left behind after gc: {left:?}\n{text}");
    for b in before {
        assert!(
            text.contains(
                &b.replace("container ", "removed stale container ")
                    .replace("network ", "removed stale network ")
            ),
            "gc did not say {b}: {text}"
        );
    }
}

/// The sweep leaves alone what a live owner holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sweep_leaves_a_live_owners_backend_alone() {
    let run = format!("s{}", std::process::id());
    let _sweeps = common::sweep_lock();
    let b = start_backend(&spec(&run, "live", BackendFault::Hang))
        .await
        .expect("backend starts");
    let swept = containers::sweep_stale().await;
    assert!(
        swept.iter().all(|(what, _)| !what.contains(&run)),
        "a live owner's backend was swept: {swept:?}"
    );
    assert_eq!(common::labelled(labels::RUN, &run).len(), 2);
    drop(b);
    assert!(common::labelled(labels::RUN, &run).is_empty());
}

/// A container that never gets ready is an error with its log, and is
/// gone afterwards, on a network it did not make (a kind cluster's) as on
/// its own: testcontainers returns no handle for it, so unstuck removes
/// it by name.
#[tokio::test]
async fn a_container_that_never_gets_ready_is_removed_with_its_error() {
    use unstuck::containers::{
        ContainerError,
        managed::{Launch, launch},
    };
    let run = format!("nr{}", std::process::id());
    let shared = format!("unstuck-test-net-{}", std::process::id());
    common::docker(&["network", "create", &shared]);
    for (name, network) in [("own", None), ("shared", Some(shared.clone()))] {
        let started = launch(Launch {
            run: &run,
            name,
            role: "backend",
            image: unstuck::containers::backend::IMAGE,
            build: "ci/images/backend.sh",
            network,
            // No certificate: the server says why and exits, without
            // the ready line.
            env: Vec::new(),
            ready_line: "unstuck-backend listening",
        })
        .await;
        match started {
            Err(ContainerError::NotReady { name: c, log, .. }) => {
                assert_eq!(c, format!("unstuck-{run}-{name}"));
                assert!(!log.is_empty(), "the error carries the container's log");
            }
            Err(other) => panic!("not a NotReady error: {other}"),
            Ok(_) => panic!("a backend without a certificate got ready"),
        }
    }
    let left = common::labelled(labels::RUN, &run);
    common::docker(&["network", "rm", &shared]);
    assert!(left.is_empty(), "left behind: {left:?}");
}
