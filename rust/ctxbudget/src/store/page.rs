//! What one `session_history` page walks, from any store: the rows' index entries in a
//! consistent snapshot, the epoch and anchor cursors are bound to, and the rows' bytes
//! fetched on demand. Each store answers it its own way (the file store from its two
//! files under the history lock, PostgreSQL from one repeatable-read view), so the
//! scanner reads this seam and names no backend.

use super::frame::Entry;

/// Why a page could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PageError {
    /// The rows changed under the page (anything but an append): the call is repeated
    /// without its cursor.
    Changed,
    /// The store could not be read in time.
    Timeout(String),
    /// The store cannot be read right now (the message says why).
    Unavailable(String),
}

/// A consistent view of one store for one page; `H` is what its index keeps of a row
/// (the transcript layer's head: the store only holds it).
pub trait PageSource<H> {
    /// Entries of the rows moved out of the live part (file 0), oldest first; empty for
    /// a store that keeps every row in one sequence.
    fn archive(&self) -> &[Entry<H>];
    /// Entries of the live rows (file 1), oldest first.
    fn chat(&self) -> &[Entry<H>];
    /// The privacy floor the store recorded (rows or receipt; damage cannot lower it).
    fn floor_seq(&self) -> u64;
    /// Offsets of the last damaged region of the archive and of the live rows.
    fn damage(&self) -> (Option<u64>, Option<u64>);
    /// The epoch cursors are bound to, when the store vouches for one.
    fn epoch(&self) -> Option<u64>;
    /// The anchor a minted cursor records: an offset and, when there is one, the CRC
    /// that must still be found there.
    fn anchor(&self) -> (u64, Option<u32>);
    /// Whether the anchor a cursor recorded still holds.
    fn anchor_holds(&self, offset: u64, crc: u32) -> bool;
    /// Whether the rows are still the snapshot's when the page is done.
    fn unchanged(&self) -> bool;
    /// `len` bytes at `offset` of `file`, exactly as the entries describe them (rows
    /// separated by one newline).
    fn read(&self, file: u8, offset: u64, len: usize) -> Result<Vec<u8>, PageError>;
}

/// Runs one page over a store's view; what the page produces stays with the caller.
pub type RunPage<'p, H> = dyn FnMut(&dyn PageSource<H>) + 'p;
