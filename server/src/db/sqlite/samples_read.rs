//! Many guests' raw samples in SQLite, for [`Store::histories_between`]: one row per guest, its
//! samples packed into one text. SQLite hands sqlx each row through a channel, which costs more
//! than the row itself when a guest has 17,000 of them (two days at one every 10 s).

use super::dialect::{Store, id_list, in_id_list};
use crate::db::error::{StoreError, StoreResult};
use crate::db::guests::{IntervalRow, SampleParts};
use crate::domain::GuestId;

/// One sample as the packed query writes it: received ms, length ms, vCPUs, host CPU s,
/// wake-ups, whether counted on vCPU threads (1 or 0), the vCPU, I/O-thread and vhost parts of
/// its CPU and its halt polling (each empty when not stored).
/// A nullable REAL as `%s` writes it: nothing for NULL, the value in full otherwise; `None` when
/// it does not read as a number.
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
    Some(IntervalRow {
        guest_id,
        received_ms: next()?.parse().ok()?,
        length_ms: next()?.parse().ok()?,
        vcpus: next()?.parse().ok()?,
        host_cpu_s: next()?.parse().ok()?,
        vcpu_wakeups: next()?.parse().ok()?,
        from_vcpu_threads: next()? == "1",
        parts: SampleParts::from_columns(part(next()?)?, part(next()?)?, part(next()?)?),
        halt_poll_s: part(next()?)?.map(|s| s as f32),
    })
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
        // `%.17g` writes a double so that it reads back exactly.
        let sql = format!(
            "SELECT guest_id, group_concat(printf('%d,%.17g,%d,%.17g,%d,%d,%s,%s,%s,%s',
                        received_ms, length_ms, vcpus, host_cpu_s, vcpu_wakeups,
                        wakeups_source = 'vcpu_threads', vcpu_cpu_s, iothread_cpu_s,
                        vhost_cpu_s, halt_poll_s), ';' ORDER BY received_ms, id)
             FROM samples
             WHERE {} AND received_ms >= $2 AND received_ms < $3
             GROUP BY guest_id ORDER BY guest_id",
            in_id_list("guest_id", 1)
        );
        let packed: Vec<(GuestId, String)> = sqlx::query_as(&sql)
            .bind(id_list(guest_ids.iter().map(|id| id.0)))
            .bind(from_ms)
            .bind(to_ms)
            .fetch_all(&self.pool)
            .await?;
        let mut samples = Vec::new();
        for (guest_id, text) in packed {
            for sample in text.split(';') {
                samples.push(unpack_sample(guest_id, sample).ok_or_else(|| {
                    StoreError::Corrupt(format!("unreadable packed sample {sample:?}"))
                })?);
            }
        }
        Ok(samples)
    }
}
