//! The server's log: every event is written with its control, bidi and zero-width characters
//! escaped, whoever wrote the fields.
//!
//! Login names, token names, VM names and error messages reach the log from outside. A newline in
//! one would start a forged line (`logged in user=alice`); an ANSI escape would recolour or erase
//! what a terminal shows; U+202E would reverse it. Escaping at each call site would miss the next
//! one, so the writer the fmt subscriber writes to escapes the whole formatted event instead.
//!
//! tracing-subscriber's fmt layer (0.3.23, `fmt_layer.rs`, `on_event`) formats each event into
//! one buffer, asks the `MakeWriter` for a new writer, and hands it the buffer with one
//! `write_all`. [`EscapedEvent`] does not rely on the single call: it keeps whatever it is given
//! until it is dropped (or flushed), then escapes it all at once, so that the newline ending the
//! event is the only one that survives.

use std::collections::HashMap;
use std::hash::Hash;
use std::io::{self, Write};
use std::sync::Mutex;

use tracing_subscriber::fmt::MakeWriter;

use crate::visible::{must_escape, push_escaped};

/// `event` (one formatted event) with every character [`must_escape`] selects escaped, except a
/// newline that ends it.
pub fn escape_event(event: &str) -> String {
    let (body, end) = match event.strip_suffix('\n') {
        Some(body) => (body, "\n"),
        None => (event, ""),
    };
    let mut out = String::with_capacity(event.len());
    for c in body.chars() {
        if must_escape(c) {
            push_escaped(&mut out, c);
        } else {
            out.push(c);
        }
    }
    out.push_str(end);
    out
}

/// A [`MakeWriter`] that gives each event an [`EscapedEvent`] writing to `inner`.
#[derive(Debug, Clone)]
pub struct EscapingWriter<M> {
    inner: M,
}

impl<M> EscapingWriter<M> {
    pub fn new(inner: M) -> Self {
        EscapingWriter { inner }
    }
}

impl<'a, M: MakeWriter<'a>> MakeWriter<'a> for EscapingWriter<M> {
    type Writer = EscapedEvent<M::Writer>;

    fn make_writer(&'a self) -> Self::Writer {
        EscapedEvent::new(self.inner.make_writer())
    }

    fn make_writer_for(&'a self, meta: &tracing::Metadata<'_>) -> Self::Writer {
        EscapedEvent::new(self.inner.make_writer_for(meta))
    }
}

/// One event on its way to `inner`: kept whole, escaped and written when flushed or dropped.
pub struct EscapedEvent<W: Write> {
    inner: W,
    event: Vec<u8>,
}

impl<W: Write> EscapedEvent<W> {
    fn new(inner: W) -> Self {
        EscapedEvent {
            inner,
            event: Vec::new(),
        }
    }
}

impl<W: Write> Write for EscapedEvent<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.event.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if !self.event.is_empty() {
            // The formatter writes a `String`; anything else is shown, not trusted.
            let escaped = escape_event(&String::from_utf8_lossy(&self.event));
            self.event.clear();
            self.inner.write_all(escaped.as_bytes())?;
        }
        self.inner.flush()
    }
}

impl<W: Write> Drop for EscapedEvent<W> {
    fn drop(&mut self) {
        // Nowhere to report a failed log write but the log itself.
        let _ = self.flush();
    }
}

/// Warnings per sender (a credential): at most so many a minute are written, the rest held back
/// and counted, and the next line written says how many were. What one sender makes the server
/// say cannot fill the log, nor drown what others make it say.
#[derive(Debug)]
pub struct WarningBudget<K> {
    per_minute: u32,
    windows: Mutex<HashMap<K, Window>>,
}

/// One sender's minute.
#[derive(Debug, Clone, Copy)]
struct Window {
    started_ms: i64,
    written: u32,
    held_back: u64,
}

/// Senders with a minute remembered at most; past it, new senders' warnings are held back until
/// the minutes of others end.
const MAX_SENDERS: usize = 10_000;

impl<K: Hash + Eq> WarningBudget<K> {
    pub fn new(per_minute: u32) -> Self {
        WarningBudget {
            per_minute,
            windows: Mutex::new(HashMap::new()),
        }
    }

    /// Whether `sender` may write a warning at `now_ms`: `Some(n)` with the warnings it had
    /// held back since its last one written, or `None` (held back now, and counted).
    pub fn allow(&self, sender: K, now_ms: i64) -> Option<u64> {
        let mut windows = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        if windows.len() >= MAX_SENDERS && !windows.contains_key(&sender) {
            windows.retain(|_, w| now_ms - w.started_ms < 60_000 || w.held_back > 0);
            if windows.len() >= MAX_SENDERS {
                return None;
            }
        }
        let window = windows.entry(sender).or_insert(Window {
            started_ms: now_ms,
            written: 0,
            held_back: 0,
        });
        if now_ms - window.started_ms >= 60_000 {
            window.started_ms = now_ms;
            window.written = 0;
        }
        if window.written >= self.per_minute {
            window.held_back += 1;
            return None;
        }
        window.written += 1;
        Some(std::mem::take(&mut window.held_back))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[test]
    fn a_sender_writes_its_share_a_minute_and_the_next_line_counts_the_rest() {
        let budget = WarningBudget::new(2);
        let said: Vec<Option<u64>> = [0, 1, 2, 3, 59_999, 60_000, 60_001]
            .iter()
            .map(|&at_ms| budget.allow("agent-1", at_ms))
            .collect();
        assert_eq!(said, [Some(0), Some(0), None, None, None, Some(3), Some(0)]);
        // Another sender has its own share.
        assert_eq!(budget.allow("agent-2", 3), Some(0));
    }

    #[test]
    fn only_the_newline_ending_an_event_survives() {
        let cases = [
            ("INFO logged in user=bob\n", "INFO logged in user=bob\n"),
            ("no newline at the end", "no newline at the end"),
            ("\n", "\n"),
            ("", ""),
            (
                "INFO login refused name=x\nINFO logged in user=alice\n",
                "INFO login refused name=x\\nINFO logged in user=alice\n",
            ),
            ("two at the end\n\n", "two at the end\\n\n"),
            ("cr\r\n", "cr\\r\n"),
            ("tab\there\n", "tab\\there\n"),
            ("\u{1b}[31mred\u{1b}[0m\n", "\\u{1b}[31mred\\u{1b}[0m\n"),
            ("del\u{7f} c1\u{9b}31m\n", "del\\u{7f} c1\\u{9b}31m\n"),
            ("name=\u{202e}nimda\n", "name=\\u{202e}nimda\n"),
            (
                "ali\u{200b}ce \u{2066}x\u{2069}\u{feff}\n",
                "ali\\u{200b}ce \\u{2066}x\\u{2069}\\u{feff}\n",
            ),
            ("数据库 é\n", "数据库 é\n"),
        ];
        for (event, expected) in cases {
            assert_eq!(escape_event(event), expected, "{event:?}");
        }
    }

    /// A `MakeWriter` into shared memory.
    #[derive(Clone, Default)]
    struct Memory(Arc<Mutex<Vec<u8>>>);

    impl Write for Memory {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Memory {
        type Writer = Memory;
        fn make_writer(&'a self) -> Memory {
            self.clone()
        }
    }

    #[test]
    fn an_event_written_in_pieces_is_escaped_as_one() {
        let memory = Memory::default();
        let make = EscapingWriter::new(memory.clone());
        {
            let mut event = make.make_writer();
            // A newline at the end of one write is not the end of the event.
            event.write_all(b"name=x\n").unwrap();
            event.write_all(b"forged\n").unwrap();
        }
        assert_eq!(
            String::from_utf8(memory.0.lock().unwrap().clone()).unwrap(),
            "name=x\\nforged\n"
        );
    }

    #[test]
    fn the_fmt_subscriber_writes_escaped_lines() {
        let memory = Memory::default();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(EscapingWriter::new(memory.clone()))
            .with_ansi(false)
            .without_time()
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            let name = "x\nINFO logged in user=alice\u{1b}[2K\r";
            tracing::info!(name = %name, "login refused");
            tracing::info!("{name}");
        });
        let log = String::from_utf8(memory.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = log.lines().collect();
        assert_eq!(lines.len(), 2, "{log}");
        for line in lines {
            assert!(line.contains("x\\nINFO logged in user=alice"), "{line}");
            assert!(!line.chars().any(must_escape), "{line:?}");
        }
    }
}
