//! What one `session_history` page walks, from any store: the rows in one sequence (each
//! with its head, as the store's index keeps it) in a consistent snapshot, what binds a
//! cursor to that snapshot, and the rows' bodies fetched on demand. Each store answers it
//! its own way (the file store from its two files under the history lock, a store that
//! fetches bodies by seq — PostgreSQL, a byte log — from its index and its fetches), so
//! the scanner reads this seam, counts rows by their position in the sequence, and names
//! no backend.

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

/// What binds a cursor to the rows it was minted over, as the store decides: its epoch,
/// and where the epoch alone cannot tell a rewrite from an append (the file store: an
/// untracked writer may rewrite a file without a new epoch), a checksum that must still
/// be found at a place of the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Binding {
    /// The epoch the store vouches for.
    pub epoch: u64,
    /// `(place, checksum)`: the file store's end of its last commit in the live file and
    /// that commit's CRC; `None` where the epoch alone binds.
    pub anchor: Option<(u64, u32)>,
}

/// A row as a cursor names it, in the store's own terms (the file store: which file and
/// the row's offset in it; a store that fetches bodies by seq: the row's seq), so a
/// cursor finds its row again after appends whatever the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowMark {
    /// Which part of the store `at` is in (the store's to define).
    pub part: u8,
    /// Where the row is in that part.
    pub at: u64,
}

/// The bodies of a run of rows read at once: one buffer, and where each row's line (its
/// JSON, without a newline) lies in it, in the order the rows were asked for.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Run {
    /// The bytes read.
    pub bytes: Vec<u8>,
    /// `(from, to)` in `bytes` of each row's line.
    pub lines: Vec<(usize, usize)>,
}

/// A consistent view of one store for one page: its rows in one sequence, oldest first,
/// named by their position in it; `H` is what its index keeps of a row (the transcript
/// layer's head: the store only holds it).
pub trait PageSource<H> {
    /// Every row, oldest first (the file store: its archive, then its live file).
    fn rows(&self) -> Vec<&Entry<H>>;
    /// The privacy floor the store recorded (rows or receipt; damage cannot lower it).
    fn floor_seq(&self) -> u64;
    /// Where the last damaged region lies in the row sequence, as the number of rows
    /// before it (such a region may have held a floor); `None` when nothing is damaged.
    fn damage(&self) -> Option<usize>;
    /// What a cursor minted now is bound to; `None` when the store vouches for no epoch
    /// (no cursor can be minted or continued).
    fn binding(&self) -> Option<Binding>;
    /// Whether a cursor bound to `binding` may continue over this view.
    fn binds(&self, binding: &Binding) -> bool;
    /// How a cursor names the row at `position`.
    fn mark(&self, position: usize) -> Option<RowMark>;
    /// The position of the row a cursor named `mark`, if the view holds it.
    fn find(&self, mark: RowMark) -> Option<usize>;
    /// Whether the rows are still the snapshot's when the page is done.
    fn unchanged(&self) -> bool;
    /// The bodies of the first rows of `positions` (ascending, not empty) that the store
    /// reads at once: at least one row, each exactly as its entry describes it.
    fn bodies(&self, positions: &[usize]) -> Result<Run, PageError>;
}

/// Runs one page over a store's view; what the page produces stays with the caller.
pub type RunPage<'p, H> = dyn FnMut(&dyn PageSource<H>) + 'p;
