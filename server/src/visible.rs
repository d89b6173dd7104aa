//! Characters that hide or rearrange text, made visible.
//!
//! VM, host and guest names, kernel strings and login names come from machines and people we do
//! not control. A bidi control (U+202E turns `exe.txt` into `txt.exe` on screen) or a zero-width
//! character (two guests both shown as `web-01`) makes a page, a spreadsheet or a dashboard show
//! something other than what is stored; a control character (a newline, an ANSI escape) forges
//! lines in a log or a terminal. Wherever such text is shown or logged, these characters are
//! written as Rust-style escapes (`\u{202e}`, `\n`) instead; the stored value stays as sent.

use std::borrow::Cow;

/// Bidirectional formatting characters: embeddings and overrides (U+202A-U+202E), isolates
/// (U+2066-U+2069), the left-to-right, right-to-left and Arabic letter marks.
pub fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}' | '\u{061c}')
}

/// Characters with no width: zero-width space, non-joiner and joiner, the word joiner and the
/// invisible operators beside it (U+2060-U+2064), and the byte-order mark (zero-width no-break
/// space).
pub fn is_zero_width(c: char) -> bool {
    matches!(c, '\u{200b}'..='\u{200d}' | '\u{2060}'..='\u{2064}' | '\u{feff}')
}

/// Other characters that show as nothing, or break a line where no newline is: the line and
/// paragraph separators, the soft hyphen, the combining grapheme joiner, the Hangul fillers, the
/// Khmer inherent vowels, the Mongolian vowel separator and variation selectors, the deprecated
/// format characters (U+206A-U+206F), the interlinear annotation marks, the tag characters and
/// the variation selectors (which alone show nothing).
pub fn is_other_invisible(c: char) -> bool {
    matches!(c,
        '\u{2028}' | '\u{2029}' | '\u{00ad}' | '\u{034f}' | '\u{115f}' | '\u{1160}' | '\u{3164}'
        | '\u{ffa0}' | '\u{17b4}' | '\u{17b5}' | '\u{180b}'..='\u{180f}' | '\u{206a}'..='\u{206f}'
        | '\u{fff9}'..='\u{fffb}' | '\u{e0000}'..='\u{e007f}' | '\u{fe00}'..='\u{fe0f}'
        | '\u{e0100}'..='\u{e01ef}')
}

/// Whether `c` must be written as an escape wherever outside text is shown or logged: a control
/// character (C0 including ESC, DEL, C1), a bidi control, a zero-width character or another
/// invisible one.
pub fn must_escape(c: char) -> bool {
    c.is_control() || is_bidi_control(c) || is_zero_width(c) || is_other_invisible(c)
}

/// Writes `c` as an escape: `\n`, `\r`, `\t` for the usual three, `\u{1b}` and the like for
/// the rest.
pub fn push_escaped(out: &mut String, c: char) {
    // `escape_default` gives `\t`, `\r`, `\n` and `\u{..}` for every character `must_escape`
    // selects (none of them is a quote, a backslash or printable ASCII).
    out.extend(c.escape_default());
}

/// `text` with every character [`must_escape`] selects written as an escape; borrowed when there
/// is none, which is nearly always.
pub fn show_invisible(text: &str) -> Cow<'_, str> {
    if !text.chars().any(must_escape) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if must_escape(c) {
            push_escaped(&mut out, c);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_and_reordering_characters_are_shown_as_escapes() {
        let cases = [
            ("web-01", "web-01"),
            ("", ""),
            // Other scripts, accents and emoji are text, not tricks.
            ("数据库-é-🦀", "数据库-é-🦀"),
            ("שרת", "שרת"),
            ("evil\u{202e}txt.exe", "evil\\u{202e}txt.exe"),
            (
                "a\u{202a}b\u{202b}c\u{202c}d\u{202d}e",
                "a\\u{202a}b\\u{202b}c\\u{202c}d\\u{202d}e",
            ),
            (
                "\u{2066}x\u{2067}y\u{2068}z\u{2069}",
                "\\u{2066}x\\u{2067}y\\u{2068}z\\u{2069}",
            ),
            ("\u{200e}\u{200f}\u{061c}", "\\u{200e}\\u{200f}\\u{61c}"),
            ("web\u{200b}-01", "web\\u{200b}-01"),
            (
                "\u{200c}\u{200d}\u{2060}\u{2064}\u{feff}",
                "\\u{200c}\\u{200d}\\u{2060}\\u{2064}\\u{feff}",
            ),
            (
                "web\u{ad}01\u{2028}\u{3164}\u{e0041}\u{fe0f}",
                "web\\u{ad}01\\u{2028}\\u{3164}\\u{e0041}\\u{fe0f}",
            ),
            ("a\nb\rc\td", "a\\nb\\rc\\td"),
            ("\u{1b}[31mred", "\\u{1b}[31mred"),
            (
                "nul\0del\u{7f}c1\u{85}\u{9b}",
                "nul\\u{0}del\\u{7f}c1\\u{85}\\u{9b}",
            ),
            // A backslash is left alone: typed as text, it forges nothing.
            ("C:\\vm\\n", "C:\\vm\\n"),
        ];
        for (text, expected) in cases {
            assert_eq!(show_invisible(text), expected, "{text:?}");
        }
    }

    #[test]
    fn text_without_such_characters_is_not_copied() {
        assert!(matches!(show_invisible("web-01"), Cow::Borrowed(_)));
    }

    #[test]
    fn ordinary_spacing_and_joining_characters_are_kept() {
        // A space, a no-break space, a thin space and the Arabic tatweel are ordinary text.
        for c in [' ', '\u{a0}', '\u{2009}', 'ـ'] {
            assert!(!must_escape(c), "{c:?}");
        }
    }
}
