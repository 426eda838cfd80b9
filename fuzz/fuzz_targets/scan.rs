//! The row/frame parser: arbitrary chat, archive and receipt bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Two little-endian u16 lengths, then chat, archive and receipt bytes.
    let (chat_len, archive_len, rest) = match data {
        [a0, a1, b0, b1, rest @ ..] => (
            usize::from(u16::from_le_bytes([*a0, *a1])),
            usize::from(u16::from_le_bytes([*b0, *b1])),
            rest,
        ),
        _ => (0, 0, data),
    };
    let (chat, tail) = rest.split_at(chat_len.min(rest.len()));
    let (archive, receipt) = tail.split_at(archive_len.min(tail.len()));
    ctxbudget::transcript::fuzz_scan(chat, archive, receipt);
});
