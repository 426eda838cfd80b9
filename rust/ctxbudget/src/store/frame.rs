//! Batch framing and the scanner that tells acknowledged data from a torn tail.
//!
//! A batch on disk is a header line, its row lines, and a commit line:
//!
//! ```text
//! {"batch":{"epoch":7,"first":12,"last":14}}
//! {"seq":12,...}
//! {"seq":13,...}
//! {"seq":14,...}
//! {"commit":{"epoch":7,"first":12,"last":14,"len":812,"crc":3735928559}}
//! ```
//!
//! `len` and `crc` (CRC-32C) cover the header and row lines. The whole batch is one
//! `write`, so a crash leaves a prefix of it: a header with no valid commit at the end of
//! the file is a torn tail, never shown. Lines outside any batch (older or externally
//! written histories) are rows as they stand. A batch that fails to validate and is
//! followed by more data is damage: acknowledged data may be at risk, so writers refuse.

use serde::Deserialize;

// Exactly how this library begins its frame lines, so a legacy row whose first key
// happens to be `batch` or `commit` is still a row.
const HEADER_PREFIX: &[u8] = b"{\"batch\":{\"epoch\":";
const COMMIT_PREFIX: &[u8] = b"{\"commit\":{\"epoch\":";

/// The longest commit line `commit_line` writes (five numbers of at most 20 digits).
pub(crate) const COMMIT_LINE_MAX: usize = 160;

/// Header line of a batch.
pub(crate) fn header_line(epoch: u64, first: u64, last: u64) -> String {
    format!("{{\"batch\":{{\"epoch\":{epoch},\"first\":{first},\"last\":{last}}}}}\n")
}

/// Commit line closing a batch whose header and rows are `framed`.
pub(crate) fn commit_line(epoch: u64, first: u64, last: u64, framed: &[u8]) -> (String, u32) {
    let crc = crc32c::crc32c(framed);
    let line = format!(
        "{{\"commit\":{{\"epoch\":{epoch},\"first\":{first},\"last\":{last},\"len\":{},\"crc\":{crc}}}}}\n",
        framed.len()
    );
    (line, crc)
}

#[derive(Deserialize)]
struct HeaderLine {
    batch: Header,
}

#[derive(Deserialize)]
struct Header {
    first: u64,
    last: u64,
}

#[derive(Deserialize)]
struct CommitLine {
    commit: Commit,
}

#[derive(Deserialize)]
struct Commit {
    first: u64,
    last: u64,
    len: u64,
    crc: u32,
}

/// What the scanner learns of a line that is neither a batch header nor a commit line,
/// from the [`ReadLine`] it was handed.
pub struct LineRead<H> {
    /// The line's head, if the line is a row: all of it parses the way every reader
    /// parses it, so the index never counts a line that the reader rendering it would
    /// skip.
    pub head: Option<H>,
    /// The seq a line that is not a row still shows (a damaged or hostile row): never
    /// handed out again, so no two lines claim one seq.
    pub claimed_seq: Option<u64>,
    /// Not a row, but possibly a privacy floor: fail closed and treat it as one.
    pub reset_like: bool,
}

/// How the lines of a file are read. The store frames, checks and places lines but never
/// reads one: the transcript layer, which knows what rows mean, hands the scanner its
/// reader (`transcript::Rows`).
pub trait ReadLine {
    /// What an index keeps of a line that is a row.
    type Head: Clone + std::fmt::Debug;
    /// Reads one line (without its newline).
    fn read_line(line: &[u8]) -> LineRead<Self::Head>;
    /// The seq a row shows: a batch's rows must show its seqs, in order.
    fn seq(head: &Self::Head) -> u64;
}

/// One row line found by the scanner.
#[derive(Clone, Debug)]
pub struct Entry<H> {
    /// Byte offset of the line in its file.
    pub offset: u64,
    /// Length of the line without its newline.
    pub len: u32,
    /// Its head as the line reader read it, or `None` for a malformed line.
    pub head: Option<H>,
    /// Malformed but shaped like a reset boundary.
    pub reset_like: bool,
    /// Malformed, but showing this seq (see `LineRead::claimed_seq`).
    pub claimed_seq: Option<u64>,
}

/// Damage found before the end of the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Damage {
    pub offset: u64,
    pub line: u64,
    pub reason: String,
}

/// Everything a scan of one file found.
#[derive(Clone, Debug)]
pub(crate) struct Scan<H> {
    /// Committed rows (framed or legacy), in file order.
    pub entries: Vec<Entry<H>>,
    /// End of the last committed line; everything after it is a torn tail.
    pub committed_end: u64,
    /// Number of lines up to `committed_end`.
    pub lines: u64,
    /// CRC of the last commit line, if any.
    pub last_crc: Option<u32>,
    /// `[start, end)` byte range of each committed batch, for rotation cuts.
    pub batch_ranges: Vec<(u64, u64)>,
    /// Number of committed batches.
    pub batches: u64,
    /// Legacy (unframed) rows.
    pub legacy_rows: u64,
    /// Malformed lines kept as they are.
    pub malformed: u64,
    /// First damaged batch, if any.
    pub damage: Option<Damage>,
    /// Offsets of every damaged region followed by committed data: each counts as a
    /// possible privacy floor.
    pub damage_offsets: Vec<u64>,
    /// The bytes after `committed_end` are acknowledged (the receipt vouches for seqs
    /// beyond the last readable row): damage, never a torn tail to cut.
    pub tail_acked: bool,
    /// Bytes after `committed_end`.
    pub torn_bytes: u64,
}

impl<H> Default for Scan<H> {
    fn default() -> Self {
        Scan {
            entries: Vec::new(),
            committed_end: 0,
            lines: 0,
            last_crc: None,
            batch_ranges: Vec::new(),
            batches: 0,
            legacy_rows: 0,
            malformed: 0,
            damage: None,
            damage_offsets: Vec::new(),
            tail_acked: false,
            torn_bytes: 0,
        }
    }
}

struct Open<H> {
    offset: u64,
    line: u64,
    first: u64,
    last: u64,
    rows: Vec<Entry<H>>,
}

/// Scans `bytes`, which start at byte `base` (line `base_line`) of their file, reading
/// row lines with `R`.
pub(crate) fn scan<R: ReadLine>(bytes: &[u8], base: u64, base_line: u64) -> Scan<R::Head> {
    let mut out = Scan {
        committed_end: base,
        lines: base_line,
        ..Scan::default()
    };
    let mut open: Option<Open<R::Head>> = None;
    let mut pos = 0usize;
    let mut line_no = base_line;
    while pos < bytes.len() {
        let Some(nl) = memchr::memchr(b'\n', &bytes[pos..]) else {
            break; // an unterminated last line is never committed
        };
        let line = &bytes[pos..pos + nl];
        let offset = base + pos as u64;
        let next = pos + nl + 1;
        line_no += 1;
        if line.starts_with(HEADER_PREFIX) {
            if let Some(prev) = open.take() {
                note_damage(&mut out, prev.offset, prev.line, "batch has no commit line");
            }
            match serde_json::from_slice::<HeaderLine>(line) {
                Ok(h) => {
                    open = Some(Open {
                        offset,
                        line: line_no,
                        first: h.batch.first,
                        last: h.batch.last,
                        rows: Vec::new(),
                    })
                }
                Err(_) => note_damage(&mut out, offset, line_no, "unreadable batch header"),
            }
        } else if line.starts_with(COMMIT_PREFIX) {
            match open.take() {
                Some(batch) => {
                    let framed = &bytes[(batch.offset - base) as usize..pos];
                    match validate::<R>(&batch, framed, line) {
                        Ok(crc) => {
                            out.batch_ranges.push((batch.offset, base + next as u64));
                            out.malformed +=
                                batch.rows.iter().filter(|e| e.head.is_none()).count() as u64;
                            out.entries.extend(batch.rows);
                            out.batches += 1;
                            out.last_crc = Some(crc);
                            out.committed_end = base + next as u64;
                            out.lines = line_no;
                        }
                        Err(reason) => note_damage(&mut out, batch.offset, batch.line, &reason),
                    }
                }
                None => {
                    // A commit line with no batch. Only this library writes commit lines,
                    // each in one `write` after its header, so the header was destroyed
                    // (a flipped newline merges it into the line before): an acknowledged
                    // batch is unreadable. The line is kept as it is.
                    out.malformed += 1;
                    note_damage(
                        &mut out,
                        offset,
                        line_no,
                        "a commit line whose batch header is missing: the batch before it \
                         is damaged",
                    );
                    out.committed_end = base + next as u64;
                    out.lines = line_no;
                }
            }
        } else {
            let read = R::read_line(line);
            let entry = Entry {
                offset,
                len: nl as u32,
                head: read.head,
                reset_like: read.reset_like,
                claimed_seq: read.claimed_seq,
            };
            match open.as_mut() {
                Some(batch) => batch.rows.push(entry),
                None => {
                    if entry.head.is_some() {
                        out.legacy_rows += 1;
                    } else {
                        out.malformed += 1;
                    }
                    out.entries.push(entry);
                    out.committed_end = base + next as u64;
                    out.lines = line_no;
                }
            }
        }
        pos = next;
    }
    // Damage is only damage if committed data follows it; a bad last batch is torn
    // unless the receipt acknowledges it (checked by the store, which knows the receipt).
    if let Some(d) = &out.damage {
        if d.offset >= out.committed_end {
            out.damage = None;
        }
    }
    let end = out.committed_end;
    out.damage_offsets.retain(|&d| d < end);
    out.torn_bytes = base + bytes.len() as u64 - out.committed_end;
    out
}

fn note_damage<H>(out: &mut Scan<H>, offset: u64, line: u64, reason: &str) {
    out.damage_offsets.push(offset);
    if out.damage.is_none() {
        out.damage = Some(Damage {
            offset,
            line,
            reason: reason.to_owned(),
        });
    }
}

fn validate<R: ReadLine>(
    batch: &Open<R::Head>,
    framed: &[u8],
    commit: &[u8],
) -> Result<u32, String> {
    let c: CommitLine =
        serde_json::from_slice(commit).map_err(|_| "unreadable commit line".to_owned())?;
    let c = c.commit;
    if c.len != framed.len() as u64 {
        return Err(format!(
            "commit says {} bytes, batch has {}",
            c.len,
            framed.len()
        ));
    }
    let crc = crc32c::crc32c(framed);
    if crc != c.crc {
        return Err(format!(
            "CRC-32C mismatch (stored {}, computed {crc})",
            c.crc
        ));
    }
    // A line of a batch that is not a row (one an earlier version wrote nested deeper
    // than readers parse) still holds its place: the batch is whole, the line skipped.
    let seqs: Vec<u64> = batch
        .rows
        .iter()
        .filter_map(|r| r.head.as_ref().map(R::seq).or(r.claimed_seq))
        .collect();
    let expected: Vec<u64> = (c.first..=c.last).collect();
    if c.first != batch.first || c.last != batch.last || seqs != expected {
        return Err("commit sequence range does not match its rows".to_owned());
    }
    Ok(crc)
}

impl<H> Scan<H> {
    /// Everything after the last whole line or batch is acknowledged data that does not
    /// read: damage (writes refused, location named), never a torn tail to move away.
    pub(crate) fn tail_is_damage(&mut self, reason: impl Into<String>) {
        let (offset, line) = (self.committed_end, self.lines + 1);
        self.damage_offsets.push(offset);
        self.tail_acked = true;
        if self.damage.is_none() {
            self.damage = Some(Damage {
                offset,
                line,
                reason: reason.into(),
            });
        }
    }

    /// Appends the scan of the bytes that followed `self.committed_end`.
    pub(crate) fn absorb(&mut self, next: Scan<H>) {
        self.entries.extend(next.entries);
        self.committed_end = next.committed_end;
        self.lines = next.lines;
        self.last_crc = next.last_crc.or(self.last_crc);
        self.batch_ranges.extend(next.batch_ranges);
        self.batches += next.batches;
        self.legacy_rows += next.legacy_rows;
        self.malformed += next.malformed;
        self.damage = self.damage.take().or(next.damage);
        self.damage_offsets.extend(next.damage_offsets);
        self.tail_acked = next.tail_acked;
        self.torn_bytes = next.torn_bytes;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A line reader for these tests: a line is a row when it is an object with a seq.
    struct SeqLines;

    impl ReadLine for SeqLines {
        type Head = u64;

        fn read_line(line: &[u8]) -> LineRead<u64> {
            let seq = serde_json::from_slice::<serde_json::Value>(line)
                .ok()
                .and_then(|v| v.get("seq").and_then(serde_json::Value::as_u64));
            LineRead {
                head: seq,
                claimed_seq: None,
                reset_like: false,
            }
        }

        fn seq(head: &u64) -> u64 {
            *head
        }
    }

    fn scan(bytes: &[u8], base: u64, base_line: u64) -> Scan<u64> {
        super::scan::<SeqLines>(bytes, base, base_line)
    }

    fn batch(epoch: u64, first: u64, rows: &[&str]) -> Vec<u8> {
        let last = first + rows.len() as u64 - 1;
        let mut framed = header_line(epoch, first, last).into_bytes();
        for (i, r) in rows.iter().enumerate() {
            framed.extend(
                format!(
                    "{{\"seq\":{},\"kind\":\"message\",\"x\":{r:?}}}\n",
                    first + i as u64
                )
                .bytes(),
            );
        }
        let (commit, _) = commit_line(epoch, first, last, &framed);
        framed.extend(commit.bytes());
        framed
    }

    #[test]
    fn committed_batches_and_torn_tail() {
        let mut file = batch(1, 1, &["a", "b"]);
        let good = file.len() as u64;
        let second = batch(1, 3, &["c"]);
        for cut in 0..second.len() {
            let mut f = file.clone();
            f.extend(&second[..cut]);
            let s = scan(&f, 0, 0);
            assert_eq!(s.committed_end, good, "cut {cut}");
            assert_eq!(s.entries.len(), 2);
            assert!(s.damage.is_none());
            assert_eq!(s.torn_bytes, cut as u64);
        }
        file.extend(&second);
        let s = scan(&file, 0, 0);
        assert_eq!(s.entries.len(), 3);
        assert_eq!(s.batches, 2);
        assert_eq!(s.torn_bytes, 0);
    }

    #[test]
    fn damage_before_last_commit_is_reported() {
        let mut file = batch(1, 1, &["a"]);
        // Flip a bit inside the row line, past the header.
        let flip = file.windows(5).position(|w| w == b"\"x\":\"").unwrap_or(0) + 5;
        file[flip] ^= 0x01;
        file.extend(batch(1, 2, &["b"]));
        let s = scan(&file, 0, 0);
        assert!(s.damage.is_some());
        assert_eq!(s.entries.len(), 1);
    }

    #[test]
    fn legacy_lines_are_rows() {
        let file = b"{\"seq\":1,\"kind\":\"message\"}\nnot json\n{\"seq\":2,\"kind\":\"boundary\",\"meta\":{\"boundary_kind\":\"reset\"}}\n";
        let s = scan(file, 0, 0);
        assert_eq!(s.entries.len(), 3);
        assert_eq!(s.legacy_rows, 2);
        assert_eq!(s.malformed, 1);
        assert_eq!(s.torn_bytes, 0);
    }
}
