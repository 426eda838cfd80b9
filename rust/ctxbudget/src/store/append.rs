//! Appends at the byte level: one framed batch of lines, one `write`, one `fdatasync`,
//! O(batch). The lines are the layer above's to encode (every append entry point of the
//! transcript layer is built on [`FileStore::append_batch`]); the store hands out their
//! seqs, frames them, announces and acknowledges them in the receipt and keeps its index
//! in step.

use std::fs::OpenOptions as FsOpenOptions;
use std::io::Write;

use super::frame;
use super::index::{Entry, Index, Scan};
use super::receipt::{self, AppendIntent, Files, Receipt, ReceiptRead, ReceiptState};
use super::rows::FileRows;
use super::{
    failpoint, fsutil, open_read, AppendResult, FileStore, Handles, Locked, Result, Stamp,
    StoreError,
};

/// A batch's lines as the layer above encoded them for the seqs the store handed out.
pub struct EncodedLines<H> {
    /// Each line, with its newline, and the head the index keeps of it.
    pub lines: Vec<(Vec<u8>, H)>,
    /// The privacy floor once the batch is in (never below the index's).
    pub floor: u64,
    /// The window the batch's last row is in, as the append's result names it.
    pub window: String,
}

impl<R: FileRows> FileStore<R> {
    // ----- appends ---------------------------------------------------------------

    /// Under the lock: brings the index up to date (recovering what a crash left) and
    /// refuses writes to damaged files.
    pub(super) fn writable(&self, locked: &mut Locked<'_, R>) -> Result<ReceiptRead> {
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

    /// Appends one batch under one hold of the history lock: once the files are
    /// writable and, with `Some(n)`, seq `n` is still the last one handed out (else
    /// [`StoreError::Conflict`], nothing written), `build` makes the batch from the
    /// index (`None`: nothing is written), and `encode` encodes its lines, from the fold
    /// of the rows before it, for the seqs handed out here and the time every row of it
    /// carries. Generic, so the encoder is inlined into the append.
    pub(crate) fn append_batch<B>(
        &self,
        expected_last_seq: Option<u64>,
        build: impl FnOnce(&Index<R>) -> Result<Option<B>>,
        encode: impl FnOnce(B, &R::Fold, u64, &str) -> Result<EncodedLines<R::Head>>,
    ) -> Result<Option<AppendResult>> {
        let mut locked = self.lock()?;
        let receipt = self.writable(&mut locked)?;
        let ix = Self::index(&locked)?;
        if let Some(expected_last_seq) = expected_last_seq {
            if ix.last_seq != expected_last_seq {
                return Err(StoreError::Conflict {
                    expected_last_seq,
                    last_seq: ix.last_seq,
                });
            }
        }
        let Some(batch) = build(ix)? else {
            return Ok(None);
        };
        self.write_lines(&mut locked, &receipt, |fold, first, ts| {
            encode(batch, fold, first, ts)
        })
        .map(Some)
    }

    /// Appends the batch `encode` encodes under a lock held since before it (recovery's
    /// floor): checks the files are writable first.
    pub(super) fn append_lines(
        &self,
        locked: &mut Locked<'_, R>,
        encode: impl FnOnce(&R::Fold, u64, &str) -> Result<EncodedLines<R::Head>>,
    ) -> Result<AppendResult> {
        let receipt = self.writable(locked)?;
        self.write_lines(locked, &receipt, encode)
    }

    /// Writes the batch `encode` encodes, under the lock, the files found writable
    /// (`receipt` is what that found), for the seqs handed out here: frames the lines,
    /// announces the batch (with the floor it sets) in the receipt, writes and syncs it,
    /// then acknowledges it and adds its lines to the index.
    fn write_lines(
        &self,
        locked: &mut Locked<'_, R>,
        receipt: &ReceiptRead,
        encode: impl FnOnce(&R::Fold, u64, &str) -> Result<EncodedLines<R::Head>>,
    ) -> Result<AppendResult> {
        let ix = Self::index(locked)?;
        let pre_chat = ix.chat_stamp;
        let pre_archive = ix.archive_stamp;
        let archive_check = ix.archive_check;
        let old_size = pre_chat.map_or(0, |s| s.size);

        // Hand out the seqs and frame the batch.
        let seqs_left = || {
            StoreError::InvalidArgument(format!(
                "no seq is left to hand out: a line of the transcript shows seq {}; the \
                 transcript cannot grow, start a new one",
                ix.last_seq.max(ix.floor_seq())
            ))
        };
        let first = ix.next_seq().ok_or_else(seqs_left)?;
        let ts = fsutil::now_rfc3339();
        let encoded = encode(&ix.fold, first, &ts)?;
        let count = encoded.lines.len();
        if count == 0 {
            return Err(StoreError::empty_batch());
        }
        let last = first.checked_add(count as u64 - 1).ok_or_else(seqs_left)?;
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
        let mut framed = frame::header_line(epoch, first, last).into_bytes();
        let floor = encoded.floor;
        // Index entries of the new rows, built as they are framed: no re-scan after.
        let mut entries = Vec::with_capacity(encoded.lines.len());
        for (line, head) in encoded.lines {
            entries.push(Entry::<R> {
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
            ix.absorb_chat(Scan::<R> {
                entries,
                committed_end: end,
                lines: ix.chat.lines + count as u64 + 2,
                last_crc: Some(crc),
                batch_ranges: vec![(old_size, end)],
                batches: 1,
                ..Scan::<R>::default()
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
            window: encoded.window,
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

    /// The bytes of the readable row line with this seq (the newest lines are searched
    /// first); `None`: no readable row has it.
    pub(crate) fn line_at(&self, ix: &Index<R>, seq: u64) -> Result<Option<Vec<u8>>> {
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
            .find(|(_, e)| e.head.as_ref().is_some_and(|h| R::seq(h) == seq));
        let Some((path, e)) = found else {
            return Ok(None);
        };
        let file = open_read(path).map_err(|err| StoreError::io("open", path, err))?;
        let mut raw = vec![0u8; e.len as usize];
        use std::os::unix::fs::FileExt;
        file.read_exact_at(&mut raw, e.offset)
            .map_err(|err| StoreError::io("read", path, err))?;
        Ok(Some(raw))
    }
}
