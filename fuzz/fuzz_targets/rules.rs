//! The one rule table: every write path accepts and refuses the same rows.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    ctxbudget::transcript::fuzz_rules(data);
});
