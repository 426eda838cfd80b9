//! Recovery, rotation and verification: every mutation that is not a pure append
//! publishes a durable `pending` receipt with a new epoch first and a durable `stable`
//! one after, so cursors never survive it.

use std::fs::OpenOptions as FsOpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};

use super::frame;
use super::index::{scan_rows, Index};
use super::receipt::{self, Files, ReceiptRead, ReceiptState};
use super::rows::FileRows;
use super::{
    failpoint, fsutil, read_all, read_range, FileRecovery, FileReport, FileStore, FileVerify,
    Locked, ReceiptCheck, RecoveryDetail, RecoveryReport, Result, RotateReport, RowCounts, Stamp,
    StoreError, VerifyDetail, VerifyReport,
};

impl<R: FileRows> FileStore<R> {
    /// Moves torn tails to `recovered/`, completes an interrupted rotation and
    /// re-establishes a stable receipt under a new epoch. Idempotent: a second call
    /// changes nothing. Damage before a valid commit is reported, never touched.
    pub fn recover(&self) -> Result<RecoveryReport> {
        let mut locked = self.lock()?;
        self.refresh(&mut locked)?;
        self.recover_locked(&mut locked)
    }

    pub(super) fn recover_locked(&self, locked: &mut Locked<'_, R>) -> Result<RecoveryReport> {
        let receipt = receipt::read(&self.paths.receipt)?;
        let ix = Self::index(locked)?;
        let mut file = FileRecovery {
            damage: ix
                .damage()
                .map(|(_, d)| format!("byte {} (line {}): {}", d.offset, d.line, d.reason)),
            ..FileRecovery::default()
        };
        // A rotation that announced itself and did not confirm: roll it back if
        // `chat.jsonl` was not replaced yet, else it is complete (the archive was synced
        // before the replacement). Either way no row ends up in both files.
        let rotation = receipt
            .valid()
            .filter(|r| r.state == ReceiptState::Pending)
            .and_then(|r| r.rotation.map(|rot| (rot, r.files.chat)));
        let rollback_to = rotation.and_then(|(rot, chat_before)| {
            let ident = |s: Option<Stamp>| s.map(|s| (s.dev, s.ino));
            let replaced = ident(ix.chat_stamp) != ident(chat_before);
            let archive_size = ix.archive_stamp.map_or(0, |s| s.size);
            (!replaced && archive_size > rot.archive_before).then_some(rot.archive_before)
        });
        let chat_torn =
            (ix.chat.torn_bytes > 0 && !ix.chat.tail_acked).then_some(ix.chat.committed_end);
        let archive_torn =
            (ix.archive.torn_bytes > 0 && !ix.archive.tail_acked && rollback_to.is_none())
                .then_some(ix.archive.committed_end);
        let receipt_ok = receipt.valid().is_some_and(|r| {
            r.state == ReceiptState::Stable
                && r.files.chat == ix.chat_stamp
                && r.files.archive == ix.archive_stamp
        });
        let has_files = ix.chat_stamp.is_some() || ix.archive_stamp.is_some();
        if chat_torn.is_none()
            && archive_torn.is_none()
            && rotation.is_none()
            && (receipt_ok || !has_files)
        {
            return Ok(RecoveryReport {
                changed: false,
                epoch: receipt.valid().map(|r| r.epoch),
                detail: RecoveryDetail::File(file),
            });
        }
        // A soft clear in the torn tail is replaced below by a committed reset; until
        // then the recovery's own receipt holds its floor, so a crash in between does not
        // drop it.
        let tail_floor = match chat_torn {
            Some(keep) => R::tail_floor_seq(&read_range(&self.paths.chat, keep)?),
            None => None,
        };
        let epoch = fsutil::random_u63();
        self.publish_pending_durable(epoch, ix, tail_floor.unwrap_or(0))?;
        *locked.index = None; // whatever happens next, rebuild from the files
        if let Some(size) = rollback_to {
            file.rotation_rolled_back_bytes = self.truncate_to(&self.paths.archive, size)?;
        }
        if let Some(keep) = archive_torn {
            file.archive_torn_bytes =
                self.move_tail(&self.paths.archive, keep, epoch, &mut file.moved_to)?;
        }
        let floor_in_tail = tail_floor.is_some();
        if let Some(keep) = chat_torn {
            file.chat_torn_bytes =
                self.move_tail(&self.paths.chat, keep, epoch, &mut file.moved_to)?;
        }
        self.refresh(locked)?;
        self.publish_stable_durable(epoch, locked)?;
        let mut epoch = Some(epoch);
        if floor_in_tail {
            // The torn tail held a complete soft-clear row. Its bytes are safe in
            // recovered/, but the privacy floor must not disappear with them: a committed
            // reset takes its place (later, so stricter — fail closed).
            let max_row_bytes = self.options.max_row_bytes;
            let appended = self.append_lines(locked, |fold, seq, ts| {
                R::recovered_floor(fold, seq, ts, max_row_bytes)
            })?;
            epoch = Some(appended.epoch);
        }
        Ok(RecoveryReport {
            changed: true,
            epoch,
            detail: RecoveryDetail::File(file),
        })
    }

    /// Cuts `path` back to `size` bytes (rolling back an interrupted rotation, whose
    /// extra archive bytes are copies of rows still in `chat.jsonl`); returns the bytes
    /// removed.
    pub(super) fn truncate_to(&self, path: &Path, size: u64) -> Result<u64> {
        failpoint::hit("recover.rollback").map_err(|e| StoreError::io("truncate", path, e))?;
        let file = fsutil::open_nofollow(path, FsOpenOptions::new().write(true))
            .map_err(|e| StoreError::io("open", path, e))?;
        let before = file
            .metadata()
            .map_err(|e| StoreError::io("stat", path, e))?
            .len();
        file.set_len(size)
            .map_err(|e| StoreError::io("truncate", path, e))?;
        if self.durable() {
            file.sync_all()
                .map_err(|e| StoreError::io("fsync", path, e))?;
        }
        Ok(before.saturating_sub(size))
    }

    pub(super) fn move_tail(
        &self,
        path: &Path,
        keep: u64,
        epoch: u64,
        moved: &mut Vec<PathBuf>,
    ) -> Result<u64> {
        let tail = read_range(path, keep)?;
        if tail.is_empty() {
            return Ok(0);
        }
        let dir = &self.paths.recovered;
        std::fs::create_dir_all(dir).map_err(|e| StoreError::io("create directory", dir, e))?;
        let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("chat");
        let millis = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis();
        let target = dir.join(format!("{stem}-at-{keep}-{millis}-{epoch:x}.jsonl"));
        let target_ref = &target;
        let io = |op| move |e| StoreError::io(op, target_ref, e);
        failpoint::hit("recover.copy").map_err(io("write"))?;
        let mut out =
            fsutil::open_nofollow(&target, FsOpenOptions::new().write(true).create_new(true))
                .map_err(io("create"))?;
        out.write_all(&tail).map_err(io("write"))?;
        if self.durable() {
            out.sync_all().map_err(io("fsync"))?;
            fsutil::sync_dir(dir)?;
        }
        moved.push(target.clone());
        // Only now that the bytes are safe elsewhere is the tail cut.
        failpoint::hit("recover.truncate").map_err(|e| StoreError::io("truncate", path, e))?;
        let file = fsutil::open_nofollow(path, FsOpenOptions::new().write(true))
            .map_err(|e| StoreError::io("open", path, e))?;
        file.set_len(keep)
            .map_err(|e| StoreError::io("truncate", path, e))?;
        if self.durable() {
            file.sync_all()
                .map_err(|e| StoreError::io("fsync", path, e))?;
        }
        Ok(tail.len() as u64)
    }

    /// Publishes a pending receipt describing `ix`, its floor raised to at least `floor`.
    pub(super) fn publish_pending_durable(
        &self,
        epoch: u64,
        ix: &Index<R>,
        floor: u64,
    ) -> Result<()> {
        let mut pending = ix.receipt(epoch, ReceiptState::Pending);
        pending.floor = pending.floor.max(floor);
        receipt::publish(
            &self.paths.receipt,
            &pending,
            self.durable(),
            "receipt.pending",
        )
    }

    pub(super) fn publish_stable_durable(
        &self,
        epoch: u64,
        locked: &mut Locked<'_, R>,
    ) -> Result<()> {
        let ix = locked
            .index
            .as_mut()
            .ok_or_else(|| StoreError::internal("history index is not loaded"))?;
        let stable = ix.receipt(epoch, ReceiptState::Stable);
        receipt::publish(
            &self.paths.receipt,
            &stable,
            self.durable(),
            "receipt.stable",
        )?;
        ix.epoch = Some(epoch);
        Ok(())
    }

    /// Moves every closed window (all rows before the batch that opened the current
    /// window) from `chat.jsonl` to the end of `chat-archive.jsonl`, bytes unchanged.
    pub fn rotate(&self) -> Result<RotateReport> {
        let mut locked = self.lock()?;
        self.writable(&mut locked)?;
        self.rotate_locked(&mut locked)
    }

    /// [`rotate`](Self::rotate) under a held lock, the index refreshed and writable.
    pub(super) fn rotate_locked(&self, locked: &mut Locked<'_, R>) -> Result<RotateReport> {
        let ix = Self::index(locked)?;
        // The batch that opened the current window begins at the window's first seq,
        // as the fold knows it (the store does not read windows itself).
        let opened_at = ix.current_window_seq();
        let boundary = ix
            .chat
            .entries
            .iter()
            .rev()
            .find(|e| e.head.as_ref().is_some_and(|h| R::seq(h) == opened_at));
        let Some(boundary) = boundary else {
            return Ok(RotateReport::default());
        };
        let cut = ix
            .chat
            .batch_ranges
            .iter()
            .find(|(start, end)| *start <= boundary.offset && boundary.offset < *end)
            .map_or(boundary.offset, |(start, _)| *start);
        if cut == 0 {
            return Ok(RotateReport::default());
        }
        let rows = ix.chat.entries.iter().filter(|e| e.offset < cut).count() as u64;
        let epoch = fsutil::random_u63();
        // The intent goes first, durably: a crash anywhere after this leaves a pending
        // receipt that says how to roll the rotation back (chat.jsonl not yet replaced)
        // or that it is complete (replaced), so no row is ever in both files.
        let mut pending = ix.receipt(epoch, ReceiptState::Pending);
        pending.rotation = Some(receipt::Rotation {
            archive_before: ix.archive_stamp.map_or(0, |s| s.size),
            moved: cut,
        });
        receipt::publish(
            &self.paths.receipt,
            &pending,
            self.durable(),
            "receipt.pending",
        )?;
        let archive_created = ix.archive_stamp.is_none();
        *locked.index = None;
        let chat = read_all(&self.paths.chat)?;
        let (moved, rest) = chat.split_at((cut as usize).min(chat.len()));
        {
            let path = &self.paths.archive;
            let io = |op| move |e| StoreError::io(op, path, e);
            failpoint::hit("rotate.archive").map_err(io("append"))?;
            let mut f = fsutil::open_nofollow(path, FsOpenOptions::new().append(true).create(true))
                .map_err(io("open"))?;
            if let Some(failpoint::Fault::Torn(n)) = failpoint::take("rotate.archive.write") {
                f.write_all(&moved[..n.min(moved.len())])
                    .map_err(io("append"))?;
                return Err(io("append")(failpoint::crashed("rotate.archive.write")));
            }
            f.write_all(moved).map_err(io("append"))?;
            if self.durable() {
                f.sync_data().map_err(io("fdatasync"))?;
                if archive_created {
                    fsutil::sync_dir(&self.paths.dir)?;
                }
            }
        }
        fsutil::replace_file(&self.paths.chat, rest, self.durable(), "rotate.chat")?;
        self.refresh(locked)?;
        if let Some(ix) = locked.index.as_mut() {
            ix.rotation_finished();
        }
        self.publish_stable_durable(epoch, locked)?;
        Ok(RotateReport {
            rows,
            bytes: cut,
            epoch: Some(epoch),
        })
    }

    /// Full check: every commit CRC of both files, torn tails, damage (including an
    /// acknowledged batch that is missing or fails its check), seqs unique and
    /// increasing across archive and chat, receipt state. Changes nothing.
    ///
    /// The receipt is `stable` (it vouches for these very files), `copied` (the files'
    /// identities or times changed — a copy, a restored backup — but they hold exactly
    /// what it vouches for: ok, and the next write or [`recover`](Self::recover) adopts them
    /// under a new epoch), `stale` (they changed otherwise), `pending`, `malformed` or
    /// `missing`.
    pub fn verify(&self) -> Result<VerifyReport> {
        let _locked = self.lock()?;
        let receipt = receipt::read(&self.paths.receipt)?;
        let chat_bytes = read_all(&self.paths.chat)?;
        let archive_bytes = read_all(&self.paths.archive)?;
        let mut ix = Index::<R> {
            archive: scan_rows::<R>(&archive_bytes, 0, 0),
            chat: scan_rows::<R>(&chat_bytes, 0, 0),
            ..Index::default()
        };
        ix.derive(&receipt, &chat_bytes, &archive_bytes);
        let file_report = |s: &frame::Scan<_>, bytes: usize| FileReport {
            bytes: bytes as u64,
            batches: s.batches,
            rows: s.entries.iter().filter(|e| e.head.is_some()).count() as u64,
            legacy_rows: s.legacy_rows,
            malformed_lines: s.malformed,
            torn_bytes: s.torn_bytes,
            damage: s
                .damage
                .as_ref()
                .map(|d| (d.offset, d.line, d.reason.clone())),
        };
        let chat = file_report(&ix.chat, chat_bytes.len());
        let archive = file_report(&ix.archive, archive_bytes.len());
        let receipt_check = match &receipt {
            ReceiptRead::Missing => ReceiptCheck::Missing,
            ReceiptRead::Malformed => ReceiptCheck::Malformed,
            ReceiptRead::Valid(r) if r.state == ReceiptState::Pending => ReceiptCheck::Pending,
            ReceiptRead::Valid(r) => {
                let files = Files {
                    chat: fsutil::stamp(&self.paths.chat)?,
                    archive: fsutil::stamp(&self.paths.archive)?,
                };
                if r.files == files {
                    ReceiptCheck::Stable
                } else if r.vouches_for_content_of(&files, ix.chat.committed_end, ix.chat.last_crc)
                {
                    // Copied or restored (identities and times changed), content intact:
                    // not damage. Cursors still fail closed; the next write or `recover`
                    // adopts the files under a new epoch.
                    ReceiptCheck::Copied
                } else {
                    ReceiptCheck::Stale
                }
            }
        };
        let clean = |f: &FileReport| f.torn_bytes == 0 && f.damage.is_none();
        let empty = chat.bytes == 0 && archive.bytes == 0;
        let counts = |f: &FileReport| RowCounts {
            rows: f.rows,
            malformed: f.malformed_lines,
        };
        Ok(VerifyReport {
            ok: clean(&chat)
                && clean(&archive)
                && ix.seq_violations == 0
                && (matches!(receipt_check, ReceiptCheck::Stable | ReceiptCheck::Copied)
                    || (empty && receipt_check == ReceiptCheck::Missing)),
            epoch: receipt.valid().map(|r| r.epoch),
            last_seq: ix.last_seq,
            floor_seq: ix.floor_seq(),
            live: counts(&chat),
            archive: counts(&archive),
            seq_violations: ix.seq_violations,
            first_seq_violation: ix.first_seq_violation,
            detail: VerifyDetail::File(FileVerify {
                chat,
                archive,
                receipt: receipt_check,
            }),
        })
    }
}
