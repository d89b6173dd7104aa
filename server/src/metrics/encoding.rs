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
                .map_or(Some(true), |q| {
                    q.trim().parse::<f32>().ok().map(|q| q > 0.0)
                });
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

    /// The `Content-Encoding` an exposition in this encoding is sent with.
    pub fn content_encoding(self) -> Option<&'static str> {
        match self {
            Encoding::Identity => None,
            Encoding::Gzip => Some("gzip"),
        }
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
            // A weight that is not a number says nothing.
            (Some("gzip;q=high"), Encoding::Identity),
        ];
        for (header, expected) in cases {
            assert_eq!(Encoding::negotiate(header), expected, "{header:?}");
        }
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
