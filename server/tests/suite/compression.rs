//! Compressed answers (issue 18): a client that asks for gzip or zstd gets the answer it would
//! have got uncompressed, encoded, with `Content-Encoding` and `Vary: accept-encoding`; a client
//! that does not ask gets no encoding; tiny answers are left alone. The decoders are flate2's and
//! zstd's own, not tower-http's.

use crate::common;

use std::io::Read;

use axum::body::Body;
use axum::http::{HeaderMap, Request, StatusCode, header};
use http_body_util::BodyExt;
use tower::ServiceExt;

use common::{Server, fleet_report, manual_clock, server_with_clock};
use tickscope_server::state::Options;

/// How a request proves who it is.
#[derive(Clone, Copy)]
enum As<'a> {
    Token(&'a str),
    Cookie(&'a str),
    Nobody,
}

/// The status, headers and raw body bytes of a GET, with `Accept-Encoding` if given.
async fn get(
    server: &Server,
    path: &str,
    who: As<'_>,
    accept_encoding: Option<&str>,
) -> (StatusCode, HeaderMap, Vec<u8>) {
    let mut request = Request::builder().uri(path);
    request = match who {
        As::Token(token) => request.header(header::AUTHORIZATION, format!("Bearer {token}")),
        As::Cookie(cookie) => request.header(header::COOKIE, cookie),
        As::Nobody => request,
    };
    if let Some(encodings) = accept_encoding {
        request = request.header(header::ACCEPT_ENCODING, encodings);
    }
    let response = server
        .router
        .clone()
        .oneshot(request.body(Body::empty()).unwrap())
        .await
        .unwrap();
    let (parts, body) = response.into_parts();
    let bytes = body.collect().await.unwrap().to_bytes().to_vec();
    (parts.status, parts.headers, bytes)
}

fn decode(encoding: &str, bytes: &[u8]) -> Vec<u8> {
    let mut plain = Vec::new();
    match encoding {
        "gzip" => {
            flate2::read::GzDecoder::new(bytes)
                .read_to_end(&mut plain)
                .unwrap();
        }
        "zstd" => plain = zstd::decode_all(bytes).unwrap(),
        other => panic!("no decoder for {other}"),
    }
    plain
}

/// An answer as text to compare: /metrics lists a family's series in no fixed order (the
/// exposition format gives the order no meaning), so its lines are compared sorted.
fn comparable(path: &str, body: Vec<u8>) -> Vec<String> {
    let text = String::from_utf8(body).unwrap();
    if path == "/metrics" {
        let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
        lines.sort();
        lines
    } else {
        vec![text]
    }
}

fn header_text(headers: &HeaderMap, name: header::HeaderName) -> Vec<String> {
    headers
        .get_all(name)
        .iter()
        .map(|v| v.to_str().unwrap().to_ascii_lowercase())
        .collect()
}

#[tokio::test]
async fn pages_json_csv_and_metrics_are_compressed_only_when_asked() {
    // A clock that stands still: two requests for the same answer get the same bytes.
    let server = server_with_clock(Options::default(), manual_clock()).await;
    for seq in 1..=6 {
        let reply = server
            .post_report(Some(&server.agent_token), &fleet_report(seq))
            .await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    }
    let login = server.login("ada", "viewer").await;
    let viewer = server.viewer_token.clone();
    let cases = [
        ("/guests", As::Cookie(&login.cookie), "text/html"),
        ("/api/v1/guests", As::Token(&viewer), "application/json"),
        ("/api/v1/guests.csv", As::Token(&viewer), "text/csv"),
        ("/metrics", As::Token(&viewer), "text/plain"),
    ];
    for (path, who, content_type) in cases {
        let (status, headers, plain) = get(&server, path, who, None).await;
        assert_eq!(status, StatusCode::OK, "{path}");
        assert!(
            header_text(&headers, header::CONTENT_TYPE)[0].starts_with(content_type),
            "{path}: {headers:?}"
        );
        assert!(
            headers.get(header::CONTENT_ENCODING).is_none(),
            "{path} is encoded for a client that did not ask: {headers:?}"
        );
        assert!(plain.len() > 200, "{path}: {} bytes", plain.len());
        for encoding in ["gzip", "zstd"] {
            let (status, headers, encoded) = get(&server, path, who, Some(encoding)).await;
            assert_eq!(status, StatusCode::OK, "{path} {encoding}");
            assert_eq!(
                header_text(&headers, header::CONTENT_ENCODING),
                [encoding],
                "{path}"
            );
            assert!(
                header_text(&headers, header::VARY)
                    .iter()
                    .any(|v| v.split(',').any(|v| v.trim() == "accept-encoding")),
                "{path} {encoding}: {headers:?}"
            );
            assert!(
                headers.get(header::CONTENT_LENGTH).is_none()
                    || headers[header::CONTENT_LENGTH] == encoded.len().to_string().as_str(),
                "{path} {encoding}: a length that is not the encoded body's"
            );
            assert_ne!(encoded, plain, "{path} {encoding}");
            assert!(
                encoded.len() < plain.len(),
                "{path} {encoding}: {} bytes encoded, {} plain",
                encoded.len(),
                plain.len()
            );
            assert_eq!(
                comparable(path, decode(encoding, &encoded)),
                comparable(path, plain.clone()),
                "{path} {encoding} decodes to another answer"
            );
            // The security headers are set on compressed answers too.
            assert_eq!(headers[header::X_CONTENT_TYPE_OPTIONS], "nosniff", "{path}");
            assert_eq!(headers[header::CACHE_CONTROL], "no-store", "{path}");
        }
    }
    // /metrics says it depends on Accept as well as Accept-Encoding.
    let (_, headers, _) = get(&server, "/metrics", As::Token(&viewer), Some("gzip")).await;
    let vary = header_text(&headers, header::VARY).join(",");
    assert!(
        vary.contains("accept") && vary.contains("accept-encoding"),
        "{vary}"
    );
}

#[tokio::test]
async fn tiny_answers_and_clients_that_ask_for_none_are_left_alone() {
    let server = server_with_clock(Options::default(), manual_clock()).await;
    // Three bytes: compressing them would only add a header's worth.
    let (status, headers, body) = get(&server, "/healthz", As::Nobody, Some("gzip, zstd")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        headers.get(header::CONTENT_ENCODING).is_none(),
        "{headers:?}"
    );
    assert_eq!(body, b"ok\n");
    // Asking for identity, or for an encoding the server does not make, gets the plain answer.
    for accept in ["identity", "br", "gzip;q=0, zstd;q=0"] {
        let (status, headers, body) =
            get(&server, "/api/v1/openapi.json", As::Nobody, Some(accept)).await;
        assert_eq!(status, StatusCode::OK, "{accept}");
        assert!(
            headers.get(header::CONTENT_ENCODING).is_none(),
            "{accept}: {headers:?}"
        );
        serde_json::from_slice::<serde_json::Value>(&body).unwrap();
    }
}
