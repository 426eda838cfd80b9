//! The in-memory index of both files: entries, seqs, the fold of their heads, damage;
//! kept in step with appends at O(batch). What a row means is `R`'s ([`FileRows`]).

use super::frame;
use super::fsutil::Stamp;
use super::receipt::{self, AppendIntent, ArchiveCheck, Files, Receipt, ReceiptRead, ReceiptState};
use super::rows::FileRows;
use super::Paths;
use super::WindowInfo;

/// An entry of the index over rows read by `R`: a line of either file, with its row head
/// when it is a row.
pub(super) type Entry<R> = frame::Entry<<R as frame::ReadLine>::Head>;

/// What a scan of a file (or of an appended batch) found, its rows read by `R`.
pub(super) type Scan<R> = frame::Scan<<R as frame::ReadLine>::Head>;

/// Scans the bytes of a file that start at byte `base` (line `base_line`), its lines read
/// as rows by `R`.
pub(super) fn scan_rows<R: FileRows>(bytes: &[u8], base: u64, base_line: u64) -> Scan<R> {
    frame::scan::<R>(bytes, base, base_line)
}

/// The in-memory index of both files, valid for the stamps it records.
pub(crate) struct Index<R: FileRows> {
    pub(super) epoch: Option<u64>,
    pub(super) chat_stamp: Option<Stamp>,
    pub(super) archive_stamp: Option<Stamp>,
    pub(super) archive: Scan<R>,
    pub(super) chat: Scan<R>,
    /// Highest seq handed out: the rows' and the receipt's, whichever is higher, so a
    /// seq is never handed out twice.
    pub(super) last_seq: u64,
    /// Highest seq of a readable row, in file order.
    pub(super) max_row_seq: u64,
    /// Highest seq any line shows, rows and lines that are not rows alike: what the
    /// files hold evidence of.
    pub(super) max_shown_seq: u64,
    /// What the rows mean so far (windows, floor, ...), folded from the heads of
    /// readable rows in file order; its floor is raised to the receipt's.
    pub(super) fold: R::Fold,
    /// Rows whose seq is not above every seq before them (archive then chat).
    pub(super) seq_violations: u64,
    /// Where the first of them is.
    pub(super) first_seq_violation: Option<String>,
    /// The archive check receipts carry: the archive's own, or, once it failed, the one
    /// the receipt recorded (so the damage stays visible after receipts are rewritten).
    pub(super) archive_check: Option<ArchiveCheck>,
    /// The check of the archive as loaded (up to its last whole line or batch).
    pub(super) archive_loaded_check: Option<ArchiveCheck>,
}

impl<R: FileRows> Default for Index<R> {
    fn default() -> Self {
        Index {
            epoch: None,
            chat_stamp: None,
            archive_stamp: None,
            archive: Scan::<R>::default(),
            chat: Scan::<R>::default(),
            last_seq: 0,
            max_row_seq: 0,
            max_shown_seq: 0,
            fold: R::Fold::default(),
            seq_violations: 0,
            first_seq_violation: None,
            archive_check: None,
            archive_loaded_check: None,
        }
    }
}

impl<R: FileRows> Index<R> {
    pub(super) fn entries(&self) -> impl Iterator<Item = &Entry<R>> {
        self.archive.entries.iter().chain(self.chat.entries.iter())
    }

    /// Highest seq handed out (0: none): what a conditional write is checked against.
    pub(crate) fn last_seq(&self) -> u64 {
        self.last_seq
    }

    /// What the rows mean, as the layer above folded them (its floor raised to the
    /// receipt's and over damage).
    pub(crate) fn fold(&self) -> &R::Fold {
        &self.fold
    }

    /// The seq of the current window's first row (its boundary, or 1).
    pub(super) fn current_window_seq(&self) -> u64 {
        R::window_seq(&self.fold)
    }

    /// The window label of each of `entries`, a run of this index's lines that ends at
    /// its last row.
    pub(super) fn window_labels<'a>(
        &self,
        entries: impl Iterator<Item = &'a Entry<R>> + Clone,
    ) -> Vec<String>
    where
        R::Head: 'a,
    {
        R::window_labels(entries, &self.fold)
    }

    /// Contiguous window runs of both files, oldest first.
    pub(super) fn window_runs(&self) -> Vec<WindowInfo> {
        R::window_runs(self.entries(), &self.fold)
    }

    /// Seq of the newest privacy floor (0: none).
    pub(super) fn floor_seq(&self) -> u64 {
        R::floor_seq(&self.fold)
    }

    /// The seq the next appended row gets: above every seq handed out or shown, and
    /// above the floor (a floor announced by a batch that was then torn must not hide
    /// the rows after it). `None` once the seq space is used up.
    pub(crate) fn next_seq(&self) -> Option<u64> {
        self.last_seq.max(self.floor_seq()).checked_add(1)
    }

    /// A rotation this index's store just finished: receipts vouch for the archive as it
    /// is now (while the rotation was in flight they kept the check from before it).
    pub(super) fn rotation_finished(&mut self) {
        if self.archive.damage.is_none() {
            self.archive_check = self.archive_loaded_check;
        }
    }

    /// Recomputes the derived fields from all entries (after a full load of `archive_bytes`
    /// and chat), judging them against what the receipt acknowledges.
    pub(super) fn derive(
        &mut self,
        receipt: &ReceiptRead,
        chat_bytes: &[u8],
        archive_bytes: &[u8],
    ) {
        self.last_seq = 0;
        self.max_row_seq = 0;
        self.max_shown_seq = 0;
        self.seq_violations = 0;
        self.first_seq_violation = None;
        self.fold = R::Fold::default();
        let mut archive = std::mem::take(&mut self.archive);
        let mut chat = std::mem::take(&mut self.chat);
        self.note(&mut archive, 0, "chat-archive.jsonl");
        self.note(&mut chat, 0, "chat.jsonl");
        if archive.torn_bytes > 0 {
            // The archive only ever receives whole committed batches from chat.jsonl,
            // all acknowledged; an interrupted rotation is rolled back from its recorded
            // intent. Anything after its last valid commit is damage, never torn.
            archive.tail_is_damage(
                "the archive holds only acknowledged batches, and the one here is cut short \
                 or fails its check",
            );
        }
        // What later receipts vouch for: the archive up to its last whole line or batch
        // (bytes after it are an interrupted rotation's, rolled back or judged below).
        let committed = usize::try_from(archive.committed_end)
            .ok()
            .and_then(|end| archive_bytes.get(..end))
            .unwrap_or(archive_bytes);
        self.archive_loaded_check = Some(ArchiveCheck::of(committed));
        self.archive_check = self.archive_loaded_check;
        let recorded = receipt.valid().and_then(|r| r.archive_check);
        if receipt.valid().is_some_and(|r| r.rotation.is_some()) {
            // A rotation in flight: until it is rolled back or finished, receipts vouch
            // for what they vouched for before it.
            self.archive_check = recorded;
        }
        if let Some(recorded) = recorded.filter(|c| !c.holds_for(archive_bytes)) {
            // If the frame checks found nothing, where the change is is unknown: all of
            // the region may have held a soft clear, so it counts as one possible floor.
            // Damage they located says where (and is a possible floor itself).
            if archive.damage.is_none() {
                archive
                    .damage_offsets
                    .push(recorded.len.min(archive_bytes.len() as u64));
                archive.damage = Some(frame::Damage {
                    offset: 0,
                    line: 1,
                    reason: format!(
                        "the first {} bytes of the archive no longer match the checksum the \
                         receipt recorded for them: acknowledged rows were changed or lost",
                        recorded.len
                    ),
                });
            }
            archive.tail_acked = true;
            self.archive_check = Some(recorded);
        }
        if let Some(r) = receipt.valid() {
            R::raise_floor(&mut self.fold, r.floor);
            self.last_seq = self.last_seq.max(r.seq);
            // A pending append whose batch reaches its announced end was written whole:
            // a torn write leaves a prefix. If its rows do not read, it was damaged after
            // it may have been acknowledged (the stable receipt is what failed): damage,
            // as below, never a torn tail to move away.
            let written_whole_unreadable = r.state == ReceiptState::Pending
                && r.append.is_some_and(|a| {
                    a.last > self.max_shown_seq && written_whole(chat_bytes, r, &a)
                });
            if written_whole_unreadable {
                // Its seqs count as handed out, and every receipt from now on says so
                // (`seq`), which keeps this region damage after the receipt is rewritten.
                self.last_seq = self.last_seq.max(r.append.map_or(0, |a| a.last));
                chat.tail_is_damage(
                    "the batch an append announced was written whole but does not read \
                     back: it may have been acknowledged",
                );
            } else if r.seq > self.max_shown_seq {
                // The receipt vouches for rows that are not readable: the last
                // acknowledged batch was cut or fails its check. That is damage (writes
                // refused, location named), never a torn tail to cut away.
                let reason = format!(
                    "the receipt acknowledges rows up to seq {} but the last readable row \
                     is seq {}: an acknowledged batch after this point is missing or fails \
                     its check",
                    r.seq, self.max_row_seq
                );
                chat.tail_is_damage(reason);
            }
        }
        // Damage found while noting rows knows its offset; name its line too.
        for (scan, bytes) in [(&mut archive, archive_bytes), (&mut chat, chat_bytes)] {
            if let Some(d) = scan.damage.as_mut().filter(|d| d.line == 0) {
                let before =
                    usize::try_from(d.offset).map_or(bytes, |o| &bytes[..o.min(bytes.len())]);
                d.line = memchr::memchr_iter(b'\n', before).count() as u64 + 1;
            }
        }
        self.archive = archive;
        self.chat = chat;
        self.raise_floor_over_damage();
    }

    /// A damaged region may have held a soft clear: nothing shown before it is context
    /// (fail closed), as `session_history` returns nothing before it.
    fn raise_floor_over_damage(&mut self) {
        let mut floor = 0;
        let mut shown = 0u64;
        for scan in [&self.archive, &self.chat] {
            let mut damage = scan.damage_offsets.clone();
            damage.sort_unstable();
            let mut next = damage.iter().peekable();
            for e in &scan.entries {
                while next.next_if(|&&d| d <= e.offset).is_some() {
                    floor = shown;
                }
                let seq = e.head.as_ref().map(R::seq).or(e.claimed_seq);
                shown = shown.max(seq.unwrap_or(0));
            }
            if next.next().is_some() {
                floor = shown;
            }
        }
        R::raise_floor(&mut self.fold, floor);
    }

    /// Updates the derived fields with the entries of `scan` from index `from` on, which
    /// follow the ones already noted: appends cost O(batch), not O(history). A row whose
    /// seq is not above every earlier one is malformed for indexing (kept as a floor if it
    /// is one); inside a committed batch that is damage (a batch present twice).
    pub(super) fn note(&mut self, scan: &mut Scan<R>, from: usize, file: &str) {
        let ranges = std::mem::take(&mut scan.batch_ranges);
        for e in &mut scan.entries[from..] {
            let Some(h) = e.head.as_ref() else {
                // A line that is not a row keeps the seq it shows from being reused.
                if let Some(seq) = e.claimed_seq {
                    self.last_seq = self.last_seq.max(seq);
                    self.max_shown_seq = self.max_shown_seq.max(seq);
                }
                if e.reset_like {
                    // Possibly a soft clear: nothing shown so far is context (fail
                    // closed), as `session_history` hides everything before it.
                    R::raise_floor(&mut self.fold, self.max_shown_seq);
                }
                continue;
            };
            let seq = R::seq(h);
            if seq <= self.max_row_seq {
                self.seq_violations += 1;
                if self.first_seq_violation.is_none() {
                    self.first_seq_violation = Some(format!(
                        "{file} byte {}: seq {} follows seq {}",
                        e.offset, seq, self.max_row_seq
                    ));
                }
                let framed = ranges
                    .binary_search_by(|&(start, end)| {
                        if end <= e.offset {
                            std::cmp::Ordering::Less
                        } else if start > e.offset {
                            std::cmp::Ordering::Greater
                        } else {
                            std::cmp::Ordering::Equal
                        }
                    })
                    .is_ok();
                if framed {
                    scan.damage_offsets.push(e.offset);
                    if scan.damage.is_none() {
                        scan.damage = Some(frame::Damage {
                            offset: e.offset,
                            line: 0,
                            reason: format!(
                                "seq {} repeats or goes back after seq {}: a batch is present \
                                 twice",
                                seq, self.max_row_seq
                            ),
                        });
                    }
                }
                e.reset_like = R::is_floor(h);
                e.claimed_seq = Some(seq);
                e.head = None;
                scan.malformed += 1;
                if !framed {
                    scan.legacy_rows = scan.legacy_rows.saturating_sub(1);
                }
                if e.reset_like {
                    // Still a possible soft clear where it stands (fail closed).
                    R::raise_floor(&mut self.fold, self.max_shown_seq);
                }
                continue;
            }
            self.max_row_seq = seq;
            self.max_shown_seq = self.max_shown_seq.max(seq);
            self.last_seq = self.last_seq.max(seq);
            R::note(&mut self.fold, h);
        }
        scan.batch_ranges = ranges;
    }

    /// A receipt describing the files as this index knows them.
    pub(super) fn receipt(&self, epoch: u64, state: ReceiptState) -> Receipt {
        Receipt {
            version: receipt::RECEIPT_VERSION,
            epoch,
            state,
            seq: self.last_seq,
            committed_end: self.chat.committed_end,
            anchor_crc: self.chat.last_crc.unwrap_or(0),
            files: Files {
                chat: self.chat_stamp,
                archive: self.archive_stamp,
            },
            floor: self.floor_seq(),
            rotation: None,
            append: None,
            archive_check: self.archive_check,
        }
    }

    /// Absorbs the scan of bytes appended to `chat.jsonl` and notes its rows.
    pub(super) fn absorb_chat(&mut self, next: Scan<R>) {
        let first_new = self.chat.entries.len();
        let mut chat = std::mem::take(&mut self.chat);
        chat.absorb(next);
        self.note(&mut chat, first_new, "chat.jsonl");
        self.chat = chat;
    }

    /// The damage that makes the store refuse writes, if any: `(which file, damage)`.
    pub(super) fn damage(&self) -> Option<(bool, &frame::Damage)> {
        self.chat
            .damage
            .as_ref()
            .map(|d| (true, d))
            .or_else(|| self.archive.damage.as_ref().map(|d| (false, d)))
    }
}

/// Whether `chat` holds, from the receipt's `committed_end` to the intent's `end`, the
/// batch a pending receipt announced, written whole: its commit line — the last thing in the one `write` of a batch, never
/// in a torn prefix — is there, recognised by its epoch or its CRC (one bit flip can hide
/// at most one of them; another program's lines carry neither).
fn written_whole(chat: &[u8], r: &Receipt, intent: &AppendIntent) -> bool {
    let (Ok(start), Ok(end)) = (
        usize::try_from(r.committed_end),
        usize::try_from(intent.end),
    ) else {
        return false;
    };
    if start >= end || end > chat.len() {
        return false;
    }
    let tail = &chat[start.max(end.saturating_sub(frame::COMMIT_LINE_MAX))..end];
    let has = |needle: &[u8]| memchr::memmem::find(tail, needle).is_some();
    has(format!("{{\"commit\":{{\"epoch\":{},", r.epoch).as_bytes())
        || has(format!(",\"crc\":{}}}}}", intent.crc).as_bytes())
}

/// A read-only view of the store under the history lock (see `History::with_snapshot`).
pub(crate) struct Snapshot<'a, H> {
    pub paths: &'a Paths,
    pub receipt: ReceiptRead,
    pub chat_stamp: Option<Stamp>,
    pub archive_stamp: Option<Stamp>,
    pub archive: &'a [frame::Entry<H>],
    pub chat: &'a [frame::Entry<H>],
    pub chat_committed_end: u64,
    pub chat_last_crc: Option<u32>,
    /// Seq of the newest privacy floor known (rows or receipt).
    pub floor_seq: u64,
    /// Offset of the last damaged region of the archive, if any (a possible floor).
    pub archive_damage: Option<u64>,
    /// Offset of the last damaged region of `chat.jsonl`, if any (a possible floor).
    pub chat_damage: Option<u64>,
}

impl<H> Snapshot<'_, H> {
    /// Whether the receipt is stable and matches the files: only then can a cursor be
    /// minted or continued.
    pub fn receipt_vouches(&self) -> Option<u64> {
        let r = self.receipt.valid()?;
        (r.state == ReceiptState::Stable
            && r.files.chat == self.chat_stamp
            && r.files.archive == self.archive_stamp)
            .then_some(r.epoch)
    }
}

/// The fuzzing check of the index over rows read by `R`: scans `chat` and `archive` as
/// the store's files with `receipt` as its receipt, derives the index as a reader would,
/// and checks the scanner's own invariants.
#[cfg(feature = "fuzzing")]
pub(crate) fn fuzz_scan<R: FileRows>(chat: &[u8], archive: &[u8], receipt: &[u8]) {
    let receipt = match serde_json::from_slice::<Receipt>(receipt) {
        Ok(r) => ReceiptRead::Valid(r),
        Err(_) => ReceiptRead::Malformed,
    };
    let mut ix = Index::<R> {
        archive: scan_rows::<R>(archive, 0, 0),
        chat: scan_rows::<R>(chat, 0, 0),
        ..Index::default()
    };
    for (s, bytes) in [(&ix.chat, chat), (&ix.archive, archive)] {
        assert!(s.committed_end as usize <= bytes.len());
        assert_eq!(
            s.torn_bytes as usize,
            bytes.len() - s.committed_end as usize
        );
        assert!(s.entries.windows(2).all(|w| w[0].offset < w[1].offset));
        assert!(s
            .entries
            .iter()
            .all(|e| (e.offset + u64::from(e.len)) < s.committed_end.max(1)));
    }
    let _ = R::tail_floor_seq(chat);
    ix.derive(&receipt, chat, archive);
    let seqs: Vec<u64> = ix
        .entries()
        .filter_map(|e| e.head.as_ref().map(R::seq))
        .collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
    assert!(ix.last_seq >= seqs.last().copied().unwrap_or(0));
    // An incremental scan from any committed line boundary agrees with the full one.
    let cut = ix.chat.batch_ranges.first().map_or(0, |r| r.1);
    let head = scan_rows::<R>(&chat[..cut as usize], 0, 0);
    let mut joined = head.clone();
    joined.absorb(scan_rows::<R>(&chat[cut as usize..], cut, head.lines));
    assert_eq!(
        joined.committed_end,
        scan_rows::<R>(chat, 0, 0).committed_end
    );
}
