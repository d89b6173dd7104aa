//! The PROXY protocol (HAProxy's; version 1, text, and version 2, binary), which a load balancer
//! sends at the start of each connection to say whom it carries: so that the cap per client
//! address and the budgets of requests without a credential count clients, not the balancer.
//! Parsed by the `ppp` crate; read only from trusted proxies (`serve --trusted-proxies`), from
//! whom it is then required, never from anyone else (a client could name any address).

use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::task::{Context, Poll};

use ppp::{HeaderResult, PartialResult, v1, v2};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};

/// The longest header read: version 2's with room for the TLVs balancers add (HAProxy's unique
/// id, TLS details); far below a connection's header budget.
const MAX_HEADER_BYTES: usize = 4096;

/// What a connection's PROXY header said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Said {
    /// The client the balancer carries.
    Client(IpAddr),
    /// The balancer's own connection (a health check: `LOCAL`, `UNKNOWN`): it is the client.
    Itself,
}

/// Reads the PROXY header at the start of `stream`: what it said, and the bytes that came after
/// it (the start of the first request).
pub async fn read_header<S: AsyncRead + Unpin>(stream: &mut S) -> io::Result<(Said, Vec<u8>)> {
    let mut buffer = Vec::with_capacity(256);
    let mut chunk = [0u8; 512];
    loop {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the connection ended within its PROXY header",
            ));
        }
        buffer.extend_from_slice(&chunk[..n]);
        let parsed = parse(&buffer);
        match parsed {
            Some(Ok((said, length))) => return Ok((said, buffer.split_off(length))),
            Some(Err(e)) => return Err(io::Error::new(io::ErrorKind::InvalidData, e)),
            None if buffer.len() >= MAX_HEADER_BYTES => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "no PROXY header within its first 4096 bytes",
                ));
            }
            None => {}
        }
    }
}

/// A whole header at the start of `bytes` (what it said and its length), an error, or `None`
/// while more bytes may complete it.
fn parse(bytes: &[u8]) -> Option<Result<(Said, usize), String>> {
    let header = HeaderResult::parse(bytes);
    if header.is_incomplete() {
        return None;
    }
    Some(match header {
        HeaderResult::V1(Ok(h)) => Ok((
            match h.addresses {
                v1::Addresses::Tcp4(a) => Said::Client(IpAddr::V4(a.source_address)),
                v1::Addresses::Tcp6(a) => Said::Client(IpAddr::V6(a.source_address)),
                v1::Addresses::Unknown => Said::Itself,
            },
            h.header.len(),
        )),
        HeaderResult::V2(Ok(h)) => Ok((
            match (h.command, h.addresses) {
                (v2::Command::Proxy, v2::Addresses::IPv4(a)) => {
                    Said::Client(IpAddr::V4(a.source_address))
                }
                (v2::Command::Proxy, v2::Addresses::IPv6(a)) => {
                    Said::Client(IpAddr::V6(a.source_address))
                }
                _ => Said::Itself,
            },
            h.len(),
        )),
        HeaderResult::V1(Err(e)) => Err(format!("not a PROXY header: {e:?}")),
        HeaderResult::V2(Err(e)) => Err(format!("not a PROXY header: {e:?}")),
    })
}

/// A stream that first gives back bytes already read from it.
pub struct Prefixed<S> {
    prefix: Vec<u8>,
    at: usize,
    inner: S,
}

impl<S> Prefixed<S> {
    pub fn new(prefix: Vec<u8>, inner: S) -> Prefixed<S> {
        Prefixed {
            prefix,
            at: 0,
            inner,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Prefixed<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.at < self.prefix.len() {
            let rest = &self.prefix[self.at..];
            let n = rest.len().min(buf.remaining());
            buf.put_slice(&rest[..n]);
            self.at += n;
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Prefixed<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A version 2 header of a TCP over IPv4 connection from `source`.
    fn v2_header(source: [u8; 4]) -> Vec<u8> {
        let mut h = b"\r\n\r\n\0\r\nQUIT\n".to_vec();
        h.extend_from_slice(&[0x21, 0x11, 0, 12]);
        h.extend_from_slice(&source);
        h.extend_from_slice(&[10, 0, 0, 1, 0x1f, 0x90, 0x1f, 0x90]);
        h
    }

    #[tokio::test]
    async fn the_client_is_read_from_either_version_and_the_request_follows() {
        let request = b"GET /healthz HTTP/1.1\r\n\r\n";
        let v1 = [
            b"PROXY TCP4 198.51.100.7 10.0.0.1 51234 8080\r\n".as_slice(),
            request,
        ]
        .concat();
        let mut v2 = v2_header([198, 51, 100, 8]);
        v2.extend_from_slice(request);
        let cases: [(&[u8], Said); 4] = [
            (&v1, Said::Client("198.51.100.7".parse().unwrap())),
            (&v2, Said::Client("198.51.100.8".parse().unwrap())),
            (
                b"PROXY TCP6 2001:db8::7 2001:db8::1 51234 8080\r\nGET",
                Said::Client("2001:db8::7".parse().unwrap()),
            ),
            (b"PROXY UNKNOWN\r\nGET", Said::Itself),
        ];
        for (bytes, said) in cases {
            let mut stream = bytes;
            let (got, rest) = read_header(&mut stream).await.unwrap();
            assert_eq!(got, said, "{:?}", String::from_utf8_lossy(bytes));
            let mut prefixed = Prefixed::new(rest, stream);
            let mut after = Vec::new();
            prefixed.read_to_end(&mut after).await.unwrap();
            assert!(
                request.starts_with(&after) && !after.is_empty(),
                "{:?}",
                String::from_utf8_lossy(&after)
            );
        }
    }

    #[tokio::test]
    async fn anything_else_is_refused() {
        for bytes in [
            b"GET / HTTP/1.1\r\n\r\n".as_slice(),
            b"PROXY TCP4 not-an-address 10.0.0.1 1 2\r\n",
            b"PROXY TCP4 198.51.100.7",
        ] {
            let mut stream = bytes;
            assert!(read_header(&mut stream).await.is_err(), "{bytes:?}");
        }
    }
}
