//! Appends: one framed batch, one `write`, one `fdatasync`, O(batch); the conditional
//! and compound forms (rollover, quarantine, soft clear) build their batch under the
//! same hold of the lock.

use std::fs::OpenOptions as FsOpenOptions;
use std::io::Write;

use serde_json::Value;

use super::frame;
use super::index::Index;
use super::receipt::{self, AppendIntent, Files, Receipt, ReceiptRead, ReceiptState};
use super::seam::{BuildBatch, Tip};
use super::{
    failpoint, fsutil, open_read, AppendResult, Handles, History, Locked, Result, Stamp, StoreError,
};
use crate::transcript::input as row;
use crate::transcript::{NewRow, RowEntry, RowScan, WindowFold};

impl History {
    // ----- appends ---------------------------------------------------------------

    /// Appends `rows` as one all-or-nothing batch, durable before this returns.
    pub fn append(&self, rows: Vec<NewRow>) -> Result<AppendResult> {
        if rows.is_empty() {
            return Err(StoreError::empty_batch());
        }
        let mut locked = self.lock()?;
        self.append_locked(&mut locked, &rows)
    }

    /// Validates JSON rows (objects with `kind`, `role`, `parts`, `meta`) and appends
    /// them as one batch.
    pub fn append_json(&self, rows: Vec<Value>) -> Result<AppendResult> {
        let rows = rows
            .into_iter()
            .enumerate()
            .map(|(i, v)| NewRow::from_value(i, v))
            .collect::<Result<Vec<_>>>()?;
        self.append(rows)
    }

    pub(super) fn writable(&self, locked: &mut Locked<'_>) -> Result<ReceiptRead> {
        let mut receipt = self.refresh(locked)?;
        if self.needs_recovery(locked, &receipt) {
            self.recover_locked(locked)?;
            receipt = self.refresh(locked)?;
        }
        let ix = Self::index(locked)?;
        if let Some((in_chat, d)) = ix.damage() {
            let path = if in_chat {
                &self.paths.chat
            } else {
                &self.paths.archive
            };
            return Err(StoreError::Corrupt {
                path: path.clone(),
                offset: d.offset,
                line: d.line,
                reason: d.reason.clone(),
            });
        }
        Ok(receipt)
    }

    /// Appends the committed reset that takes the place of a soft clear recovery moved
    /// out with a torn tail (its bytes are kept in `recovered/`): the floor is written
    /// again, later, so stricter — fail closed.
    pub(super) fn append_recovered_floor(&self, locked: &mut Locked<'_>) -> Result<AppendResult> {
        let floor = crate::transcript::reset_row().with_meta("recovered_floor", true);
        self.append_locked(locked, &[floor])
    }

    pub(super) fn append_locked(
        &self,
        locked: &mut Locked<'_>,
        rows: &[NewRow],
    ) -> Result<AppendResult> {
        // Every batch built in Rust (a host's rows, a rollover's trigger, a quarantined
        // original) meets the rules JSON rows meet, before anything is written.
        for (i, row) in rows.iter().enumerate() {
            row.validate(i)?;
        }
        let incoming: Vec<row::Incoming<'_>> = rows.iter().map(row::Incoming::Built).collect();
        self.append_incoming(locked, &incoming)
    }

    /// Appends a batch given as UTF-8 JSON: a list of row objects with `kind`, `role`,
    /// `parts` and `meta`. Rows are validated without building value trees and their
    /// `parts` and `meta` are stored as written — the fast path for hosts that already
    /// hold JSON (the Python binding uses it).
    pub fn append_json_bytes(&self, rows_json: &[u8]) -> Result<AppendResult> {
        self.append_json_bytes_if(rows_json, None)
    }

    /// [`append_json_bytes`](Self::append_json_bytes), conditional on the store's last
    /// seq: with `Some(n)` the batch is written only if seq `n` is still the last row
    /// (`0`: the store is empty), else [`StoreError::Conflict`] and nothing is written.
    /// The check and the write happen under one hold of the history lock, so two
    /// writers (threads or processes) that decided on the same state cannot both commit.
    pub fn append_json_bytes_if(
        &self,
        rows_json: &[u8],
        expected_last_seq: Option<u64>,
    ) -> Result<AppendResult> {
        let rows: Vec<row::Incoming<'_>> = row::parse_json_batch(rows_json)?
            .into_iter()
            .map(row::Incoming::Raw)
            .collect();
        let mut locked = self.lock()?;
        self.check_expected(&mut locked, expected_last_seq)?;
        self.append_incoming(&mut locked, &rows)
    }

    /// [`append`](Self::append), conditional on the store's last seq (see
    /// [`append_json_bytes_if`](Self::append_json_bytes_if)).
    pub fn append_if(&self, rows: Vec<NewRow>, expected_last_seq: u64) -> Result<AppendResult> {
        if rows.is_empty() {
            return Err(StoreError::empty_batch());
        }
        let mut locked = self.lock()?;
        self.check_expected(&mut locked, Some(expected_last_seq))?;
        self.append_locked(&mut locked, &rows)
    }

    /// Under the lock: refuses a conditional write whose expected last seq is no longer
    /// the store's (`None`: unconditional).
    pub(super) fn check_expected(
        &self,
        locked: &mut Locked<'_>,
        expected: Option<u64>,
    ) -> Result<()> {
        let Some(expected_last_seq) = expected else {
            return Ok(());
        };
        self.writable(locked)?;
        let last_seq = Self::index(locked)?.last_seq;
        if last_seq == expected_last_seq {
            Ok(())
        } else {
            Err(StoreError::Conflict {
                expected_last_seq,
                last_seq,
            })
        }
    }

    pub(super) fn append_incoming(
        &self,
        locked: &mut Locked<'_>,
        rows: &[row::Incoming<'_>],
    ) -> Result<AppendResult> {
        let receipt = self.writable(locked)?;
        let ix = Self::index(locked)?;
        let pre_chat = ix.chat_stamp;
        let pre_archive = ix.archive_stamp;
        let archive_check = ix.archive_check;
        let old_size = pre_chat.map_or(0, |s| s.size);

        // Frame the batch; windows follow boundary rows inside it too.
        let seqs_left = || {
            StoreError::InvalidArgument(format!(
                "no seq is left to hand out: a line of the transcript shows seq {}; the \
                 transcript cannot grow, start a new one",
                ix.last_seq.max(ix.fold.floor_seq())
            ))
        };
        let first = ix.next_seq().ok_or_else(seqs_left)?;
        let last = first
            .checked_add((rows.len() as u64).saturating_sub(1))
            .ok_or_else(seqs_left)?;
        let pure = match receipt.valid() {
            Some(r) => {
                r.state == ReceiptState::Stable
                    && Some(r.epoch) == ix.epoch
                    && r.files.chat == pre_chat
                    && r.files.archive == pre_archive
                    && r.committed_end == old_size
            }
            None => false,
        };
        let epoch = match (pure, receipt.valid()) {
            (true, Some(r)) => r.epoch,
            _ => fsutil::random_u63(),
        };
        let ts = fsutil::now_rfc3339();
        let mut framed = frame::header_line(epoch, first, last).into_bytes();
        let mut window = ix.fold.window();
        let mut floor = ix.fold.floor_seq();
        // Index entries of the new rows, built as they are framed: no re-scan after.
        let mut entries = Vec::with_capacity(rows.len());
        for (i, row) in rows.iter().enumerate() {
            let seq = first + i as u64;
            window = WindowFold::next_window(window, seq, row.kind());
            let window_text = window.to_string();
            let (line, head) =
                row.encode_checked(i, seq, &window_text, &ts, self.options.max_row_bytes)?;
            if head.is_floor() {
                floor = seq;
            }
            entries.push(RowEntry {
                offset: old_size + framed.len() as u64,
                len: (line.len() - 1) as u32,
                head: Some(head),
                reset_like: false,
                claimed_seq: None,
            });
            framed.extend_from_slice(&line);
        }
        let (commit, crc) = frame::commit_line(epoch, first, last, &framed);
        framed.extend_from_slice(commit.as_bytes());

        // Announce the mutation; if even that fails, nothing is written. The announcement
        // already carries the floor this batch sets: once the batch is durable it is
        // acknowledged even if the stable receipt below cannot be written, and a floor
        // must never live in the rows alone, where damage could lower it. If the batch
        // is torn instead, the clear takes effect anyway (fail closed) and later seqs
        // start above it.
        let mut pending = ix.receipt(epoch, ReceiptState::Pending);
        pending.floor = floor;
        pending.append = Some(AppendIntent {
            end: old_size + framed.len() as u64,
            last,
            crc,
        });
        receipt::publish_in_place(
            &self.paths.receipt,
            &mut locked.handles.receipt,
            &pending,
            "receipt.pending",
        )?;

        let written = match self.write_batch(&mut locked.handles, &framed, pre_chat) {
            Ok(stamp) => stamp,
            Err(e) => {
                // The file may now hold a torn tail; rebuild the index before the next use.
                *locked.index = None;
                return Err(e);
            }
        };

        // `written` is the stamp of the file we wrote, taken through our handle. A file
        // that is exactly the old one plus our batch is a pure append; anything else
        // (a writer that ignored the lock) costs the epoch. The archive is not stat'ed
        // again: under the lock only such a writer could have changed it, and the
        // receipt then names a stamp the file no longer has, which fails closed.
        let post_chat = Some(written);
        let post_archive = pre_archive;
        let verified = match pre_chat {
            Some(a) => {
                (a.dev, a.ino) == (written.dev, written.ino)
                    && written.size == a.size + framed.len() as u64
            }
            None => written.size == framed.len() as u64,
        };
        let final_epoch = if pure && verified {
            epoch
        } else {
            fsutil::random_u63()
        };
        let stable = Receipt {
            version: receipt::RECEIPT_VERSION,
            epoch: final_epoch,
            state: ReceiptState::Stable,
            seq: last,
            committed_end: post_chat.map_or(0, |s| s.size),
            anchor_crc: crc,
            files: Files {
                chat: post_chat,
                archive: post_archive,
            },
            floor,
            rotation: None,
            append: None,
            archive_check,
        };
        // The append is durable now: a failure to finalize only expires cursors.
        let published = receipt::publish_in_place(
            &self.paths.receipt,
            &mut locked.handles.receipt,
            &stable,
            "receipt.stable",
        )
        .is_ok();

        let ix = locked
            .index
            .as_mut()
            .ok_or_else(|| StoreError::internal("history index is not loaded"))?;
        if verified {
            let end = old_size + framed.len() as u64;
            ix.absorb_chat(RowScan {
                entries,
                committed_end: end,
                lines: ix.chat.lines + rows.len() as u64 + 2,
                last_crc: Some(crc),
                batch_ranges: vec![(old_size, end)],
                batches: 1,
                ..RowScan::default()
            });
            ix.chat_stamp = post_chat;
            ix.epoch = published.then_some(final_epoch);
        } else {
            *locked.index = None;
        }
        Ok(AppendResult {
            first_seq: first,
            last_seq: last,
            epoch: final_epoch,
            window: window.to_string(),
        })
    }

    /// Writes one framed batch to `chat.jsonl` (whose stamp under the lock is `current`)
    /// with a single `write`, then `fdatasync`s it. Returns the stamp of the file written,
    /// or an error if that file was unlinked meanwhile (the batch would be lost).
    pub(super) fn write_batch(
        &self,
        handles: &mut Handles,
        framed: &[u8],
        current: Option<Stamp>,
    ) -> Result<Stamp> {
        use std::os::unix::fs::MetadataExt;
        let path = &self.paths.chat;
        let io = |op| move |e| StoreError::io(op, path, e);
        failpoint::hit("append.open").map_err(io("open"))?;
        let creating = current.is_none();
        let reusable = match (&handles.chat, current) {
            (Some((_, dev, ino)), Some(s)) => (*dev, *ino) == (s.dev, s.ino),
            _ => false,
        };
        if !reusable {
            let file = fsutil::open_nofollow(path, FsOpenOptions::new().append(true).create(true))
                .map_err(io("open"))?;
            let meta = file.metadata().map_err(io("stat"))?;
            handles.chat = Some((file, meta.dev(), meta.ino()));
        }
        let Some((file, _, _)) = handles.chat.as_mut() else {
            return Err(io("open")(std::io::Error::other(
                "chat.jsonl handle missing",
            )));
        };
        match failpoint::take("append.write") {
            Some(failpoint::Fault::Torn(n)) => {
                let n = n.min(framed.len());
                file.write_all(&framed[..n]).map_err(io("write"))?;
                return Err(io("write")(failpoint::crashed("append.write")));
            }
            Some(failpoint::Fault::Error(code)) => {
                return Err(io("write")(std::io::Error::from_raw_os_error(code)));
            }
            Some(failpoint::Fault::Crash) => {
                return Err(io("write")(failpoint::crashed("append.write")));
            }
            Some(failpoint::Fault::Run(f)) => f(),
            None => {}
        }
        file.write_all(framed).map_err(io("write"))?;
        if self.durable() {
            failpoint::hit("append.fsync").map_err(io("fdatasync"))?;
            file.sync_data().map_err(io("fdatasync"))?;
            if creating {
                fsutil::sync_dir(&self.paths.dir)?;
            }
        }
        failpoint::hit("append.after_fsync").map_err(io("finish append"))?;
        let meta = file.metadata().map_err(io("stat"))?;
        if meta.nlink() == 0 {
            // Someone deleted or replaced chat.jsonl between our stat and our write,
            // ignoring the lock: the batch went to a file no path names any more.
            handles.chat = None;
            return Err(io("append")(std::io::Error::other(
                "chat.jsonl was deleted or replaced by a program that ignores the history \
                 lock while this batch was written, so the batch is not stored; stop that \
                 program and append again",
            )));
        }
        Ok(Stamp::of_metadata(&meta))
    }

    /// See [`Store::append_with`].
    pub fn append_with(
        &self,
        expected_last_seq: Option<u64>,
        build: &mut BuildBatch<'_>,
    ) -> Result<Option<AppendResult>> {
        let mut locked = self.lock()?;
        self.writable(&mut locked)?;
        self.check_expected(&mut locked, expected_last_seq)?;
        let rows = {
            let ix = Self::index(&locked)?;
            let reader = |seq: u64| self.row_at(ix, seq);
            let tip = Tip {
                last_seq: ix.last_seq,
                next_seq: ix.next_seq(),
                fold: &ix.fold,
                rows: &reader,
            };
            build(&tip)?
        };
        match rows {
            None => Ok(None),
            Some(rows) if rows.is_empty() => Err(StoreError::empty_batch()),
            Some(rows) => self.append_locked(&mut locked, &rows).map(Some),
        }
    }

    /// The readable row with this seq, parsed (the newest rows are searched first).
    pub(super) fn row_at(&self, ix: &Index, seq: u64) -> Result<Option<crate::transcript::Row>> {
        let found = ix
            .chat
            .entries
            .iter()
            .rev()
            .map(|e| (self.paths.chat.as_path(), e))
            .chain(
                ix.archive
                    .entries
                    .iter()
                    .rev()
                    .map(|e| (self.paths.archive.as_path(), e)),
            )
            .find(|(_, e)| e.head.as_ref().is_some_and(|h| h.seq == seq));
        let Some((path, e)) = found else {
            return Ok(None);
        };
        let file = open_read(path).map_err(|err| StoreError::io("open", path, err))?;
        let mut raw = vec![0u8; e.len as usize];
        use std::os::unix::fs::FileExt;
        file.read_exact_at(&mut raw, e.offset)
            .map_err(|err| StoreError::io("read", path, err))?;
        Ok(crate::transcript::Row::parse(
            seq,
            ix.fold.window_of(seq),
            &raw,
        ))
    }
}
