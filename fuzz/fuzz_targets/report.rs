//! Any bytes as a report body: parsing and validation must refuse or accept, never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tickscope_agent::wire::Report;

fuzz_target!(|data: &[u8]| {
    if let Ok(report) = serde_json::from_slice::<Report>(data) {
        // A fixed clock, so that a crash reproduces.
        let _ = tickscope_server::ingest::validate(report, 1_767_225_600_000);
    }
});
