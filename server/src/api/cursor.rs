//! The cursor of `GET /api/v1/guests`: where the next page resumes, as an opaque string.
//!
//! It holds the sort key of the last guest sent (`fleet::listing::SortKey`: the column's value,
//! the tie-breakers and the guest id), the order it belongs to, and a fingerprint of the filters;
//! then a checksum, so that a cursor cut short or edited is refused with 400 rather than read as
//! another position. It is not a secret and needs none: a viewer may read the whole list anyway.
//! Figures are carried as their bits, so that a key compares exactly as it did on the server.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};

use crate::crypto::sha256_hex;
use crate::domain::GuestId;
use crate::error::{AppError, AppResult};
use crate::fleet::listing::{Column, GuestFilter, KeyValue, Order, SortKey};

/// The format's version: a cursor of another version is refused, not misread.
const VERSION: u8 = 1;
/// Hex digits of the checksum (64 bits of a SHA-256).
const CHECKSUM_HEX: usize = 16;
/// Far longer than any cursor this server makes (names are at most a few hundred bytes).
pub const MAX_CURSOR_CHARS: usize = 4096;

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct CursorJson {
    v: u8,
    sort: Column,
    desc: bool,
    /// The filters' fingerprint.
    filter: String,
    value: ValueJson,
    waste_bits: u64,
    cpu_bits: u64,
    name: String,
    id: i64,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "lowercase")]
enum ValueJson {
    Text(String),
    NumberBits(u64),
    Integer(i64),
}

fn fingerprint(filter: &GuestFilter) -> String {
    let canonical = serde_json::to_vec(filter).unwrap_or_default();
    sha256_hex(&canonical)[..CHECKSUM_HEX].to_string()
}

fn checksum(payload: &str) -> String {
    sha256_hex(payload.as_bytes())[..CHECKSUM_HEX].to_string()
}

/// The cursor that resumes after `key` in `order` with `filter`.
pub fn encode(order: Order, filter: &GuestFilter, key: &SortKey) -> String {
    let json = CursorJson {
        v: VERSION,
        sort: order.column,
        desc: order.descending,
        filter: fingerprint(filter),
        value: match &key.value {
            KeyValue::Text(t) => ValueJson::Text(t.clone()),
            KeyValue::Number(n) => ValueJson::NumberBits(n.to_bits()),
            KeyValue::Integer(i) => ValueJson::Integer(*i),
        },
        waste_bits: key.wasted_cpu_pct.to_bits(),
        cpu_bits: key.host_cpu_pct.to_bits(),
        name: key.name.clone(),
        id: key.id.0,
    };
    let payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&json).unwrap_or_default());
    let sum = checksum(&payload);
    format!("{payload}.{sum}")
}

/// The key a cursor resumes after, if it is one this server made for `order` and `filter`.
pub fn decode(cursor: &str, order: Order, filter: &GuestFilter) -> AppResult<SortKey> {
    let refused = |why: &str| {
        AppError::BadRequest(format!(
            "{why}; pass the `next_cursor` of the previous page as it came, or leave the \
                 cursor out to start from the first page"
        ))
    };
    if cursor.len() > MAX_CURSOR_CHARS {
        return Err(refused("the cursor is longer than any this server makes"));
    }
    let Some((payload, sum)) = cursor.rsplit_once('.') else {
        return Err(refused("the cursor is not one this server made"));
    };
    if sum != checksum(payload) {
        return Err(refused("the cursor was cut short or changed"));
    }
    let bytes = URL_SAFE_NO_PAD
        .decode(payload)
        .map_err(|_| refused("the cursor is not one this server made"))?;
    let json: CursorJson = serde_json::from_slice(&bytes)
        .map_err(|_| refused("the cursor is not one this server made"))?;
    if json.v != VERSION {
        return Err(refused("the cursor is of another version of this server"));
    }
    if json.sort != order.column || json.desc != order.descending {
        return Err(AppError::BadRequest(format!(
            "the cursor continues a list sorted by {} {}; send sort={} and dir={} with it \
                 (the next link does), or leave the cursor out to start again",
            json.sort.key(),
            if json.desc { "descending" } else { "ascending" },
            json.sort.key(),
            if json.desc { "desc" } else { "asc" },
        )));
    }
    if json.filter != fingerprint(filter) {
        return Err(AppError::BadRequest(
            "the cursor continues a list with other filters; send the filters of the request \
             it came from (the next link does), or leave the cursor out to start again"
                .into(),
        ));
    }
    let value = match json.value {
        ValueJson::Text(t) => KeyValue::Text(t),
        ValueJson::NumberBits(bits) => KeyValue::Number(f64::from_bits(bits)),
        ValueJson::Integer(i) => KeyValue::Integer(i),
    };
    if !order.column.holds(&value) {
        return Err(refused("the cursor is not one this server made"));
    }
    Ok(SortKey {
        value,
        wasted_cpu_pct: f64::from_bits(json.waste_bits),
        host_cpu_pct: f64::from_bits(json.cpu_bits),
        name: json.name,
        id: GuestId(json.id),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> SortKey {
        SortKey {
            value: KeyValue::Number(0.1 + 0.2),
            wasted_cpu_pct: 4.000000000000001,
            host_cpu_pct: -0.0,
            name: "web \"01\" ☃".into(),
            id: GuestId(42),
        }
    }

    #[test]
    fn a_cursor_reads_back_as_the_exact_key_it_was_made_from() {
        let order = Order::default();
        let filter = GuestFilter {
            host: "hv-a".into(),
            ..Default::default()
        };
        let cursor = encode(order, &filter, &key());
        assert!(
            cursor
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)),
            "{cursor}: a cursor goes in a URL as it is"
        );
        let back = decode(&cursor, order, &filter).unwrap();
        assert_eq!(back, key());
        assert_eq!(back.host_cpu_pct.to_bits(), (-0.0f64).to_bits());
    }

    #[test]
    fn cursors_cut_changed_or_for_another_list_are_refused() {
        let order = Order::default();
        let filter = GuestFilter::default();
        let good = encode(order, &filter, &key());
        let (payload, sum) = good.rsplit_once('.').unwrap();
        // A payload edited and its checksum made anew: still not a key of this order.
        let forged = {
            let text = String::from_utf8(URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap();
            let text = text
                .replace("\"numberbits\"", "\"text\"")
                .replace(&format!("{}", (0.1f64 + 0.2).to_bits()), "\"x\"");
            let payload = URL_SAFE_NO_PAD.encode(text);
            let sum = checksum(&payload);
            format!("{payload}.{sum}")
        };
        let mut flipped = payload.to_string().into_bytes();
        flipped[3] = if flipped[3] == b'A' { b'B' } else { b'A' };
        let flipped = format!("{}.{sum}", String::from_utf8(flipped).unwrap());
        let cases: Vec<(String, Order, GuestFilter, &str)> = vec![
            (
                String::new(),
                order,
                filter.clone(),
                "not one this server made",
            ),
            (
                "abc".into(),
                order,
                filter.clone(),
                "not one this server made",
            ),
            (
                good[..good.len() - 1].into(),
                order,
                filter.clone(),
                "cut short or changed",
            ),
            (
                good[1..].into(),
                order,
                filter.clone(),
                "cut short or changed",
            ),
            (flipped, order, filter.clone(), "cut short or changed"),
            (forged, order, filter.clone(), "not one this server made"),
            (
                "x".repeat(MAX_CURSOR_CHARS + 1),
                order,
                filter.clone(),
                "longer",
            ),
            (
                good.clone(),
                Order::by(Column::Name),
                filter.clone(),
                "sort=waste and dir=desc",
            ),
            (
                good.clone(),
                Order {
                    column: Column::Waste,
                    descending: false,
                },
                filter.clone(),
                "sort=waste and dir=desc",
            ),
            (
                good.clone(),
                order,
                GuestFilter {
                    mode: "periodic".into(),
                    ..Default::default()
                },
                "other filters",
            ),
        ];
        for (cursor, order, filter, says) in cases {
            let message = decode(&cursor, order, &filter).unwrap_err().to_string();
            assert!(message.contains(says), "{cursor}: {message}");
        }
    }
}
