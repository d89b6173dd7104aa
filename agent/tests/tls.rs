//! The agent checks the server's certificate: against a private CA given with `--ca-file`, and
//! refuses a server whose certificate no trusted CA signed. A real TLS server on loopback
//! (rustls), with certificates made for the test (rcgen).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
use tickscope_agent::client::Client;
use tickscope_agent::error::Error;
use tickscope_agent::wire::Report;

struct Ca {
    cert: rcgen::Certificate,
    key: KeyPair,
}

fn ca() -> Ca {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let cert = params.self_signed(&key).unwrap();
    Ca { cert, key }
}

/// A TLS server for `127.0.0.1` with a certificate `ca` signed; it answers every request 200
/// and counts them. Returns its URL.
fn tls_server(ca: &Ca) -> (String, Arc<std::sync::atomic::AtomicUsize>) {
    let key = KeyPair::generate().unwrap();
    let params = CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
    let cert = params.signed_by(&key, &ca.cert, &ca.key).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(
        vec![cert.der().clone()],
        rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
    )
    .unwrap();
    let config = Arc::new(config);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!(
        "https://127.0.0.1:{}",
        listener.local_addr().unwrap().port()
    );
    let served = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = served.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let conn = rustls::ServerConnection::new(config.clone()).unwrap();
            let mut tls = rustls::StreamOwned::new(conn, stream);
            let mut reader = BufReader::new(&mut tls);
            let mut length = 0;
            let mut line = String::new();
            // A client that refuses the certificate ends the handshake here.
            while reader.read_line(&mut line).is_ok_and(|n| n > 0) {
                if line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
                line.clear();
            }
            if line != "\r\n" {
                continue;
            }
            let mut body = vec![0; length];
            if reader.read_exact(&mut body).is_err() {
                continue;
            }
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let _ = tls
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}");
            let _ = tls.flush();
        }
    });
    (url, served)
}

fn report() -> Vec<u8> {
    let report: Report = serde_json::from_value(serde_json::json!({
        "agent": {"id": "m", "run_id": "r", "version": "1"},
        "seq": 0,
        "host": {"name": "h", "cpus": 1, "kernel": "k"},
        "interval": {"start_ms": 0, "end_ms": 1, "length_ns": 1_000_000_000u64},
        "guests": []
    }))
    .unwrap();
    serde_json::to_vec(&report).unwrap()
}

#[test]
fn a_server_signed_by_the_given_ca_is_trusted_and_others_are_not() {
    let private = ca();
    let (url, served) = tls_server(&private);
    let pem = private.cert.pem();

    let trusting = Client::with_ca(&url, "tks_x", pem.as_bytes()).unwrap();
    trusting
        .post_report(report())
        .expect("the private CA's server is trusted");
    assert_eq!(served.load(std::sync::atomic::Ordering::SeqCst), 1);

    // The public roots do not know the private CA.
    let public = Client::new(&url, "tks_x");
    let refused = public.post_report(report()).unwrap_err();
    assert!(matches!(refused, Error::Unreachable(_)), "{refused}");
    // Nor does another private CA.
    let other = ca();
    let wrong = Client::with_ca(&url, "tks_x", other.cert.pem().as_bytes()).unwrap();
    let refused = wrong.post_report(report()).unwrap_err();
    assert!(
        refused.to_string().to_lowercase().contains("certificate")
            || refused.to_string().to_lowercase().contains("issuer"),
        "{refused}"
    );
    assert_eq!(
        served.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "no request passed an untrusted handshake"
    );
}

#[test]
fn a_ca_file_without_a_certificate_is_refused_with_a_reason() {
    let err = Client::with_ca("https://x", "t", b"not a pem file")
        .err()
        .unwrap();
    assert!(err.contains("no PEM certificate"), "{err}");
}
