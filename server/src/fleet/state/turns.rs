//! The writers' copy of what readers see, and the copy it takes turns with.
//!
//! Readers hold a published copy ([`Published`]) as long as they like, so the writers change
//! another one and put it in place whole. A copy made by cloning the published one shares all
//! its nodes, and each node an edit touches is copied first (and the replaced copy's nodes are
//! freed when its last reader lets go). A batch of reports at 100,000 guests touches most
//! leaves of the kept orders, so each batch copied, and then freed, nearly all of them: most of
//! a report's apply (perf, docs/performance.md).
//!
//! So the copy that was published before the current one is kept as the spare, with the edits
//! that made the current one from it. The next draft is that spare brought up to date with
//! those edits, changed in place: after a batch or two the two copies share no node the
//! batches touch, so nothing is copied. Only when a reader still holds the spare (a long
//! `/metrics` scrape), or when the spare is too far behind to be worth it, is the current copy
//! cloned, as before. Two copies of the orders and the index are then held (the analyses
//! themselves are shared), against copying and freeing them at each batch. Bringing the spare
//! up to date costs what the last batch's edits cost, paid by whichever writer begins the next
//! draft.

use std::sync::Arc;

use crate::fleet::published::{Edit, Published};

/// Whether a spare `behind` by these edits is worth bringing up to date, in a fleet of `held`
/// guests: only when they name at most a quarter as many guests (and a few always). A spare
/// further behind, such as the empty copy a start's load of the whole fleet in one draft
/// leaves, would cost what the edits did (4 s at 100,000 guests), where a clone costs only the
/// nodes the next draft touches.
fn worth_replaying(behind: &[Edit], held: usize) -> bool {
    behind.iter().map(Edit::guests).sum::<usize>() <= held / 4 + 64
}

/// A copy being changed for readers to see next.
pub(super) struct Draft {
    copy: Published,
    /// The copy readers saw when the draft began; `copy` is it with `edits` made.
    base: Arc<Published>,
    edits: Vec<Edit>,
    /// Whether the draft is the spare brought up to date (not a clone of `base`).
    reused: bool,
    /// An edit did not finish (it panicked): the draft is no longer `base` with `edits` made.
    spoilt: bool,
}

/// The copy published before the current one, and the edits that made the current one of it.
pub(super) struct Spare {
    copy: Arc<Published>,
    behind: Vec<Edit>,
}

impl Draft {
    /// A draft of `current` (what readers see now): `spare` brought up to date when no reader
    /// holds it any more, else a clone of `current`. `spare` must have been left by the draft
    /// that made `current`.
    pub(super) fn begin(current: Arc<Published>, spare: Option<Spare>) -> Draft {
        let spare = spare.filter(|spare| worth_replaying(&spare.behind, current.held()));
        let reused = spare.and_then(|spare| {
            let mut copy = Arc::try_unwrap(spare.copy).ok()?;
            for edit in &spare.behind {
                copy.edit(edit);
            }
            Some(copy)
        });
        let (copy, reused) = match reused {
            Some(copy) => (copy, true),
            None => (Published::clone(&current), false),
        };
        Draft {
            copy,
            base: current,
            edits: Vec::new(),
            reused,
            spoilt: false,
        }
    }

    /// Makes an edit in the draft.
    pub(super) fn apply(&mut self, edit: Edit) {
        self.spoilt = true;
        self.copy.edit(&edit);
        self.edits.push(edit);
        self.spoilt = false;
    }

    /// What readers are to see now, and the spare it leaves (the copy the draft began from):
    /// none when an edit panicked half made (a writer other than the draft's holder), since
    /// making the edits again would not give the same copy.
    pub(super) fn finish(self) -> (Published, Option<Spare>) {
        let spare = (!self.spoilt).then_some(Spare {
            copy: self.base,
            behind: self.edits,
        });
        (self.copy, spare)
    }

    /// Whether the draft is the spare brought up to date rather than a clone.
    pub(super) fn reused(&self) -> bool {
        self.reused
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use proptest::prelude::*;

    use super::*;
    use crate::analysis::change::Change;
    use crate::analysis::test_window;
    use crate::domain::{GuestId, HostId};
    use crate::fleet::analysed::{ACTIVE_WITHIN_MS, AnalysedGuest};
    use crate::fleet::listing::{Facet, GuestFilter, Order};
    use crate::fleet::orderings::KEPT;

    const NOW_MS: i64 = 10_000_000;

    /// Guest `id` on one of three hosts, with figures by `figure`; figure 3 makes it silent
    /// past the active limit (held, not active).
    fn guest(id: i64, figure: u8) -> Arc<AnalysedGuest> {
        let window = test_window(
            1,
            0.3 + f64::from(figure),
            30.0 + 100.0 * f64::from(figure),
            None,
        );
        let silent = figure == 3;
        Arc::new(AnalysedGuest {
            name: format!("g{}", id % 3),
            host_id: HostId(id % 3),
            host: format!("hv-{}", id % 3),
            last_seen_ms: if silent {
                NOW_MS - ACTIVE_WITHIN_MS - 1
            } else {
                NOW_MS
            },
            ..AnalysedGuest::example(id, &window)
        })
    }

    fn edit() -> impl Strategy<Value = Edit> {
        let ids = proptest::collection::vec(0..12_i64, 0..5);
        prop_oneof![
            (
                ids.clone(),
                proptest::collection::vec((0..12_i64, 0..4_u8), 0..6)
            )
                .prop_map(|(previous, analysed)| Edit::Host {
                    previous: previous.into_iter().map(GuestId).collect(),
                    analysed: analysed.into_iter().map(|(id, f)| guest(id, f)).collect(),
                }),
            (ids.clone(), ids.clone()).prop_map(|(guests, changes)| Edit::Forget {
                guests: guests.into_iter().map(GuestId).collect(),
                changes: changes.into_iter().map(GuestId).collect(),
            }),
            (
                ids.clone(),
                proptest::collection::vec((0..12_i64, 0.0..5.0_f64), 0..4)
            )
                .prop_map(|(previous, measured)| Edit::Changes {
                    previous: previous.into_iter().map(GuestId).collect(),
                    measured: measured
                        .into_iter()
                        .map(|(id, saved)| (GuestId(id), Change::example(id * 100, saved)))
                        .collect::<HashMap<_, _>>(),
                }),
        ]
    }

    /// What a reader sees of a copy: every kept order's guests, the counts and the changes.
    fn seen(p: &Published) -> String {
        let filter = GuestFilter::default();
        let mut seen = String::new();
        for column in KEPT {
            for descending in [false, true] {
                let order = Order { column, descending };
                let ids: Vec<i64> = p
                    .list(order, &filter, None, NOW_MS)
                    .guests
                    .map(|g| g.id.0)
                    .collect();
                seen += &format!("{column:?} {descending}: {ids:?}\n");
            }
        }
        let index = p.index(NOW_MS);
        let model = Default::default();
        let totals = index.totals(&model);
        let hosts: Vec<(HostId, u64)> = index
            .host_ids_by_waste()
            .map(|(id, waste)| (id, waste.to_bits()))
            .collect();
        seen += &format!("hosts {hosts:?}\n");
        for host in 0..3 {
            seen += &format!("{:?}\n", index.host(HostId(host), &model));
        }
        for facet in Facet::ALL {
            let values: Vec<(&str, usize, u64)> = index
                .values_with_waste(facet)
                .map(|(value, guests, waste)| (value, guests, waste.to_bits()))
                .collect();
            seen += &format!("{facet:?} {values:?}\n");
        }
        let marks: Vec<(i64, i64)> = p
            .changes_between(0, 600, NOW_MS)
            .map(|(g, c)| (g.id.0, c.at_ms))
            .collect();
        seen += &format!("marks {marks:?}\n");
        let mut changes: Vec<(GuestId, u64)> = p
            .changes(NOW_MS)
            .into_iter()
            .map(|(g, c)| (g, c.saved_cpu_pct.to_bits()))
            .collect();
        changes.sort();
        let realised = p.realised(NOW_MS);
        seen += &format!(
            "{} {} {} {} {} {}\n{changes:?}\n",
            p.held(),
            totals.guests,
            totals.ticking,
            totals.wasted_cores.to_bits(),
            realised.guests,
            realised.saved_cpu_pct.to_bits(),
        );
        seen
    }

    #[test]
    fn only_a_spare_not_far_behind_is_brought_up_to_date() {
        let host = |guests: i64| Edit::Host {
            previous: (0..guests).map(GuestId).collect(),
            analysed: Vec::new(),
        };
        // (guests named by each edit behind, guests held, worth it)
        let cases: [(&[i64], usize, bool); 7] = [
            (&[], 0, true),
            (&[64], 0, true),
            (&[65], 0, false),
            (&[20, 20, 24], 0, true),
            (&[100_000], 100_000, false),
            (&[700; 35], 100_000, true),
            (&[25_064], 100_000, true),
        ];
        for (behind, held, worth) in cases {
            let behind: Vec<Edit> = behind.iter().map(|&g| host(g)).collect();
            assert_eq!(worth_replaying(&behind, held), worth, "{behind:?} {held}");
        }
        // A whole fleet put in one draft is not made again on the empty spare it leaves.
        let mut draft = Draft::begin(Arc::new(Published::default()), None);
        for id in 0..100 {
            draft.apply(Edit::Host {
                previous: Vec::new(),
                analysed: vec![guest(id, 1)],
            });
        }
        let (loaded, spare) = draft.finish();
        assert!(!Draft::begin(Arc::new(loaded), spare).reused());
    }

    proptest! {
        /// Whatever the edits and whether readers hold the spare, each published copy is what
        /// making every edit in order on one copy makes, to the bit.
        #[test]
        fn a_spare_brought_up_to_date_is_the_copy_made_afresh(
            batches in proptest::collection::vec(
                (proptest::collection::vec(edit(), 0..5), any::<bool>()), 1..12)
        ) {
            let mut current = Arc::new(Published::default());
            let mut spare: Option<Spare> = None;
            let mut afresh = Published::default();
            for (edits, reader_holds) in batches {
                // A reader still reading the spare when the draft begins.
                let reader: Option<Arc<Published>> =
                    spare.as_ref().filter(|_| reader_holds).map(|s| s.copy.clone());
                let had_spare = spare.is_some();
                let mut draft = Draft::begin(current.clone(), spare.take());
                prop_assert_eq!(draft.reused(), had_spare && reader.is_none());
                drop(reader);
                for edit in edits {
                    afresh.edit(&edit);
                    draft.apply(edit);
                }
                let (next, left) = draft.finish();
                current = Arc::new(next);
                spare = left;
                prop_assert_eq!(seen(&current), seen(&afresh));
            }
        }
    }
}
