//! The HTTP client notifications are posted with: ureq (blocking; called from
//! `spawn_blocking`) over rustls, with a timeout and, for a receiver with its own CA, that CA
//! instead of the built-in roots.

use std::time::Duration;

use ureq::tls::{Certificate, RootCerts, TlsConfig};

/// How long one POST may take, connecting included, before it counts as failed.
pub const POST_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a POST failed, and whether trying again can help.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PostError {
    /// A network error, a timeout, a 5xx, 408 or 429: tried again later.
    Retry(String),
    /// Any other 4xx: the receiver refuses this request, and would refuse it again.
    Refused(String),
}

impl std::fmt::Display for PostError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PostError::Retry(e) | PostError::Refused(e) => f.write_str(e),
        }
    }
}

/// An agent that trusts `ca_pem` (every certificate in it) if given, else the built-in roots.
pub fn agent(ca_pem: Option<&[u8]>, timeout: Duration) -> Result<ureq::Agent, String> {
    let mut tls = TlsConfig::builder();
    if let Some(pem) = ca_pem {
        let certs: Vec<Certificate<'static>> = ureq::tls::parse_pem(pem)
            .filter_map(|item| match item {
                Ok(ureq::tls::PemItem::Certificate(c)) => Some(Ok(c)),
                Ok(_) => None,
                Err(e) => Some(Err(e)),
            })
            .collect::<Result<_, _>>()
            .map_err(|e| format!("the CA certificate cannot be read: {e}"))?;
        if certs.is_empty() {
            return Err("the CA file holds no PEM certificate".into());
        }
        tls = tls.root_certs(RootCerts::new_with_certs(&certs));
    }
    Ok(ureq::Agent::config_builder()
        .timeout_global(Some(timeout))
        .http_status_as_error(false)
        .user_agent(concat!("tickscope-server/", env!("CARGO_PKG_VERSION")))
        .tls_config(tls.build())
        .build()
        .into())
}

/// One JSON POST, with `authorization` as the Authorization header if given.
pub fn post_json(
    agent: &ureq::Agent,
    url: &str,
    authorization: Option<&str>,
    body: &str,
) -> Result<(), PostError> {
    let mut request = agent.post(url).header("Content-Type", "application/json");
    if let Some(value) = authorization {
        request = request.header("Authorization", value);
    }
    let response = request
        .send(body)
        .map_err(|e| PostError::Retry(e.to_string()))?;
    let status = response.status().as_u16();
    match status {
        200..=299 => Ok(()),
        s if retryable(s) => Err(PostError::Retry(format!("HTTP {s}"))),
        s => Err(PostError::Refused(format!("HTTP {s}"))),
    }
}

/// Whether a failed answer with this status may succeed if sent again (as Alertmanager's
/// webhook notifier and Prometheus's notifier decide): not a 4xx, except 408 and 429.
pub fn retryable(status: u16) -> bool {
    !(400..500).contains(&status) || status == 408 || status == 429
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_some_failures_are_retried() {
        let cases = [
            (400, false),
            (401, false),
            (404, false),
            (408, true),
            (413, false),
            (429, true),
            (500, true),
            (503, true),
            (302, true),
        ];
        for (status, expected) in cases {
            assert_eq!(retryable(status), expected, "{status}");
        }
    }

    #[test]
    fn a_ca_file_without_a_certificate_is_refused() {
        assert!(agent(Some(b"not a pem"), POST_TIMEOUT).is_err());
        assert!(agent(None, POST_TIMEOUT).is_ok());
    }
}
