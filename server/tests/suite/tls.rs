//! `serve --tls-cert --tls-key`: the server speaks HTTPS itself, sends HSTS and Secure cookies,
//! and the agent reports to it trusting a private CA. Certificates are made for the test (rcgen).

use crate::common;

use std::sync::Arc;

use ureq::tls::{Certificate, RootCerts, TlsConfig};

use common::processes::{Processes, add_token, start_server};
use tickscope_agent::client::Client;

#[test]
fn the_server_serves_https_with_hsts_and_the_agent_reports_through_it() {
    let work = tempfile::tempdir().unwrap();
    let common::LoopbackCertificate {
        cert_path,
        key_path,
        ca,
    } = common::loopback_certificate(work.path());

    let db = work.path().join("t.db");
    let agent_token = add_token(&db, "agent");
    let mut processes = Processes::default();
    let url = start_server(
        &db,
        &[
            "--tls-cert",
            cert_path.to_str().unwrap(),
            "--tls-key",
            key_path.to_str().unwrap(),
        ],
        &mut processes,
    );
    assert!(url.starts_with("https://127.0.0.1:"), "{url}");

    // A browser-like client that trusts the private CA.
    let tls = TlsConfig::builder()
        .root_certs(RootCerts::Specific(Arc::new(vec![
            Certificate::from_der(ca.der()).to_owned(),
        ])))
        .build();
    let client: ureq::Agent = ureq::Agent::config_builder()
        .tls_config(tls)
        .http_status_as_error(false)
        .build()
        .into();
    let login = client.get(&format!("{url}/login")).call().unwrap();
    assert_eq!(login.status().as_u16(), 200);
    assert_eq!(
        login.headers()["strict-transport-security"],
        "max-age=31536000"
    );
    let cookie = login.headers()["set-cookie"].to_str().unwrap().to_string();
    assert!(cookie.contains("; Secure"), "{cookie}");

    // The agent trusts the CA it is given, and its report is stored.
    let agent = Client::with_ca(&url, &agent_token, ca.pem().as_bytes()).unwrap();
    let report = serde_json::json!({
        "agent": {"id": "m", "run_id": "r", "version": "1"},
        "seq": 0,
        "host": {"name": "tls-host", "cpus": 2, "kernel": "6.1"},
        "interval": {"start_ms": tickscope_server::clock::now_ms() - 10_000,
                     "end_ms": tickscope_server::clock::now_ms(), "length_ns": 10_000_000_000u64},
        "guests": []
    });
    agent
        .post_report(serde_json::to_vec(&report).unwrap())
        .expect("the report went through over TLS");
    // Without the CA, the public roots refuse the certificate.
    let plain = Client::new(&url, &agent_token);
    assert!(
        plain
            .post_report(serde_json::to_vec(&report).unwrap())
            .is_err()
    );
    // Plain HTTP on the TLS port is not served.
    let http = url.replace("https://", "http://");
    assert!(
        ureq::get(&format!("{http}/healthz"))
            .call()
            .map(|r| r.status().as_u16() != 200)
            .unwrap_or(true)
    );
}
