//! The cursor decoder: arbitrary cursor text and MAC-verified bodies.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    ctxbudget::scan::fuzz_cursor(data);
});
