//! The registry container (`containers/registry.rs`, the `registry:`
//! step) on the real Docker engine and a real local cluster: it serves
//! what was pushed, each fault does what it says and `none` undoes it,
//! basic auth refuses a pull without the credentials, and a scenario run
//! on a cluster that stays up takes away everything it put there: the
//! node's `hosts.toml`, the images the node pulled, the container.
//!
//! Needs Docker, the image (`ci/images/registry.sh`), the test image
//! archive and the local provider's components (`ci/test.sh` builds all).

use std::{net::SocketAddr, process::Command, sync::Arc, time::Duration};

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use unstuck::{
    cluster::local::LocalNode,
    components,
    containers::{
        labels,
        registry::{PASSWORD, RegistryRequest, USER, start_registry},
    },
    core::scenario::{RegistryFault, load_dir},
    node::AnyNode,
    runner::{Outcome, RunContext, run_scenario},
};

mod common;

/// `GET path` on the registry, with basic auth when given: the status
/// line and body, or the connection's error.
async fn get(addr: SocketAddr, path: &str, auth: Option<&str>) -> Result<String, String> {
    let connect = tokio::net::TcpStream::connect(addr);
    let mut tcp = tokio::time::timeout(Duration::from_secs(10), connect)
        .await
        .map_err(|_| "connect timed out".to_string())?
        .map_err(|e| format!("connect: {e}"))?;
    let auth = auth
        .map(|a| format!("Authorization: Basic {a}\r\n"))
        .unwrap_or_default();
    // A registry answers an OCI manifest only to a client that accepts one.
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\n{auth}Accept: application/vnd.oci.image.manifest.v1+json\r\nConnection: close\r\n\r\n"
    );
    tcp.write_all(request.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    tcp.read_to_end(&mut out).await.map_err(|e| e.to_string())?;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// `unstuck:unstuck-registry-secret` in base64, written out so the test
/// does not trust the code it tests to encode it.
const CREDENTIALS: &str = "dW5zdHVjazp1bnN0dWNrLXJlZ2lzdHJ5LXNlY3JldA==";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_fault_does_what_it_says_and_none_undoes_it() {
    assert_eq!((USER, PASSWORD), ("unstuck", "unstuck-registry-secret"));
    let run = format!("r{}", std::process::id());
    let mut reg = start_registry(&RegistryRequest {
        run: run.clone(),
        name: "shop".into(),
        basic_auth: true,
        network: None,
    })
    .await
    .expect("registry starts");
    let digest = reg
        .push(&components::test_image_archive(), "app", "v1")
        .await
        .expect("push");
    assert!(digest.starts_with("sha256:"), "{digest}");

    let tags = "/v2/app/tags/list";
    let anonymous = get(reg.address(), tags, None).await.unwrap();
    assert!(anonymous.starts_with("HTTP/1.1 401"), "{anonymous}");
    let listed = get(reg.address(), tags, Some(CREDENTIALS)).await.unwrap();
    assert!(
        listed.starts_with("HTTP/1.1 200") && listed.contains(r#""v1""#),
        "{listed}"
    );
    let manifest = format!("/v2/app/manifests/{digest}");

    reg.set_fault(RegistryFault::TagDeleted)
        .await
        .expect("delete");
    let gone = get(reg.address(), &manifest, Some(CREDENTIALS))
        .await
        .unwrap();
    assert!(gone.starts_with("HTTP/1.1 404"), "{gone}");
    reg.set_fault(RegistryFault::None)
        .await
        .expect("push again");
    let back = get(reg.address(), &manifest, Some(CREDENTIALS))
        .await
        .unwrap();
    assert!(back.starts_with("HTTP/1.1 200"), "{back}");

    let done = reg.set_fault(RegistryFault::Slow).await.expect("throttle");
    assert!(done.iter().any(|d| d.contains("64kbit")), "{done:?}");
    let qdisc = qdisc_of(&reg.managed.container);
    assert!(qdisc.contains("tbf") && qdisc.contains("64Kbit"), "{qdisc}");
    reg.set_fault(RegistryFault::None)
        .await
        .expect("unthrottle");
    assert!(!qdisc_of(&reg.managed.container).contains("tbf"));

    let was = reg.address();
    reg.set_fault(RegistryFault::Down).await.expect("down");
    let refused = get(was, "/v2/", None).await;
    assert!(
        refused.as_ref().is_err_and(|e| e.contains("refused")),
        "a registry that is down answered: {refused:?}"
    );
    reg.set_fault(RegistryFault::None).await.expect("up");
    // The same address: a registry that is down keeps it, so no other
    // container on a shared network can take it meanwhile.
    assert_eq!(reg.address(), was);
    let up = get(reg.address(), tags, Some(CREDENTIALS)).await.unwrap();
    assert!(
        up.contains(r#""v1""#),
        "what was pushed is served again: {up}"
    );

    assert_eq!(
        common::labelled(labels::RUN, &run).len(),
        2,
        "container and network"
    );
    let errors = reg.remove().await;
    assert!(errors.is_empty(), "{errors:?}");
    assert!(common::labelled(labels::RUN, &run).is_empty());
}

/// The container's root qdisc, as its own network namespace shows it.
fn qdisc_of(container: &str) -> String {
    let pid = common::docker(&[
        "container",
        "inspect",
        "--format",
        "{{.State.Pid}}",
        container,
    ]);
    let out = Command::new("nsenter")
        .args([
            "--target",
            pid.trim(),
            "--net",
            "tc",
            "qdisc",
            "show",
            "dev",
            "eth0",
        ])
        .output()
        .expect("nsenter runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scenario_on_a_cluster_that_stays_takes_away_what_it_put_there() {
    let cluster = common::up(&common::cluster_name("it-registry")).await;
    let node: Arc<AnyNode> = Arc::new(LocalNode::of(&cluster));
    let scenarios = load_dir(&common::repo_root().join("scenarios")).expect("scenarios load");
    let scenario = scenarios
        .iter()
        .find(|s| s.name.as_str() == "registry-tag-deleted")
        .expect("scenario 45");
    let out_dir = common::Scratch::path("unstuck-reg");
    let ctx = RunContext {
        client: cluster.client(),
        fixtures_dir: common::repo_root().join("fixtures"),
        out_dir: out_dir.to_path_buf(),
        node: Some(node.clone()),
        cluster_exits: cluster.component_exits(),
        journal: None,
    };
    let report = run_scenario(&ctx, scenario).await;
    let pulled_while = report
        .steps
        .iter()
        .flat_map(|s| s.evidence.iter())
        .find(|e| e.contains("pushed "))
        .cloned();

    let images = node
        .run(node.ctr().args(["images", "ls", "--quiet"]))
        .await
        .expect("ctr images ls");
    let hosts = std::fs::read_dir(node.registry_hosts_dir())
        .map(|d| d.count())
        .unwrap_or(0);
    let mine = common::labelled(labels::OWNER_PID, &std::process::id().to_string());
    let cleanup = report.cleanup.clone();
    let down = cluster.down().await;

    assert_eq!(report.outcome, Outcome::Passed, "{report:#?}");
    assert!(pulled_while.is_some(), "nothing was pushed: {report:#?}");
    assert!(
        !images.contains(".registry.unstuck.local/"),
        "the node keeps an image from the run's registry:\n{images}"
    );
    assert_eq!(
        hosts,
        0,
        "a hosts.toml is left in {}",
        node.registry_hosts_dir().display()
    );
    assert!(mine.is_empty(), "left behind: {mine:?}");
    assert!(
        cleanup
            .reverted
            .iter()
            .any(|r| r.contains("from the node's containerd")),
        "the report does not say the pulled image was removed: {cleanup:#?}"
    );
    assert!(cleanup.leaked.is_empty(), "{cleanup:#?}");
    assert!(down.errors.is_empty(), "{down}");
}
