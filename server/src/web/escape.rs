//! How every value in an HTML template is written: HTML-escaped, as askama does by default, after
//! [`show_invisible`] made bidi controls, zero-width and control characters visible (`\u{202e}`).
//!
//! Set for the `.html` templates in `server/askama.toml`, so that it covers every value in every
//! page (VM, host and guest names, kernel strings, boot arguments, user and token names), not
//! only the ones someone remembered to pass through a filter.

use std::fmt;

use askama::filters::{Escaper, Html};

use crate::visible::show_invisible;

#[derive(Debug, Clone, Copy, Default)]
pub struct VisibleHtml;

impl Escaper for VisibleHtml {
    fn write_escaped_str<W: fmt::Write>(&self, dest: W, string: &str) -> fmt::Result {
        Html.write_escaped_str(dest, &show_invisible(string))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_is_escaped_and_hidden_characters_shown() {
        let cases = [
            ("web-01", "web-01"),
            ("<b>&\"'", "&#60;b&#62;&#38;&#34;&#39;"),
            ("evil\u{202e}gpj.exe", "evil\\u{202e}gpj.exe"),
            ("web\u{200b}-01", "web\\u{200b}-01"),
            ("<\u{1b}[31m>", "&#60;\\u{1b}[31m&#62;"),
        ];
        for (text, expected) in cases {
            let mut out = String::new();
            VisibleHtml.write_escaped_str(&mut out, text).unwrap();
            assert_eq!(out, expected, "{text:?}");
        }
    }
}
