//! Percent-encoding of what the server writes into its own addresses: a query value, and the
//! local path a login goes on to (`next`).

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

/// What a query value keeps as is: the unreserved characters of RFC 3986.
const UNRESERVED: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// The same, and `/`: a local path kept readable.
const PATH: &AsciiSet = &UNRESERVED.remove(b'/');

/// A value for a query string.
pub fn query_value(value: &str) -> String {
    utf8_percent_encode(value, UNRESERVED).to_string()
}

/// A local path as a query value that keeps its `/` readable.
pub fn path(path: &str) -> String {
    utf8_percent_encode(path, PATH).to_string()
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_unreserved_characters_stay_as_they_are() {
        let cases = [
            ("a-b_c.d~e", "a-b_c.d~e", "a-b_c.d~e"),
            (
                "/guests/1?x=y&z",
                "%2Fguests%2F1%3Fx%3Dy%26z",
                "/guests/1%3Fx%3Dy%26z",
            ),
            ("web 01", "web%2001", "web%2001"),
            ("é", "%C3%A9", "%C3%A9"),
        ];
        for (text, value, path) in cases {
            assert_eq!(super::query_value(text), value, "{text}");
            assert_eq!(super::path(text), path, "{text}");
        }
    }
}
