//! The agent's on-disk spool: a report the server did not take (unreachable, slow, 5xx, 408,
//! 429) waits here, and so does every report made while others wait, until the server has them;
//! an outage or a restart of the agent loses nothing the spool's bounds allow it to keep.
//!
//! Layout of the spool directory:
//! - `state.json`: the run id and the sequence number the next run starts from (so a restarted
//!   agent never reuses a number, and the server's (agent, run, seq) key never repeats), and how
//!   many reports were dropped to keep within the bounds. Numbers are reserved a block at a time,
//!   so the file is written once per [`RESERVED_SEQS`] reports, not once per report: a restart
//!   skips the rest of the block, which the server does not mind;
//! - `pending/<seq>.json`: reports not yet acknowledged, sent oldest first;
//! - `rejected/<seq>.json`: reports the server refused for what they are (a 4xx other than 408
//!   and 429), kept for a person to look at and never sent again.
//!
//! Every file is written to a temporary name, synced, renamed into place, and the directory is
//! synced, so a crash leaves either the old file or the new one, never half of one.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

/// Sequence numbers reserved per write of the state file.
pub const RESERVED_SEQS: u64 = 100;

/// What the spool keeps between runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpoolState {
    pub run_id: String,
    /// No number at or above this was handed out: the next run starts here.
    pub next_seq: u64,
    /// Reports deleted unsent to stay within the bounds, since the spool was created.
    pub dropped: u64,
}

/// How much the spool may hold.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    pub max_bytes: u64,
    pub max_age: Duration,
}

impl Default for Bounds {
    /// A day of reports, or 64 MiB: a host of 100 VMs writes about 30 KB per report, 260 MB a
    /// day at 10 s, so the bytes bound is the one that bites there.
    fn default() -> Self {
        Bounds {
            max_bytes: 64 * 1024 * 1024,
            max_age: Duration::from_secs(24 * 3600),
        }
    }
}

pub struct Spool {
    dir: PathBuf,
    bounds: Bounds,
    state: SpoolState,
    /// The next number to hand out; below `state.next_seq`, which is saved.
    next_seq: u64,
}

/// A report waiting in the spool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    pub seq: u64,
    pub path: PathBuf,
}

fn io_context(what: &str, path: &Path, e: std::io::Error) -> std::io::Error {
    std::io::Error::new(e.kind(), format!("{what} {}: {e}", path.display()))
}

/// Writes `bytes` to `path` so that a crash leaves the old file or the new one whole.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let temp = dir.join(format!(
        ".{}.tmp",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("spool")
    ));
    {
        let mut file = File::create(&temp).map_err(|e| io_context("cannot create", &temp, e))?;
        file.write_all(bytes)
            .map_err(|e| io_context("cannot write", &temp, e))?;
        file.sync_all()
            .map_err(|e| io_context("cannot sync", &temp, e))?;
    }
    fs::rename(&temp, path).map_err(|e| io_context("cannot rename into", path, e))?;
    sync_dir(dir)
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    OpenOptions::new()
        .read(true)
        .open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io_context("cannot sync the directory", dir, e))
}

impl Spool {
    /// Opens (creating if needed) the spool in `dir`. `new_run_id` names the run when the spool
    /// is new: an existing spool keeps its run id and numbering.
    pub fn open(dir: &Path, bounds: Bounds, new_run_id: String) -> std::io::Result<Spool> {
        for sub in ["pending", "rejected"] {
            let path = dir.join(sub);
            fs::create_dir_all(&path).map_err(|e| io_context("cannot create", &path, e))?;
        }
        let state_path = dir.join("state.json");
        let state = match fs::read(&state_path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("{} is not a spool state: {e}", state_path.display()),
                )
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => SpoolState {
                run_id: new_run_id,
                next_seq: 0,
                dropped: 0,
            },
            Err(e) => return Err(io_context("cannot read", &state_path, e)),
        };
        let next_seq = state.next_seq;
        let mut spool = Spool {
            dir: dir.to_path_buf(),
            bounds,
            state,
            next_seq,
        };
        // A report spooled after the state was last saved must not have its number reused.
        for sub in ["pending", "rejected"] {
            if let Some(last) = spool.listed(sub)?.last() {
                spool.next_seq = spool.next_seq.max(last.seq + 1);
            }
        }
        spool.state.next_seq = spool.next_seq;
        spool.save_state()?;
        Ok(spool)
    }

    pub fn state(&self) -> &SpoolState {
        &self.state
    }

    /// Takes the next sequence number; a new block is reserved (and saved) before the first
    /// number of it is used.
    pub fn next_seq(&mut self) -> std::io::Result<u64> {
        if self.next_seq >= self.state.next_seq {
            self.state.next_seq = self.next_seq + RESERVED_SEQS;
            self.save_state()?;
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        Ok(seq)
    }

    fn save_state(&self) -> std::io::Result<()> {
        let bytes = serde_json::to_vec(&self.state).expect("the spool state serialises");
        write_atomically(&self.dir.join("state.json"), &bytes)
    }

    fn pending_path(&self, seq: u64) -> PathBuf {
        self.dir.join("pending").join(format!("{seq:020}.json"))
    }

    /// Stores a report's JSON under its sequence number, then keeps the spool within its bounds.
    pub fn push(&mut self, seq: u64, json: &[u8]) -> std::io::Result<()> {
        write_atomically(&self.pending_path(seq), json)?;
        self.enforce_bounds(SystemTime::now())
    }

    /// The reports waiting, oldest first.
    pub fn pending(&self) -> std::io::Result<Vec<Pending>> {
        self.listed("pending")
    }

    /// Whether no report waits (one directory read, nothing else).
    pub fn is_empty(&self) -> std::io::Result<bool> {
        Ok(self.listed("pending")?.is_empty())
    }

    /// Keeps a report the server refused for what it is, for a person to look at.
    pub fn reject_unspooled(&self, seq: u64, json: &[u8]) -> std::io::Result<PathBuf> {
        let path = self.dir.join("rejected").join(format!("{seq:020}.json"));
        write_atomically(&path, json)?;
        Ok(path)
    }

    fn listed(&self, sub: &str) -> std::io::Result<Vec<Pending>> {
        let dir = self.dir.join(sub);
        let mut pending: Vec<Pending> = fs::read_dir(&dir)
            .map_err(|e| io_context("cannot list", &dir, e))?
            .filter_map(|entry| {
                let path = entry.ok()?.path();
                let seq = path
                    .file_name()?
                    .to_str()?
                    .strip_suffix(".json")?
                    .parse()
                    .ok()?;
                Some(Pending { seq, path })
            })
            .collect();
        pending.sort_by_key(|p| p.seq);
        Ok(pending)
    }

    /// The server has the report: it leaves the spool.
    pub fn acknowledged(&self, pending: &Pending) -> std::io::Result<()> {
        match fs::remove_file(&pending.path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_context("cannot delete", &pending.path, e)),
        }
    }

    /// The server refused the report for what it is: it is moved aside, never sent again.
    pub fn rejected(&self, pending: &Pending) -> std::io::Result<PathBuf> {
        let to = self
            .dir
            .join("rejected")
            .join(pending.path.file_name().unwrap_or_default());
        fs::rename(&pending.path, &to).map_err(|e| io_context("cannot move aside", &to, e))?;
        sync_dir(&self.dir.join("rejected"))?;
        Ok(to)
    }

    /// Deletes the oldest reports until the spool is within its bounds, counting each.
    fn enforce_bounds(&mut self, now: SystemTime) -> std::io::Result<()> {
        let mut sized = Vec::new();
        for p in self.pending()? {
            let meta = fs::metadata(&p.path).map_err(|e| io_context("cannot stat", &p.path, e))?;
            let age = meta
                .modified()
                .ok()
                .and_then(|m| now.duration_since(m).ok())
                .unwrap_or_default();
            sized.push((p, meta.len(), age));
        }
        let mut total: u64 = sized.iter().map(|(_, len, _)| len).sum();
        let mut dropped = 0;
        // Never the newest: the report just written is the one most worth sending.
        let keep_newest = sized.len().saturating_sub(1);
        for (p, len, age) in sized.iter().take(keep_newest) {
            if total <= self.bounds.max_bytes && *age <= self.bounds.max_age {
                break;
            }
            self.acknowledged(p)?;
            total -= len;
            dropped += 1;
        }
        if dropped > 0 {
            self.state.dropped += dropped;
            self.save_state()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bounds(max_bytes: u64) -> Bounds {
        Bounds {
            max_bytes,
            max_age: Duration::from_secs(3600),
        }
    }

    #[test]
    fn a_reopened_spool_keeps_its_run_numbering_and_reports() {
        let dir = tempfile::tempdir().unwrap();
        let mut spool = Spool::open(dir.path(), Bounds::default(), "run-a".into()).unwrap();
        for _ in 0..3 {
            let seq = spool.next_seq().unwrap();
            spool.push(seq, b"{}").unwrap();
        }
        let first = spool.pending().unwrap()[0].clone();
        spool.acknowledged(&first).unwrap();
        drop(spool);
        let mut again = Spool::open(dir.path(), Bounds::default(), "run-b".into()).unwrap();
        assert_eq!(again.state().run_id, "run-a");
        // The rest of the reserved block is skipped: no number is ever handed out twice.
        assert_eq!(again.next_seq().unwrap(), RESERVED_SEQS);
        let seqs: Vec<u64> = again.pending().unwrap().iter().map(|p| p.seq).collect();
        assert_eq!(seqs, [1, 2]);
    }

    #[test]
    fn a_report_written_after_the_state_was_saved_keeps_its_number() {
        let dir = tempfile::tempdir().unwrap();
        let mut spool = Spool::open(dir.path(), Bounds::default(), "run".into()).unwrap();
        let seq = spool.next_seq().unwrap();
        spool.push(seq, b"{}").unwrap();
        // As if the agent died after writing report 7 but before saving the state.
        spool.push(7, b"{}").unwrap();
        drop(spool);
        let mut again = Spool::open(dir.path(), Bounds::default(), "other".into()).unwrap();
        assert_eq!(again.next_seq().unwrap(), RESERVED_SEQS);
        // Numbers beyond the reserved block found in the spool are not reused either.
        again.push(RESERVED_SEQS + 500, b"{}").unwrap();
        drop(again);
        let mut third = Spool::open(dir.path(), Bounds::default(), "x".into()).unwrap();
        assert_eq!(third.next_seq().unwrap(), RESERVED_SEQS + 501);
    }

    #[test]
    fn the_state_is_written_once_per_block_of_numbers() {
        let dir = tempfile::tempdir().unwrap();
        let mut spool = Spool::open(dir.path(), Bounds::default(), "run".into()).unwrap();
        let state = dir.path().join("state.json");
        spool.next_seq().unwrap();
        let written = fs::metadata(&state).unwrap().modified().unwrap();
        std::thread::sleep(Duration::from_millis(20));
        for _ in 1..RESERVED_SEQS {
            spool.next_seq().unwrap();
        }
        assert_eq!(fs::metadata(&state).unwrap().modified().unwrap(), written);
        spool.next_seq().unwrap();
        assert_ne!(fs::metadata(&state).unwrap().modified().unwrap(), written);
    }

    #[test]
    fn the_oldest_reports_go_first_when_the_spool_is_full_and_are_counted() {
        let dir = tempfile::tempdir().unwrap();
        // Room for three reports of 100 bytes.
        let mut spool = Spool::open(dir.path(), bounds(300), "run".into()).unwrap();
        for _ in 0..5 {
            let seq = spool.next_seq().unwrap();
            spool.push(seq, &[b' '; 100]).unwrap();
        }
        let seqs: Vec<u64> = spool.pending().unwrap().iter().map(|p| p.seq).collect();
        assert_eq!(seqs, [2, 3, 4]);
        assert_eq!(spool.state().dropped, 2);
        drop(spool);
        let again = Spool::open(dir.path(), bounds(300), "x".into()).unwrap();
        assert_eq!(again.state().dropped, 2, "the count survives a restart");
    }

    #[test]
    fn a_refused_report_is_moved_aside() {
        let dir = tempfile::tempdir().unwrap();
        let mut spool = Spool::open(dir.path(), Bounds::default(), "run".into()).unwrap();
        let seq = spool.next_seq().unwrap();
        spool.push(seq, b"{\"bad\":1}").unwrap();
        let p = spool.pending().unwrap().remove(0);
        let aside = spool.rejected(&p).unwrap();
        assert!(spool.pending().unwrap().is_empty());
        assert_eq!(fs::read(aside).unwrap(), b"{\"bad\":1}");
    }
}
