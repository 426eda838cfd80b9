//! What the file store needs of the layer above to index, label and repair its lines.
//! The store frames, checks, places and counts lines; what a row *means* (windows,
//! privacy floors, what recovery writes in place of a floor it moved away) is the
//! transcript layer's, which implements [`FileRows`] for its row reader and names the
//! file store it gets (`FileStore<its reader>`). Every method is static and the store is
//! generic over the implementation, so each call is monomorphised: nothing here costs an
//! indirect call on the append path.

use super::append::EncodedLines;
use super::frame::{Entry, ReadLine};
use super::{Result, WindowInfo};

/// How the file store reads, folds and writes the rows of its files (see the module
/// docs): its line reader ([`ReadLine`]), plus what its index keeps of the rows read so
/// far.
pub trait FileRows: ReadLine {
    /// What the rows mean so far, folded from the heads of readable rows in file order:
    /// at least the current window and the privacy floor.
    type Fold: Default;

    /// Notes the head of a readable row that follows every row noted before it.
    fn note(fold: &mut Self::Fold, head: &Self::Head);

    /// Whether a row is a privacy floor: nothing before it is context.
    fn is_floor(head: &Self::Head) -> bool;

    /// Raises the privacy floor to `seq` (a floor recorded outside the rows, or damage
    /// that may have held one); never lowers it.
    fn raise_floor(fold: &mut Self::Fold, seq: u64);

    /// Seq of the newest privacy floor (0: none).
    fn floor_seq(fold: &Self::Fold) -> u64;

    /// Seq of the current window's first row (its boundary, or 1): where the batch that
    /// opened it starts, and what a rotation or prune never cuts past.
    fn window_seq(fold: &Self::Fold) -> u64;

    /// The label of the window new rows go to, as appends and reads report it.
    fn window_label(fold: &Self::Fold) -> String;

    /// The window label of each of `entries`, a run of the index's lines that ends at
    /// its last row; `fold` has seen every row.
    fn window_labels<'a>(
        entries: impl Iterator<Item = &'a Entry<Self::Head>> + Clone,
        fold: &Self::Fold,
    ) -> Vec<String>
    where
        Self::Head: 'a;

    /// Contiguous window runs of `entries` (every indexed line, oldest first); `fold`
    /// has seen every row.
    fn window_runs<'a>(
        entries: impl Iterator<Item = &'a Entry<Self::Head>>,
        fold: &Self::Fold,
    ) -> Vec<WindowInfo>
    where
        Self::Head: 'a;

    /// The highest seq of a privacy floor among the rows of a torn tail (judged from
    /// rows whose head reads, never from substrings).
    fn tail_floor_seq(tail: &[u8]) -> Option<u64>;

    /// The one-row batch recovery appends, from seq `seq` at time `ts`, in place of a
    /// privacy floor it moved out with a torn tail (the floor written again, later, so
    /// stricter: fail closed).
    fn recovered_floor(
        fold: &Self::Fold,
        seq: u64,
        ts: &str,
        max_row_bytes: usize,
    ) -> Result<EncodedLines<Self::Head>>;
}
