//! The append receipt: `<ws>/history/receipt.json`, at most 4 KiB.
//!
//! It binds an epoch to the stamps of `chat.jsonl` and `chat-archive.jsonl` as a
//! tracked writer left them. Readers trust a cursor only while the receipt is `stable`,
//! has the cursor's epoch and matches the files; anything else fails closed.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::error::{HistoryError, Result};
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
}

/// What reading the receipt found.
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
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(ReceiptRead::Missing),
        Err(e) => return Err(HistoryError::io("open receipt", path, e)),
    };
    let mut buf = Vec::with_capacity(RECEIPT_MAX + 1);
    file.take(RECEIPT_MAX as u64 + 1)
        .read_to_end(&mut buf)
        .map_err(|e| HistoryError::io("read receipt", path, e))?;
    if buf.len() > RECEIPT_MAX {
        return Ok(ReceiptRead::Malformed);
    }
    match serde_json::from_slice::<Receipt>(&buf) {
        Ok(r) if r.version == RECEIPT_VERSION => Ok(ReceiptRead::Valid(r)),
        _ => Ok(ReceiptRead::Malformed),
    }
}

/// Every receipt is written padded with spaces to this length, so that rewriting it in
/// place is one `pwrite` of a constant size (JSON allows trailing whitespace).
pub const RECEIPT_PADDED: usize = 1024;

fn padded(receipt: &Receipt) -> Result<Vec<u8>> {
    let mut bytes = serde_json::to_vec(receipt)
        .map_err(|e| HistoryError::InvalidArgument(format!("receipt does not serialize: {e}")))?;
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
/// form used around pure appends. Readers hold the history lock, so none sees a write
/// in progress; a crash or power cut mid-write leaves a torn (malformed) or stale
/// receipt, and both fail closed.
pub fn publish_in_place(path: &Path, receipt: &Receipt, point: &str) -> Result<()> {
    use std::os::unix::fs::FileExt;
    let bytes = padded(receipt)?;
    let write = || -> std::io::Result<()> {
        super::failpoint::hit(&format!("{point}.write"))?;
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        file.write_all_at(&bytes, 0)?;
        let len = file.metadata()?.len();
        if len > bytes.len() as u64 {
            file.set_len(bytes.len() as u64)?;
        }
        Ok(())
    };
    write().map_err(|e| HistoryError::io("write receipt", path, e))
}
