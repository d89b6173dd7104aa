//! Many guests' raw samples in SQLite, packed: one row per guest, its samples in one text.
//! SQLite hands sqlx each row through a channel to the async side, and that costs several times
//! what SQLite takes to read the row: a start at 100,000 guests read their windows' three
//! million samples in 26-33 s as rows, of which SQLite's own reading was about 2 s
//! (docs/performance.md, issue 28's sixteenth part). Read by [`Store::histories_between`]
//! (`samples_of_guests`) and by [`Store::window_intervals`] (`samples_in_window`).

use futures_util::{Stream, TryStreamExt};

use super::dialect::{DB, Store, id_list, in_id_list, recent_rows_of_each_guest};
use super::guests::{ScopeBind, bind_scope};
use crate::db::error::{StoreError, StoreResult};
use crate::db::guests::{IntervalRow, SampleParts};
use crate::domain::GuestId;

/// The text of one sample of `samples {alias}`: received ms, length ms, vCPUs, host CPU s,
/// wake-ups, whether counted on vCPU threads (1 or 0), the vCPU, I/O-thread and vhost parts of
/// its CPU and its halt polling (each empty when not stored). Every REAL is written with
/// `%!.20e`, 21 digits, which read back as the same double (what SQLite's `quote()` falls back
/// to); without `!` SQLite's printf stops at 16 digits, and its own text of a REAL (`%s`,
/// `||`) has 15, so neither would.
fn packed_sample(alias: &str) -> String {
    let exact_or_empty = |column: &str| {
        format!("iif({alias}.{column} IS NULL, '', printf('%!.20e', {alias}.{column}))")
    };
    format!(
        "printf('%d,%!.20e,%d,%!.20e,%d,%d,%s,%s,%s,%s',
                {alias}.received_ms, {alias}.length_ms, {alias}.vcpus, {alias}.host_cpu_s,
                {alias}.vcpu_wakeups, {alias}.wakeups_source = 'vcpu_threads', {}, {}, {}, {})",
        exact_or_empty("vcpu_cpu_s"),
        exact_or_empty("iothread_cpu_s"),
        exact_or_empty("vhost_cpu_s"),
        exact_or_empty("halt_poll_s"),
    )
}

/// The samples of `samples {alias}` of each group, packed into one text, oldest first (equal
/// times by id).
fn packed_samples(alias: &str) -> String {
    format!(
        "group_concat({}, ';' ORDER BY {alias}.received_ms, {alias}.id)",
        packed_sample(alias)
    )
}

/// The window of each guest that meets `condition` and whose id is even (`parity` 0) or odd
/// (1), packed: `$1` is the window's length and the parameters of the condition on `g` start at
/// `$2`, as in PostgreSQL's `window_sql`; each guest's window is looked up in
/// `samples_guest_received` as there.
fn half_window_sql(condition: &str, parity: u8) -> String {
    format!(
        "SELECT g.id, {}
         FROM guests g {}
         WHERE ({condition}) AND g.id % 2 = {parity}
         GROUP BY g.id",
        packed_samples("s"),
        recent_rows_of_each_guest("samples", "s")
    )
}

/// The statement of the window's first half, whose plan the tests check (the other half's
/// differs only in its parity).
#[cfg(feature = "test-support")]
pub(super) fn window_sql(condition: &str) -> String {
    half_window_sql(condition, 0)
}

/// A nullable REAL as [`packed_sample`] writes it: nothing for NULL, the value otherwise;
/// `None` when it does not read as a number.
fn part(text: &str) -> Option<Option<f64>> {
    if text.is_empty() {
        Some(None)
    } else {
        text.parse().ok().map(Some)
    }
}

fn unpack_sample(guest_id: GuestId, text: &str) -> Option<IntervalRow> {
    let mut fields = text.split(',');
    let mut next = || fields.next();
    let sample = IntervalRow {
        guest_id,
        received_ms: next()?.parse().ok()?,
        length_ms: next()?.parse().ok()?,
        vcpus: next()?.parse().ok()?,
        host_cpu_s: next()?.parse().ok()?,
        vcpu_wakeups: next()?.parse().ok()?,
        from_vcpu_threads: next()? == "1",
        parts: SampleParts::from_columns(part(next()?)?, part(next()?)?, part(next()?)?),
        halt_poll_s: part(next()?)?.map(|s| s as f32),
    };
    next().is_none().then_some(sample)
}

/// The samples of each guest's packed text, in the order read, each text unpacked as it
/// arrives: the texts of a start's windows are several times the samples they hold (a double is
/// 26 characters), and were they all held at once the kernel would zero pages for them.
async fn unpack(
    packed: impl Stream<Item = Result<(GuestId, String), sqlx::Error>>,
) -> StoreResult<Vec<IntervalRow>> {
    let mut samples = Vec::new();
    let mut packed = std::pin::pin!(packed);
    while let Some((guest_id, text)) = packed.try_next().await? {
        for sample in text.split(';') {
            samples.push(unpack_sample(guest_id, sample).ok_or_else(|| {
                StoreError::Corrupt(format!("unreadable packed sample {sample:?}"))
            })?);
        }
    }
    Ok(samples)
}

impl Store {
    /// The samples of `guest_ids` received in [from_ms, to_ms), by guest, oldest first (equal
    /// times by id).
    pub(super) async fn samples_of_guests(
        &self,
        guest_ids: &[GuestId],
        from_ms: i64,
        to_ms: i64,
    ) -> StoreResult<Vec<IntervalRow>> {
        let sql = format!(
            "SELECT s.guest_id, {}
             FROM samples s
             WHERE {} AND s.received_ms >= $2 AND s.received_ms < $3
             GROUP BY s.guest_id ORDER BY s.guest_id",
            packed_samples("s"),
            in_id_list("s.guest_id", 1)
        );
        let packed = sqlx::query_as(&sql)
            .bind(id_list(guest_ids.iter().map(|id| id.0)))
            .bind(from_ms)
            .bind(to_ms)
            .fetch(&self.pool);
        unpack(packed).await
    }

    /// The samples of the window of each guest that meets `condition` (see
    /// [`half_window_sql`]), by guest, oldest first: the guests of even and of odd ids read at
    /// once, each on a connection of its own, so that SQLite reads on two threads (at a start,
    /// SQLite's thread reading and packing the fleet's windows was the longest part of it).
    pub(super) async fn samples_in_window(
        &self,
        condition: &str,
        binds: Vec<ScopeBind>,
        window_ms: i64,
    ) -> StoreResult<Vec<IntervalRow>> {
        let read_half = |parity: u8| {
            let sql = half_window_sql(condition, parity);
            let binds = binds.clone();
            async move {
                let query = sqlx::query_as::<DB, (GuestId, String)>(&sql).bind(window_ms);
                unpack(bind_scope(query, binds).fetch(&self.pool)).await
            }
        };
        let (mut samples, odd) = tokio::try_join!(read_half(0), read_half(1))?;
        samples.extend(odd);
        Ok(samples)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_packed_sample_reads_back_whole_or_not_at_all() {
        let guest = GuestId(7);
        let read = unpack_sample(
            guest,
            "1000,10000.5,2,0.30000000000000004,42,1,0.25,,1e-300,0.5",
        )
        .expect("a whole sample reads");
        assert_eq!(read.received_ms, 1000);
        assert_eq!(read.length_ms, 10000.5);
        assert_eq!(read.vcpus, 2);
        assert_eq!(read.host_cpu_s, 0.1 + 0.2);
        assert_eq!(read.vcpu_wakeups, 42);
        assert!(read.from_vcpu_threads);
        assert_eq!(read.halt_poll_s, Some(0.5));
        for broken in [
            "",
            "1000,10000.5,2,0.3,42,1,0.25,,1e-300",
            "1000,10000.5,2,0.3,42,1,0.25,,1e-300,0.5,9",
            "1000,ten,2,0.3,42,1,,,,",
            "1000,10000.5,2,0.3,42,1,x,,,",
        ] {
            assert!(unpack_sample(guest, broken).is_none(), "{broken:?}");
        }
    }
}
