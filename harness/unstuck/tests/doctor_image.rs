//! The doctor from its image (issue 29): ci/images/unstuck.sh makes it
//! (`FROM scratch`; here from the binary this test build made, with its
//! shared libraries, so CI compiles nothing more), and it runs with
//! `docker run` the way an SRE without Rust would, against a real local
//! cluster: it says which cluster it is on, finds an orphaned finalizer,
//! and with `--apply --yes` the object is gone. Needs root and Docker.

use std::{path::Path, process::Command, time::Duration};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;

mod common;

const NS: &str = "it-image";
const KEY: &str = "example.com/left-by-uninstalled-operator";

/// The image of this test process, removed when dropped.
struct Image(String);

impl Image {
    fn build() -> Self {
        let tag = format!("unstuck.local/unstuck:test-{}", std::process::id());
        let o = Command::new("bash")
            .arg(common::repo_root().join("ci/images/unstuck.sh"))
            .env("UNSTUCK_IMAGE_BINARY", env!("CARGO_BIN_EXE_unstuck"))
            .env("UNSTUCK_IMAGE", &tag)
            .output()
            .expect("bash runs");
        assert!(o.status.success(), "{}", common::output_text(&o));
        Image(tag)
    }
}

impl Drop for Image {
    fn drop(&mut self) {
        let _ = Command::new("docker").args(["rmi", "-f", &self.0]).output();
    }
}

/// `docker run` of the image with the cluster's directory (its kubeconfig
/// names its certificates by path) mounted where it is.
fn in_image(image: &Image, kubeconfig: &Path, args: &[&str]) -> std::process::Output {
    let dir = kubeconfig.parent().expect("the cluster's directory");
    let mount = format!("{0}:{0}:ro", dir.display());
    Command::new("docker")
        .args(["run", "--rm", "--network", "host", "-v", &mount, &image.0])
        .args(args)
        .output()
        .expect("docker runs")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_image_doctor_finds_and_frees_a_stuck_object() {
    let image = Image::build();
    let o = Command::new("docker")
        .args(["run", "--rm", &image.0, "--version"])
        .output()
        .expect("docker runs");
    let version = common::output_text(&o);
    assert!(
        o.status.success() && version.contains(unstuck::components::DEFAULT_K8S_VERSION),
        "{version}"
    );

    let cluster = common::up(&common::cluster_name("it-image")).await;
    let client = cluster.client();
    let kubeconfig = cluster.kubeconfig();
    let kc = kubeconfig.to_str().unwrap();
    common::create_namespace(&client, NS).await;
    common::held_configmap(&client, NS, "settings", KEY).await;
    tokio::time::sleep(Duration::from_secs(2)).await;

    let look_args = [
        "doctor",
        "--kubeconfig",
        kc,
        "-n",
        NS,
        "--stuck-after",
        "1s",
    ];
    let look = in_image(&image, &kubeconfig, &look_args);
    let text = common::output_text(&look);
    assert_eq!(look.status.code(), Some(0), "{text}");
    assert!(
        text.contains("OrphanFinalizer") && text.contains(&format!("{NS}/settings")),
        "the image's doctor did not find it:\n{text}"
    );
    assert!(text.contains("kube-system"), "no target line:\n{text}");

    let apply = in_image(
        &image,
        &kubeconfig,
        &[&look_args[..], &["--apply", "--yes"]].concat(),
    );
    let text = common::output_text(&apply);
    assert_eq!(apply.status.code(), Some(0), "{text}");
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    assert!(
        cms.get_opt("settings").await.unwrap().is_none(),
        "still there after the image's --apply:\n{text}"
    );

    let layout = cluster.layout().clone();
    let report = cluster.down().await;
    assert!(report.errors.is_empty(), "{report}");
    assert!(unstuck::cluster::local::leftovers(&layout).is_empty());
}
