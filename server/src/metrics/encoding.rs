//! Whether `/metrics` goes out gzipped, and the text written in chunks that are gzipped as they
//! are done ([`Out`]).
//!
//! Prometheus asks for gzip. At 100,000 guests the exposition is more than a hundred megabytes
//! of text and about 13 MB gzipped; written whole and then compressed on its way out, the text
//! was the largest block a server held (heaptrack: 192 MB of the 680 MB heap peak of a server
//! just restarted with 100,000 guests, docs/performance.md). Gzipped a chunk at a time, the
//! server holds the compressed answer and one chunk of text.

use std::io::Write;

use flate2::Compression;
use flate2::write::GzEncoder;

use crate::error::{AppError, AppResult};

/// How much text is gathered before it is handed to the encoder.
const CHUNK_BYTES: usize = 256 * 1024;

/// How an exposition is sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    Identity,
    Gzip,
}

impl Encoding {
    /// From the scraper's `Accept-Encoding`: gzip when it lists `gzip` (or `*` without refusing
    /// gzip) with a weight above zero (RFC 9110, 12.5.3); otherwise, or without the header, as
    /// text.
    pub fn negotiate(accept_encoding: Option<&str>) -> Encoding {
        let Some(header) = accept_encoding else {
            return Encoding::Identity;
        };
        let (mut gzip, mut any) = (None, None);
        for item in header.split(',') {
            let mut parts = item.split(';');
            let coding = parts.next().unwrap_or("").trim();
            let accepted = parts
                .filter_map(|p| p.trim().strip_prefix("q=").or(p.trim().strip_prefix("Q=")))
                .next_back()
                .map_or(Some(true), |q| weighs_above_zero(q.trim()));
            let Some(accepted) = accepted else {
                continue;
            };
            if coding.eq_ignore_ascii_case("gzip") || coding.eq_ignore_ascii_case("x-gzip") {
                gzip = Some(accepted);
            } else if coding == "*" {
                any = Some(accepted);
            }
        }
        match gzip.or(any) {
            Some(true) => Encoding::Gzip,
            _ => Encoding::Identity,
        }
    }

    /// From every `Accept-Encoding` header of a request, read as one list (RFC 9110, 5.3).
    pub fn negotiate_all<'a>(headers: impl IntoIterator<Item = &'a str>) -> Encoding {
        let list: Vec<&str> = headers.into_iter().collect();
        if list.is_empty() {
            return Encoding::negotiate(None);
        }
        Encoding::negotiate(Some(&list.join(",")))
    }

    /// The `Content-Encoding` an exposition in this encoding is sent with.
    pub fn content_encoding(self) -> Option<&'static str> {
        match self {
            Encoding::Identity => None,
            Encoding::Gzip => Some("gzip"),
        }
    }
}

/// Whether a weight (`qvalue`, RFC 9110, 12.4.2: `0` to `1` with at most three decimals) is
/// above zero; `None` when it is not a weight, and then its coding says nothing.
fn weighs_above_zero(q: &str) -> Option<bool> {
    let (whole, fraction) = q.split_once('.').unwrap_or((q, ""));
    if fraction.len() > 3 || !fraction.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    match whole {
        "0" => Some(fraction.bytes().any(|b| b != b'0')),
        "1" if fraction.bytes().all(|b| b == b'0') => Some(true),
        _ => None,
    }
}

/// An exposition being written: `text` is what was written since the last chunk was handed
/// on; a writer calls [`Out::spill_if_full`] between series.
pub struct Out {
    pub text: String,
    gzip: Option<GzEncoder<Vec<u8>>>,
    chunk_bytes: usize,
    written_bytes: usize,
}

impl Out {
    /// An exposition in `encoding`; `expected_bytes` of text are room made ahead (the last
    /// exposition's size: text kept whole grows once or not at all).
    pub fn new(encoding: Encoding, expected_bytes: usize) -> Out {
        Out::with_chunks(encoding, expected_bytes, CHUNK_BYTES)
    }

    fn with_chunks(encoding: Encoding, expected_bytes: usize, chunk_bytes: usize) -> Out {
        match encoding {
            Encoding::Identity => Out {
                text: String::with_capacity(expected_bytes),
                gzip: None,
                chunk_bytes,
                written_bytes: 0,
            },
            // The fastest level, as the other answers are compressed (`app`): gzip's default
            // level took 13 times as long for an answer a quarter smaller.
            Encoding::Gzip => Out {
                text: String::with_capacity(chunk_bytes + chunk_bytes / 4),
                gzip: Some(GzEncoder::new(
                    Vec::with_capacity(expected_bytes / 8),
                    Compression::fast(),
                )),
                chunk_bytes,
                written_bytes: 0,
            },
        }
    }

    /// Hands the text on to the encoder once it is a chunk's worth (text kept whole stays).
    pub fn spill_if_full(&mut self) -> AppResult<()> {
        if self.text.len() >= self.chunk_bytes {
            self.spill()?;
        }
        Ok(())
    }

    fn spill(&mut self) -> AppResult<()> {
        if let Some(gzip) = &mut self.gzip {
            gzip.write_all(self.text.as_bytes())
                .map_err(|e| AppError::encode("the metrics", e))?;
            self.written_bytes += self.text.len();
            self.text.clear();
        }
        Ok(())
    }

    /// The exposition's bytes as they are sent, and how long its text was.
    pub fn finish(mut self) -> AppResult<(Vec<u8>, usize)> {
        self.spill()?;
        match self.gzip {
            None => {
                let text_bytes = self.text.len();
                Ok((self.text.into_bytes(), text_bytes))
            }
            Some(gzip) => Ok((
                gzip.finish()
                    .map_err(|e| AppError::encode("the metrics", e))?,
                self.written_bytes,
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use flate2::read::GzDecoder;

    use super::*;

    #[test]
    fn gzip_is_sent_when_the_scraper_accepts_it() {
        let cases = [
            (None, Encoding::Identity),
            (Some(""), Encoding::Identity),
            // Prometheus's own header.
            (Some("gzip"), Encoding::Gzip),
            (Some("GZIP"), Encoding::Gzip),
            (Some("x-gzip"), Encoding::Gzip),
            (Some("deflate, gzip;q=1.0, *;q=0.5"), Encoding::Gzip),
            (Some("zstd, br"), Encoding::Identity),
            (Some("gzip;q=0"), Encoding::Identity),
            (Some("gzip; q=0.000"), Encoding::Identity),
            (Some("gzip;q=0.001"), Encoding::Gzip),
            (Some("*"), Encoding::Gzip),
            (Some("*;q=0"), Encoding::Identity),
            // gzip refused by name, whatever `*` says.
            (Some("gzip;q=0, *"), Encoding::Identity),
            (Some("identity"), Encoding::Identity),
            (Some("gzip;q=1.000"), Encoding::Gzip),
            (Some("gzip;q=0.5, identity"), Encoding::Gzip),
            // A weight that is not one says nothing: not a number, four decimals, above 1, no
            // leading digit.
            (Some("gzip;q=high"), Encoding::Identity),
            (Some("gzip;q=0.5000"), Encoding::Identity),
            (Some("gzip;q=1.5"), Encoding::Identity),
            (Some("gzip;q=.5"), Encoding::Identity),
            (Some("gzip;q=high, *"), Encoding::Gzip),
        ];
        for (header, expected) in cases {
            assert_eq!(Encoding::negotiate(header), expected, "{header:?}");
        }
        // Several headers are one list.
        assert_eq!(Encoding::negotiate_all([]), Encoding::Identity);
        assert_eq!(Encoding::negotiate_all(["zstd", "gzip"]), Encoding::Gzip);
        assert_eq!(
            Encoding::negotiate_all(["*", "gzip;q=0"]),
            Encoding::Identity
        );
    }

    fn written(encoding: Encoding, chunk_bytes: usize, lines: usize) -> (Vec<u8>, usize) {
        let mut out = Out::with_chunks(encoding, 0, chunk_bytes);
        for n in 0..lines {
            out.text
                .push_str(&format!("series{{n=\"{n}\",name=\"é\"}} {n}.5\n"));
            out.spill_if_full().unwrap();
        }
        out.finish().unwrap()
    }

    #[test]
    fn gzipped_chunk_by_chunk_it_decodes_to_the_text_kept_whole() {
        let (text, text_bytes) = written(Encoding::Identity, 100, 5_000);
        assert_eq!(text_bytes, text.len());
        for chunk_bytes in [1, 100, 4096, 1 << 20] {
            let (gzipped, gzipped_text_bytes) = written(Encoding::Gzip, chunk_bytes, 5_000);
            let mut decoded = Vec::new();
            GzDecoder::new(gzipped.as_slice())
                .read_to_end(&mut decoded)
                .unwrap();
            assert_eq!(decoded, text, "chunks of {chunk_bytes} bytes");
            assert_eq!(gzipped_text_bytes, text.len());
            assert!(gzipped.len() < text.len() / 4, "{} bytes", gzipped.len());
        }
    }
}
