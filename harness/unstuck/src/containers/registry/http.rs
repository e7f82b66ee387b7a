//! The few registry API calls the runner makes (push a blob and a
//! manifest, delete a manifest), over plain HTTP/1.1 to the registry's
//! address on a Docker network of this machine. One request per
//! connection (`Connection: close`), so a response is read to the end.

use std::{net::SocketAddr, time::Duration};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::text::quoted;

/// How long one call may take: a blob of the test image is a few MiB.
const CALL_WITHIN: Duration = Duration::from_secs(60);

#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("{method} http://{addr}{path}: {source}")]
    Io {
        method: &'static str,
        addr: SocketAddr,
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{method} http://{addr}{path}: no answer within {}",
        unstuck_core::duration::Duration::from(CALL_WITHIN)
    )]
    Timeout {
        method: &'static str,
        addr: SocketAddr,
        path: String,
    },
    #[error("{method} http://{addr}{path}: malformed response {}", quoted(.head))]
    Malformed {
        method: &'static str,
        addr: SocketAddr,
        path: String,
        head: String,
    },
}

/// One request. `headers` are sent as given; Host, Content-Length and
/// Connection are added.
pub async fn call(
    addr: SocketAddr,
    method: &'static str,
    path: &str,
    headers: &[(&str, String)],
    body: &[u8],
) -> Result<Response, HttpError> {
    let io = |source| HttpError::Io {
        method,
        addr,
        path: path.to_string(),
        source,
    };
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await.map_err(io)?;
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
            body.len()
        );
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes()).await.map_err(io)?;
        stream.write_all(body).await.map_err(io)?;
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).await.map_err(io)?;
        Ok(raw)
    };
    let raw = tokio::time::timeout(CALL_WITHIN, exchange)
        .await
        .map_err(|_| HttpError::Timeout {
            method,
            addr,
            path: path.to_string(),
        })??;
    parse(&raw).ok_or_else(|| HttpError::Malformed {
        method,
        addr,
        path: path.to_string(),
        head: String::from_utf8_lossy(&raw[..raw.len().min(200)]).into_owned(),
    })
}

/// A response read to the end of its connection (the registry answers
/// with a Content-Length; chunked bodies are not needed here).
fn parse(raw: &[u8]) -> Option<Response> {
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&raw[..split]).ok()?;
    let mut lines = head.split("\r\n");
    let status = lines.next()?.split_whitespace().nth(1)?.parse().ok()?;
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    Some(Response {
        status,
        headers,
        body: raw[split + 4..].to_vec(),
    })
}

/// `Authorization: Basic ...` for `user:password`.
pub fn basic_auth(user: &str, password: &str) -> String {
    // k8s-openapi's bytes serialise as standard base64: no crate for one line.
    let encoded = serde_json::to_value(k8s_openapi::ByteString(
        format!("{user}:{password}").into_bytes(),
    ))
    .expect("bytes serialise");
    format!("Basic {}", encoded.as_str().unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_response_is_status_headers_and_body() {
        let r = parse(b"HTTP/1.1 202 Accepted\r\nLocation: /v2/app/blobs/uploads/x?_state=y\r\nContent-Length: 2\r\n\r\nok").unwrap();
        assert_eq!(r.status, 202);
        assert_eq!(
            r.header("location"),
            Some("/v2/app/blobs/uploads/x?_state=y")
        );
        assert_eq!(r.body, b"ok");
        assert!(parse(b"HTTP/1.1 200 OK\r\n").is_none());
    }

    #[test]
    fn basic_auth_is_base64_of_user_and_password() {
        assert_eq!(basic_auth("a", "b"), "Basic YTpi");
    }
}
