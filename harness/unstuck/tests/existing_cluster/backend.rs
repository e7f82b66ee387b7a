//! The live backend of production's `v1beta1.metrics.k8s.io`: HTTPS in
//! this test process, on the node address.

use std::{net::Ipv4Addr, sync::Arc};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::rustls;

/// A minimal metrics.k8s.io: discovery documents, and 404 for the rest.
/// Enough for the aggregator to call the APIService Available and for
/// discovery (the namespace controller's) to succeed.
fn reply(path: &str) -> (u16, String) {
    let gv = serde_json::json!({"groupVersion": "metrics.k8s.io/v1beta1", "version": "v1beta1"});
    let group = serde_json::json!({
        "name": "metrics.k8s.io", "versions": [gv], "preferredVersion": gv
    });
    let body = match path.split('?').next().unwrap_or_default() {
        "/apis" => {
            serde_json::json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [group]})
        }
        "/apis/metrics.k8s.io" => {
            let mut g = group.clone();
            g["kind"] = "APIGroup".into();
            g["apiVersion"] = "v1".into();
            g
        }
        "/apis/metrics.k8s.io/v1beta1" => serde_json::json!({
            "kind": "APIResourceList", "apiVersion": "v1",
            "groupVersion": "metrics.k8s.io/v1beta1", "resources": []
        }),
        _ => {
            return (
                404,
                serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                   "reason": "NotFound", "code": 404})
                .to_string(),
            );
        }
    };
    (200, body.to_string())
}

async fn serve_one(
    acceptor: tokio_rustls::TlsAcceptor,
    tcp: tokio::net::TcpStream,
) -> std::io::Result<()> {
    let mut tls = acceptor.accept(tcp).await?;
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = tls.read(&mut buf).await?;
        if n == 0 || head.len() > 64 * 1024 {
            return Ok(());
        }
        head.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&head);
    let path = text.split_whitespace().nth(1).unwrap_or("/").to_string();
    let (code, body) = reply(&path);
    let status = if code == 200 { "OK" } else { "Not Found" };
    let resp = format!(
        "HTTP/1.1 {code} {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    tls.write_all(resp.as_bytes()).await?;
    tls.shutdown().await
}

/// Serves HTTPS on `ip` (a self-signed certificate; the APIService skips
/// verification, as many real ones do). Returns the port.
pub async fn start_backend(ip: Ipv4Addr) -> u16 {
    let ck = rcgen::generate_simple_self_signed(vec!["metrics-server.prod-metrics.svc".into()])
        .expect("certificate");
    let cert = rustls::pki_types::CertificateDer::from(ck.cert.der().to_vec());
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(rustls::pki_types::PrivatePkcs8KeyDer::from(
        ck.signing_key.serialize_der(),
    ));
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("protocol versions")
    .with_no_client_auth()
    .with_single_cert(vec![cert], key)
    .expect("server config");
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind((ip, 0))
        .await
        .expect("backend listens on the node address");
    let port = listener.local_addr().expect("bound").port();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                continue;
            };
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let _ = serve_one(acceptor, tcp).await;
            });
        }
    });
    port
}
