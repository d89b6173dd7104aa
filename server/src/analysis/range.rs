//! The time ranges the history charts and `GET /api/v1/fleet/history` cover, and the step
//! each is drawn at: whole multiples of the five-minute analysis window and the hour, which
//! stored rollups (and the fleet's five-minute points) add up to exactly.

/// The time ranges a chart covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Range {
    Hour,
    Day,
    Week,
    Month,
}

impl Range {
    pub const ALL: [Range; 4] = [Range::Hour, Range::Day, Range::Week, Range::Month];

    pub fn key(self) -> &'static str {
        match self {
            Range::Hour => "1h",
            Range::Day => "24h",
            Range::Week => "7d",
            Range::Month => "30d",
        }
    }

    pub fn parse(key: &str) -> Option<Range> {
        Range::ALL.into_iter().find(|r| r.key() == key)
    }

    pub fn length_ms(self) -> i64 {
        const HOUR_MS: i64 = 3_600_000;
        match self {
            Range::Hour => HOUR_MS,
            Range::Day => 24 * HOUR_MS,
            Range::Week => 7 * 24 * HOUR_MS,
            Range::Month => 30 * 24 * HOUR_MS,
        }
    }

    /// Points per chart: one per 30 s over an hour (raw samples), then whole multiples of the
    /// five-minute analysis window and the hour, which stored rollups add up to exactly: 15 min
    /// over a day, an hour over a week, 6 h over a month.
    pub fn bucket_ms(self) -> i64 {
        const MINUTE_MS: i64 = 60_000;
        match self {
            Range::Hour => MINUTE_MS / 2,
            Range::Day => 15 * MINUTE_MS,
            Range::Week => 60 * MINUTE_MS,
            Range::Month => 6 * 60 * MINUTE_MS,
        }
    }
}
