//! One HTTP/1.1 request over a plain TCP connection (`Connection: close`), bounded in
//! time and size, the answer's body decoded whether it comes with a length, in chunks,
//! or until the close: what `mlprof top`, `mlprof agent capture` and `mlprof run --agent`
//! need to talk to the node's agent on loopback, without an HTTP stack of their own.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// How long connecting or sending may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// The largest answer read, bytes.
pub const MAX_RESPONSE: u64 = 64 * 1024 * 1024;

/// Why a request got no HTTP answer.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// Nothing accepted the connection.
    #[error("{0}")]
    Connect(std::io::Error),
    /// Sending or reading failed (a timeout among them).
    #[error("{0}")]
    Io(std::io::Error),
    /// The answer is larger than [`MAX_RESPONSE`].
    #[error("the answer is over {} MB", MAX_RESPONSE / 1_000_000)]
    TooLarge,
    /// What came back is not an HTTP answer.
    #[error("not an HTTP answer")]
    NotHttp,
}

/// `METHOD path` to `address`, with a JSON `body` where given and `Authorization: Bearer
/// token` where given; the answer awaited `wait` at most: its status code and body.
pub fn request(
    method: &str,
    address: SocketAddr,
    path: &str,
    token: Option<&str>,
    body: Option<&[u8]>,
    wait: Duration,
) -> Result<(u16, Vec<u8>), HttpError> {
    let mut stream = TcpStream::connect_timeout(&address, CONNECT_TIMEOUT).map_err(HttpError::Connect)?;
    let _ = stream.set_read_timeout(Some(wait));
    let _ = stream.set_write_timeout(Some(CONNECT_TIMEOUT));
    let auth = token.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
    let body = body.unwrap_or_default();
    let kind = if body.is_empty() { "" } else { "Content-Type: application/json\r\n" };
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {address}\r\n{auth}{kind}Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).and_then(|()| stream.write_all(body)).map_err(HttpError::Io)?;
    let mut response = Vec::new();
    stream.take(MAX_RESPONSE + 1).read_to_end(&mut response).map_err(HttpError::Io)?;
    if response.len() as u64 > MAX_RESPONSE {
        return Err(HttpError::TooLarge);
    }
    parse_response(&response).ok_or(HttpError::NotHttp)
}

/// The status code and body of a whole HTTP/1.1 response (`None`: not one).
pub fn parse_response(response: &[u8]) -> Option<(u16, Vec<u8>)> {
    let end = response.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&response[..end]).ok()?;
    let body = &response[end + 4..];
    let mut lines = head.split("\r\n");
    let status: u16 = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let chunked = lines.any(|line| {
        let (name, value) = line.split_once(':').unwrap_or((line, ""));
        name.eq_ignore_ascii_case("transfer-encoding") && value.trim().eq_ignore_ascii_case("chunked")
    });
    let body = if chunked { dechunk(body)? } else { body.to_vec() };
    Some((status, body))
}

/// A chunked body's bytes.
fn dechunk(mut body: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = body.windows(2).position(|w| w == b"\r\n")?;
        let size_text = std::str::from_utf8(&body[..line_end]).ok()?;
        let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
        body = &body[line_end + 2..];
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(body.get(..size)?);
        body = body.get(size + 2..)?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_with_a_length_or_in_chunks() {
        let plain = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}";
        assert_eq!(parse_response(plain), Some((200, b"{}".to_vec())));
        let chunked =
            b"HTTP/1.1 401 Unauthorized\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n";
        assert_eq!(parse_response(chunked), Some((401, b"abcde".to_vec())));
        assert_eq!(parse_response(b"SSH-2.0-OpenSSH_9.2\r\n"), None);
        assert_eq!(parse_response(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"), None);
        assert_eq!(parse_response(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab"), None);
    }

    #[test]
    fn a_body_is_sent_with_its_length() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let mut seen = Vec::new();
            let mut buffer = [0u8; 1024];
            while !seen.ends_with(b"{\"a\":1}") {
                let n = stream.read(&mut buffer).unwrap();
                assert!(n > 0);
                seen.extend_from_slice(&buffer[..n]);
            }
            stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok").unwrap();
            String::from_utf8(seen).unwrap()
        });
        let answer = request("POST", address, "/x", Some("t"), Some(b"{\"a\":1}"), Duration::from_secs(5)).unwrap();
        assert_eq!(answer, (200, b"ok".to_vec()));
        let seen = server.join().unwrap();
        assert!(seen.starts_with("POST /x HTTP/1.1\r\n"), "{seen}");
        assert!(seen.contains("Authorization: Bearer t\r\n") && seen.contains("Content-Length: 7\r\n"), "{seen}");
    }
}
