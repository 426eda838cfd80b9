//! The append receipt: `<ws>/history/receipt.json`, at most 4 KiB.
//!
//! It binds an epoch to the stamps of `chat.jsonl` and `chat-archive.jsonl` as a
//! tracked writer left them. Readers trust a cursor only while the receipt is `stable`,
//! has the cursor's epoch and matches the files; anything else fails closed.

use std::fs::File;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::error::{Result, StoreError};
use super::fsutil::{self, Stamp};

/// Receipts larger than this are malformed.
pub const RECEIPT_MAX: usize = 4 * 1024;

/// Current receipt format.
pub const RECEIPT_VERSION: u32 = 1;

/// Whether a mutation is in flight.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReceiptState {
    /// A writer announced a mutation and has not confirmed its result.
    Pending,
    /// The files are exactly as the stamps say, as of `epoch`.
    Stable,
}

/// Stamps of the two transcript files.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Files {
    /// `chat.jsonl`, or `None` when absent.
    pub chat: Option<Stamp>,
    /// `chat-archive.jsonl`, or `None` when absent.
    pub archive: Option<Stamp>,
}

/// The append receipt.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Receipt {
    /// Format version.
    pub version: u32,
    /// Changes on every mutation that is not a verified pure append.
    pub epoch: u64,
    /// `pending` or `stable`.
    pub state: ReceiptState,
    /// Last sequence number written.
    pub seq: u64,
    /// Byte length of `chat.jsonl` up to the end of its last commit.
    pub committed_end: u64,
    /// CRC-32C recorded in the last commit line (0 if there is none).
    pub anchor_crc: u32,
    /// File stamps.
    pub files: Files,
    /// Seq of the newest privacy floor (soft clear) ever written, 0 if none. Kept here as
    /// well as in the rows so that damage to the rows can never lower the floor.
    #[serde(default)]
    pub floor: u64,
    /// A rotation in flight (only in a `pending` receipt): what to undo or finish.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rotation: Option<Rotation>,
    /// An append in flight (only in a `pending` receipt): where its batch ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub append: Option<AppendIntent>,
    /// Length and CRC-32C of `chat-archive.jsonl` as last written (absent in receipts
    /// written before it existed: then not checked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archive_check: Option<ArchiveCheck>,
}

impl Receipt {
    /// Whether files whose stamps differ from this receipt's — a copy, a restored backup
    /// (new device and inode, new times), a `touch` — still hold exactly what it vouches
    /// for: both files present or absent as it recorded, of the sizes it recorded, and
    /// `chat.jsonl`'s last commit (`committed_end`, `last_crc`, as a scan of the file
    /// found it) the one it recorded. The caller checks every batch's CRC and the archive
    /// check besides; together that is the content the receipt was written for.
    ///
    /// Such files are intact but not the receipt's: cursors still fail closed on them
    /// (they check the stamps), and the next writer or `recover` adopts them under a new
    /// epoch — nothing lets them pass for a pure append.
    pub fn vouches_for_content_of(
        &self,
        now: &Files,
        committed_end: u64,
        last_crc: Option<u32>,
    ) -> bool {
        let size = |s: Option<Stamp>| s.map(|s| s.size);
        size(self.files.chat) == size(now.chat)
            && size(self.files.archive) == size(now.archive)
            && self.committed_end == committed_end
            && self.committed_end == now.chat.map_or(0, |s| s.size)
            && self.anchor_crc == last_crc.unwrap_or(0)
    }
}

/// What the archive held when the receipt was written. Only rotations write the archive,
/// and only whole batches; but damage can destroy the framing itself (a header or a
/// newline), leaving lines that no batch check covers. Every byte the receipt vouches for
/// must still be there, unchanged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArchiveCheck {
    /// Bytes of the archive covered.
    pub len: u64,
    /// CRC-32C of those bytes.
    pub crc: u32,
}

impl ArchiveCheck {
    /// The check of `bytes`, a whole archive.
    pub fn of(bytes: &[u8]) -> ArchiveCheck {
        ArchiveCheck {
            len: bytes.len() as u64,
            crc: crc32c::crc32c(bytes),
        }
    }

    /// Whether `archive` still starts with the bytes this check covers (a rotation in
    /// flight may have added more).
    pub fn holds_for(&self, archive: &[u8]) -> bool {
        usize::try_from(self.len)
            .ok()
            .and_then(|len| archive.get(..len))
            .is_some_and(|prefix| crc32c::crc32c(prefix) == self.crc)
    }
}

/// The intent of an append, announced before its batch is written. A batch is
/// acknowledged once it is durable, even when the `stable` receipt after it cannot be
/// written; this tells such a batch, later damaged, from a torn write.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppendIntent {
    /// Size of `chat.jsonl` once the whole batch is written.
    pub end: u64,
    /// Last seq of the batch.
    pub last: u64,
    /// The CRC-32C its commit line carries (its epoch is the receipt's).
    pub crc: u32,
}

/// The intent of a rotation, published durably before the archive is touched.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rotation {
    /// Size of `chat-archive.jsonl` before the rotation (0 if it did not exist).
    pub archive_before: u64,
    /// Bytes moved from the start of `chat.jsonl`.
    pub moved: u64,
}

/// What reading the receipt found.
// One value per operation, on the stack: boxing the receipt would only add an allocation.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReceiptRead {
    /// No receipt file.
    Missing,
    /// Present but unreadable, oversized or not a receipt.
    Malformed,
    /// A receipt.
    Valid(Receipt),
}

impl ReceiptRead {
    /// The receipt, if valid.
    pub fn valid(&self) -> Option<&Receipt> {
        match self {
            ReceiptRead::Valid(r) => Some(r),
            _ => None,
        }
    }
}

/// Reads at most [`RECEIPT_MAX`] bytes of the receipt at `path`.
pub fn read(path: &Path) -> Result<ReceiptRead> {
    let mut cache = None;
    read_cached(path, &mut cache)
}

/// The receipt file, kept open between operations while it is still the file at its
/// path: it is read and rewritten around every append, and reopening it each time
/// would cost more than the rest of the receipt protocol.
#[derive(Debug)]
pub(crate) struct Handle {
    file: File,
    dev: u64,
    ino: u64,
    /// The bytes last read from this file and what they parse to: a read that finds
    /// the same bytes reuses the parse. Every operation reads the
    /// receipt, and parsing it costs more than the syscalls around it; the bytes are
    /// still read every time, so the result is the same as a fresh parse.
    parsed: Option<(Vec<u8>, ReceiptRead)>,
}

/// The open receipt file at `path` (reusing `cache` if it is still that file), or
/// `None` if there is none.
fn current<'a>(path: &Path, cache: &'a mut Option<Handle>) -> Result<Option<&'a Handle>> {
    use std::os::unix::fs::MetadataExt;
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            *cache = None;
            return Ok(None);
        }
        Err(e) => return Err(StoreError::io("stat receipt", path, e)),
    };
    let fresh = cache
        .as_ref()
        .is_some_and(|h| (h.dev, h.ino) == (meta.dev(), meta.ino()));
    if !fresh {
        let file = fsutil::open_nofollow(path, std::fs::OpenOptions::new().read(true).write(true))
            .map_err(|e| StoreError::io("open receipt", path, e))?;
        let m = file
            .metadata()
            .map_err(|e| StoreError::io("stat receipt", path, e))?;
        *cache = Some(Handle {
            file,
            dev: m.dev(),
            ino: m.ino(),
            parsed: None,
        });
    }
    Ok(cache.as_ref())
}

/// [`read`] through a reusable handle.
pub(crate) fn read_cached(path: &Path, cache: &mut Option<Handle>) -> Result<ReceiptRead> {
    use std::os::unix::fs::FileExt;
    if current(path, cache)?.is_none() {
        return Ok(ReceiptRead::Missing);
    }
    let Some(handle) = cache.as_mut() else {
        return Ok(ReceiptRead::Missing);
    };
    let mut buf = [0u8; RECEIPT_MAX + 1];
    let mut len = 0;
    while len < buf.len() {
        match handle.file.read_at(&mut buf[len..], len as u64) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(StoreError::io("read receipt", path, e)),
        }
        if len == RECEIPT_PADDED {
            break; // our own receipts are exactly this long
        }
    }
    let bytes = &buf[..len];
    if let Some((seen, read)) = &handle.parsed {
        if seen.as_slice() == bytes {
            return Ok(read.clone());
        }
    }
    let read = parse(bytes);
    handle.parsed = Some((bytes.to_vec(), read.clone()));
    Ok(read)
}

/// What the receipt bytes `bytes` (as read, at most [`RECEIPT_MAX`] + 1) say.
fn parse(bytes: &[u8]) -> ReceiptRead {
    if bytes.len() > RECEIPT_MAX {
        return ReceiptRead::Malformed;
    }
    match serde_json::from_slice::<Receipt>(bytes) {
        Ok(r) if r.version == RECEIPT_VERSION => ReceiptRead::Valid(r),
        _ => ReceiptRead::Malformed,
    }
}

/// Every receipt is written padded with spaces to this length, so that rewriting it in
/// place is one `pwrite` of a constant size (JSON allows trailing whitespace).
pub const RECEIPT_PADDED: usize = 1024;

fn padded(receipt: &Receipt) -> Result<Vec<u8>> {
    let mut bytes = serde_json::to_vec(receipt)
        .map_err(|e| StoreError::internal(format!("receipt does not serialize: {e}")))?;
    if bytes.len() < RECEIPT_PADDED {
        bytes.resize(RECEIPT_PADDED, b' ');
    }
    Ok(bytes)
}

/// Publishes `receipt` at `path` by atomic replacement (temporary file, rename);
/// `durable` syncs the file before and the directory after the rename. Used around
/// every mutation that is not a pure append.
pub fn publish(path: &Path, receipt: &Receipt, durable: bool, point: &str) -> Result<()> {
    fsutil::replace_file(path, &padded(receipt)?, durable, point)
}

/// Publishes `receipt` by overwriting the file in place, without syncing: the cheap
/// form used around pure appends, through the handle `read_cached` validated during the
/// same hold of the history lock. Readers hold the history lock, so none sees a write
/// in progress; a crash or power cut mid-write leaves a torn (malformed) or stale
/// receipt, and both fail closed. Receipts are always [`RECEIPT_PADDED`] bytes, so the
/// write covers the whole file.
pub(crate) fn publish_in_place(
    path: &Path,
    cache: &mut Option<Handle>,
    receipt: &Receipt,
    point: &str,
) -> Result<()> {
    use std::os::unix::fs::FileExt;
    let bytes = padded(receipt)?;
    super::failpoint::hit(&format!("{point}.write"))
        .map_err(|e| StoreError::io("write receipt", path, e))?;
    // `cache` was checked against the path by `read_cached` under the same lock hold;
    // with no receipt yet, the first one is created by atomic replacement.
    match cache.as_ref() {
        Some(handle) => handle
            .file
            .write_all_at(&bytes, 0)
            .map_err(|e| StoreError::io("write receipt", path, e)),
        None => publish(path, receipt, false, point),
    }
}
