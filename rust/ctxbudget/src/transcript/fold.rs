//! The window fold: the one place that turns a stream of rows into what they mean —
//! which window is current and which came before, the privacy floor, retracted rows,
//! the rows a request carries, advisory claims, open tool calls, a scheduled
//! `new_context`, the last user message. Every reader (the store's index, the
//! `session_history` scanner, the Python `Session`) folds rows through it, and each step
//! costs O(rows noted), so a loop that feeds it new rows pays only for those.
//!
//! Two depths of input: [`WindowFold::note_head`] takes what the store's index keeps of
//! a row (seq, kind, role and the metadata that shapes windows) and maintains the
//! structure — window, floor, retractions, visible rows, last user row.
//! [`WindowFold::note_row`] takes a whole parsed [`Row`] and maintains the rest too
//! (claims, open calls, `new_context`), which need parts and metadata.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::kinds::{BoundaryKind, PartType, Role, RowKind};
use super::row::{OpenCall, Row};
use super::rules;
use super::window::WindowId;
use crate::budget::{Action, Claims};

/// What the fold reads of a row when it has no parts or metadata at hand.
#[derive(Debug, Clone, Copy)]
pub struct Head<'a> {
    /// Sequence number.
    pub seq: u64,
    /// Kind as stored (a kind this library does not know changes nothing).
    pub kind: &'a str,
    /// Role as stored, if any.
    pub role: Option<&'a str>,
    /// `meta.boundary_kind` of a boundary row.
    pub boundary_kind: Option<&'a str>,
    /// `meta.rollover_id` of a boundary row.
    pub rollover_id: Option<&'a str>,
    /// `meta.retracts` of a retraction row.
    pub retracts: Option<u64>,
    /// `meta.rejected` is present and not null: the row holds a quarantined request
    /// (see [`rules::is_quarantined`]).
    pub rejected: bool,
}

impl Head<'_> {
    /// Whether a provider request carries this row (when not retracted): a context kind
    /// (see [`RowKind::is_context`]) that holds no quarantined request.
    pub fn is_context(&self) -> bool {
        self.kind.parse::<RowKind>().is_ok_and(RowKind::is_context)
            && !rules::is_quarantined(self.kind, self.rejected)
    }

    /// Whether `session_history` returns this row as an item and window listings count
    /// it (when not retracted): an item kind (see [`RowKind::is_item`]) that holds no
    /// quarantined request.
    pub fn is_item(&self) -> bool {
        self.kind.parse::<RowKind>().is_ok_and(RowKind::is_item)
            && !rules::is_quarantined(self.kind, self.rejected)
    }
}

/// The incremental state of a transcript's windows. See the module docs.
#[derive(Debug, Clone, Default)]
pub struct WindowFold {
    window: WindowId,
    window_kind: Option<BoundaryKind>,
    previous: Option<WindowId>,
    /// Seq of the first row noted in the current window.
    window_first_seq: Option<u64>,
    last_seq: u64,
    floor_seq: u64,
    retracted: HashSet<u64>,
    /// Context rows (see [`RowKind::is_context`]) of the current window not retracted,
    /// in seq order, with their kinds.
    visible: Vec<(u64, RowKind)>,
    claims: Claims,
    open_calls: Vec<OpenCall>,
    answered: HashSet<String>,
    new_context_requested: bool,
    last_user_seq: Option<u64>,
    rollover_ids: HashMap<String, WindowId>,
    /// Seqs of every boundary noted, ascending: the window of any seq.
    boundaries: Vec<u64>,
}

impl WindowFold {
    /// A fold that has seen nothing: window `w:0`, no floor.
    pub fn new() -> WindowFold {
        WindowFold::default()
    }

    /// A fold that starts inside a transcript, in `window` opened as `kind` (a reader
    /// that begins at a privacy floor: nothing before it is noted).
    pub fn starting_at(window: WindowId, kind: BoundaryKind) -> WindowFold {
        WindowFold {
            window,
            window_kind: Some(kind),
            boundaries: vec![window.seq()],
            ..WindowFold::default()
        }
    }

    /// Notes a row from its head. Returns `true` when the row opened a new window.
    /// Rows whose seq is not above the last one noted are ignored (the store reports
    /// them as seq violations; they are never part of the transcript's meaning).
    pub fn note_head(&mut self, h: Head<'_>) -> bool {
        if h.seq <= self.last_seq && self.window_first_seq.is_some() {
            return false;
        }
        self.last_seq = h.seq;
        let Ok(kind) = h.kind.parse::<RowKind>() else {
            if rules::is_floor(h.kind, h.boundary_kind) {
                self.floor_seq = h.seq;
            }
            return false;
        };
        let mut opened = false;
        match kind {
            RowKind::Boundary => {
                let window = WindowFold::next_window(self.window, h.seq, h.kind);
                self.open_window(window, h.boundary_kind.and_then(|b| b.parse().ok()));
                if rules::is_floor(h.kind, h.boundary_kind) {
                    self.floor_seq = h.seq;
                }
                if let Some(id) = h.rollover_id {
                    self.rollover_ids.insert(id.to_owned(), self.window);
                }
                opened = true;
            }
            RowKind::Retraction => {
                if let Some(target) = h.retracts {
                    self.retracted.insert(target);
                    if let Ok(i) = self.visible.binary_search_by_key(&target, |&(s, _)| s) {
                        self.visible.remove(i);
                    }
                    // The request no longer carries the calls of a retracted row, so no
                    // result is owed for them (a result for a call the provider never
                    // saw would be refused).
                    self.open_calls.retain(|c| c.seq != target);
                }
            }
            _ => {}
        }
        self.window_first_seq.get_or_insert(h.seq);
        if h.is_context() {
            self.visible.push((h.seq, kind));
        }
        if kind == RowKind::Message && h.role == Some(Role::User.as_str()) {
            self.last_user_seq = Some(h.seq);
        }
        opened
    }

    /// Notes a whole row: its head, then what its parts and metadata say. Returns `true`
    /// when the row opened a new window.
    pub fn note_row(&mut self, row: &Row) -> bool {
        let head = Head {
            seq: row.seq,
            kind: row.kind.as_str(),
            role: Some(row.role.as_str()),
            boundary_kind: row.meta_str("boundary_kind"),
            rollover_id: row.meta_str("rollover_id"),
            retracts: row.meta.get("retracts").and_then(Value::as_u64),
            rejected: row.meta.get("rejected").is_some_and(|v| !v.is_null()),
        };
        if row.seq <= self.last_seq && self.window_first_seq.is_some() {
            return false;
        }
        let opened = self.note_head(head);
        if opened {
            // The boundary names the window it sealed; a fold that starts at this
            // boundary (a reader that skips earlier windows) learns it only here.
            if let Some(prev) = row.meta_str("previous_window").and_then(|p| p.parse().ok()) {
                self.previous = Some(prev);
            }
        }
        if row.kind == RowKind::Advisory {
            self.claims = claims_of(&row.meta, self.claims);
        }
        for call in row.tool_calls() {
            match self
                .open_calls
                .iter_mut()
                .find(|c| c.call_id == call.call_id)
            {
                Some(open) => *open = call,
                None => self.open_calls.push(call),
            }
        }
        for result in row.parts_of(PartType::ToolResult) {
            let call_id = match result.get("call_id") {
                Some(Value::String(s)) => s.clone(),
                other => other.map_or_else(|| "None".to_owned(), Value::to_string),
            };
            self.open_calls.retain(|c| c.call_id != call_id);
            self.answered.insert(call_id);
            if result.get("name").and_then(Value::as_str) == Some(NEW_CONTEXT)
                && is_scheduled(result.get("output"))
            {
                self.new_context_requested = true;
            }
        }
        opened
    }

    /// The window a row of `kind` at `seq` belongs to, when rows so far were in
    /// `current`: a boundary opens the window named after its own seq.
    pub fn next_window(current: WindowId, seq: u64, kind: &str) -> WindowId {
        if kind == RowKind::Boundary.as_str() {
            WindowId(seq)
        } else {
            current
        }
    }

    /// The window of row `seq` among the rows noted: the last boundary at or before it.
    pub fn window_of(&self, seq: u64) -> WindowId {
        match self.boundaries.partition_point(|&b| b <= seq) {
            0 => WindowId::ROOT,
            i => WindowId(self.boundaries[i - 1]),
        }
    }

    fn open_window(&mut self, window: WindowId, kind: Option<BoundaryKind>) {
        self.boundaries.push(window.seq());
        self.previous = Some(self.window);
        self.window = window;
        self.window_kind = Some(kind.unwrap_or(BoundaryKind::Reset));
        self.window_first_seq = Some(window.seq());
        self.visible.clear();
        self.claims = Claims::default();
        self.open_calls.clear();
        self.answered.clear();
        self.new_context_requested = false;
        self.last_user_seq = None;
    }

    /// Raises the privacy floor to `seq` (a floor recorded outside the rows, such as
    /// the store's receipt); never lowers it.
    pub fn raise_floor(&mut self, seq: u64) {
        self.floor_seq = self.floor_seq.max(seq);
    }

    /// Counts `seq` as seen without a row (the store handed it out but no readable row
    /// carries it), so conditional writes name the store's real last seq.
    pub fn skip_to(&mut self, seq: u64) {
        self.last_seq = self.last_seq.max(seq);
    }

    /// The window new rows go to.
    pub fn window(&self) -> WindowId {
        self.window
    }

    /// How the current window was opened (`None`: the first window, `root`).
    pub fn window_kind(&self) -> Option<BoundaryKind> {
        self.window_kind
    }

    /// `root`, `rollover` or `reset`: the current window's opening, as listings name it.
    pub fn window_kind_name(&self) -> &'static str {
        self.window_kind.map_or("root", BoundaryKind::as_str)
    }

    /// The window before the current one, if any.
    pub fn previous_window(&self) -> Option<WindowId> {
        self.previous
    }

    /// Seq of the first row noted in the current window.
    pub fn window_first_seq(&self) -> Option<u64> {
        self.window_first_seq
    }

    /// The last seq noted.
    pub fn last_seq(&self) -> u64 {
        self.last_seq
    }

    /// Seq of the newest privacy floor (0: none).
    pub fn floor_seq(&self) -> u64 {
        self.floor_seq
    }

    /// Whether row `seq` was retracted (by a row this fold noted).
    pub fn is_retracted(&self, seq: u64) -> bool {
        self.retracted.contains(&seq)
    }

    /// Every retracted seq this fold noted, ascending.
    pub fn retracted(&self) -> Vec<u64> {
        let mut out: Vec<u64> = self.retracted.iter().copied().collect();
        out.sort_unstable();
        out
    }

    /// Seqs of the rows of the current window a request carries (messages, lead-ins,
    /// advisories, continuations not retracted), in order.
    pub fn visible(&self) -> impl ExactSizeIterator<Item = u64> + '_ {
        self.visible.iter().map(|&(s, _)| s)
    }

    /// Items of the current window (messages and continuations not retracted).
    pub fn item_count(&self) -> u64 {
        self.visible.iter().filter(|(_, k)| k.is_item()).count() as u64
    }

    /// Advisories published in the current window.
    pub fn claims(&self) -> Claims {
        self.claims
    }

    /// Tool calls of the current window without a result, oldest first.
    pub fn open_calls(&self) -> &[OpenCall] {
        &self.open_calls
    }

    /// Whether call `call_id` of the current window has a result.
    pub fn is_answered(&self, call_id: &str) -> bool {
        self.answered.contains(call_id)
    }

    /// Whether the model scheduled a rollover through `new_context` in this window.
    pub fn new_context_requested(&self) -> bool {
        self.new_context_requested
    }

    /// Seq of the last user message of the current window (retracted or not; see
    /// [`is_retracted`](Self::is_retracted)).
    pub fn last_user_seq(&self) -> Option<u64> {
        self.last_user_seq
    }

    /// The window a rollover with this ID opened, if one was noted.
    pub fn rollover_window(&self, rollover_id: &str) -> Option<WindowId> {
        self.rollover_ids.get(rollover_id).copied()
    }
}

/// Name of the tool whose scheduled result asks for a rollover.
pub const NEW_CONTEXT: &str = "new_context";

/// Claims plus what one advisory row's metadata publishes: its `meta.stage` (SPEC §5).
pub fn claims_of(meta: &serde_json::Map<String, Value>, claims: Claims) -> Claims {
    match meta
        .get("stage")
        .and_then(Value::as_str)
        .map(str::parse::<Action>)
    {
        Some(Ok(action)) if action.is_advisory() => claims.claim(action),
        _ => claims,
    }
}

/// Whether a `new_context` result's output says `scheduled` (an object, or JSON text of
/// one).
pub fn is_scheduled(output: Option<&Value>) -> bool {
    let status = |v: &Value| v.get("status").and_then(Value::as_str) == Some("scheduled");
    match output {
        Some(Value::String(text)) => serde_json::from_str::<Value>(text).is_ok_and(|v| status(&v)),
        Some(v) => status(v),
        None => false,
    }
}

impl WindowFold {
    /// Whether the fold has noted any row.
    pub fn is_empty(&self) -> bool {
        self.window_first_seq.is_none()
    }
}

impl WindowFold {
    /// Reads the rows appended since this fold's last seq (the current window's rows,
    /// boundary first, when it has seen none) in one store call, notes them, and returns
    /// them parsed. A fold that starts this way knows the current window and everything
    /// after; windows before it are `session_history`'s to read.
    pub fn catch_up(&mut self, store: &dyn super::Store) -> crate::store::Result<Vec<Row>> {
        let read = store.read(self.next_read())?;
        Ok(self.absorb(&read))
    }

    /// [`catch_up`](Self::catch_up) right after this writer's own append returned
    /// `appended`: the rows through that batch at least, which a store that knows them
    /// gives without reading them again ([`Store::read_after_append`]).
    ///
    /// [`Store::read_after_append`]: super::Store::read_after_append
    pub fn catch_up_after(
        &mut self,
        store: &dyn super::Store,
        appended: &crate::store::AppendResult,
    ) -> crate::store::Result<Vec<Row>> {
        let read = store.read_after_append(self.next_read(), appended)?;
        Ok(self.absorb(&read))
    }

    /// Where a catch-up reads from.
    fn next_read(&self) -> crate::store::ReadFrom {
        if self.is_empty() {
            crate::store::ReadFrom::CurrentWindow
        } else {
            crate::store::ReadFrom::Seq(self.last_seq + 1)
        }
    }

    /// Notes the rows of `read` and its floor and last seq; returns them parsed.
    fn absorb(&mut self, read: &crate::store::RowsRead) -> Vec<Row> {
        let mut rows = Vec::with_capacity(read.rows.len());
        for stored in &read.rows {
            let Some(seq) = stored.seq else { continue };
            let window = stored.window.parse().unwrap_or(self.window);
            if let Some(row) = Row::parse(seq, window, &stored.raw) {
                self.note_row(&row);
                rows.push(row);
            }
        }
        self.raise_floor(read.floor_seq);
        self.skip_to(read.last_seq);
        rows
    }
}
