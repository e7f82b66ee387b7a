//! Just enough HTTP/1.1 for the apiserver's calls: one request at a time
//! per connection, bodies by `Content-Length`, keep-alive.

use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};

/// A request as far as the backend cares.
pub struct Request {
    pub method: String,
    pub path: String,
    pub body: Vec<u8>,
}

/// What to answer a request with.
pub enum Reply {
    /// Nothing, ever: the connection is held open and silent.
    Never,
    Send {
        status: u16,
        content_type: &'static str,
        body: Vec<u8>,
    },
}

/// Why a connection was given up.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("reading: {0}")]
    Read(#[source] std::io::Error),
    #[error("writing: {0}")]
    Write(#[source] std::io::Error),
    #[error("request head longer than {MAX_HEAD} bytes")]
    HeadTooLong,
    #[error("body of {0} bytes is longer than {MAX_BODY}")]
    BodyTooLong(usize),
    #[error("connection closed inside a request body")]
    ClosedInBody,
}

const MAX_HEAD: usize = 64 * 1024;
const MAX_BODY: usize = 8 * 1024 * 1024;

/// Serves requests on one connection until the caller closes it, each
/// answered by `answer` (what to say is the caller's, how is this file's).
pub async fn serve<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    answer: impl Fn(&Request) -> Reply,
) -> Result<(), HttpError> {
    let mut buf = Vec::new();
    loop {
        let Some(req) = read_request(&mut stream, &mut buf).await? else {
            return Ok(());
        };
        eprintln!("{} {} ({} bytes)", req.method, req.path, req.body.len());
        match answer(&req) {
            Reply::Never => {
                // Hold the connection open and say nothing: the caller's
                // own timeout is what ends it.
                std::future::pending::<()>().await;
            }
            Reply::Send {
                status,
                content_type,
                body,
            } => {
                let head = format!(
                    "HTTP/1.1 {status} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\r\n",
                    reason(status),
                    body.len()
                );
                stream
                    .write_all(head.as_bytes())
                    .await
                    .map_err(HttpError::Write)?;
                stream.write_all(&body).await.map_err(HttpError::Write)?;
                stream.flush().await.map_err(HttpError::Write)?;
            }
        }
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        404 => "Not Found",
        500 => "Internal Server Error",
        _ => "",
    }
}

async fn read_request<S: AsyncRead + Unpin>(
    stream: &mut S,
    buf: &mut Vec<u8>,
) -> Result<Option<Request>, HttpError> {
    let head_end = loop {
        if let Some(i) = find(buf, b"\r\n\r\n") {
            break i;
        }
        if buf.len() > MAX_HEAD {
            return Err(HttpError::HeadTooLong);
        }
        let mut chunk = [0u8; 8192];
        let n = stream.read(&mut chunk).await.map_err(HttpError::Read)?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next().unwrap_or_default().split(' ');
    let method = first.next().unwrap_or_default().to_owned();
    let path = first.next().unwrap_or_default().to_owned();
    let length: usize = lines
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse().ok())
        .unwrap_or(0);
    if length > MAX_BODY {
        return Err(HttpError::BodyTooLong(length));
    }
    let body_start = head_end + 4;
    while buf.len() < body_start + length {
        let mut chunk = [0u8; 8192];
        let n = stream.read(&mut chunk).await.map_err(HttpError::Read)?;
        if n == 0 {
            return Err(HttpError::ClosedInBody);
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let body = buf[body_start..body_start + length].to_vec();
    buf.drain(..body_start + length);
    Ok(Some(Request { method, path, body }))
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}
