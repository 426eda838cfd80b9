//! Which rows a prune removes: whole sealed windows, from the oldest on. One rule for
//! both stores; each store removes the rows below the cut under its own lock.
//!
//! A window is sealed once a later window has opened (a rollover or a soft clear); the
//! current window is never pruned. Windows are named after the seq of the row that
//! opened them (`w:<seq>`), and a cut always falls on such a row, so the windows kept
//! keep their names and seqs: only cursors fail (the store's epoch changes).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::Store;
use crate::store::{PruneReport, ReadFrom, Result, StoreError, StoredRow};

/// What to prune. Criteria combine: the cut is the furthest any of them reaches.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PruneSpec {
    /// Keep at most this many sealed windows (the newest); the current one is always
    /// kept. `Some(0)` removes every sealed window.
    pub keep_windows: Option<usize>,
    /// Remove sealed windows whose newest row is older than this. A window with a row
    /// of unknown time (no readable `ts`) ends the run: it and the windows after it stay.
    pub older_than: Option<Duration>,
    /// Remove everything below the privacy floor (the soft clear's window and what
    /// follows stay): a soft clear followed by a purge.
    pub below_floor: bool,
}

impl PruneSpec {
    /// True when no criterion is set (a prune would remove nothing).
    pub fn is_empty(&self) -> bool {
        self.keep_windows.is_none() && self.older_than.is_none() && !self.below_floor
    }
}

/// Every store's prune by `spec`: refuses a spec without a criterion, reads every row
/// and the privacy floor in one cut, and asks [`prune_cut`] where to cut. `remove`
/// removes the rows below the cut (given with the floor read), the store's own job;
/// when nothing is cut, the report names the floor and the first seq still stored as
/// the store knows it (`kept_from`, from the rows read).
pub(crate) fn prune_with(
    store: &(impl Store + ?Sized),
    spec: &PruneSpec,
    remove: impl FnOnce(u64, u64) -> Result<PruneReport>,
    kept_from: impl FnOnce(&[StoredRow]) -> Result<u64>,
) -> Result<PruneReport> {
    if spec.is_empty() {
        return Err(StoreError::InvalidArgument(
            "a prune needs a criterion: keep_windows, older_than or below_floor".into(),
        ));
    }
    let read = store.read(ReadFrom::Seq(0))?;
    match prune_cut(&read.rows, read.floor_seq, spec, SystemTime::now()) {
        Some(cut) => remove(cut, read.floor_seq),
        None => Ok(PruneReport {
            kept_from: kept_from(&read.rows)?,
            floor_seq: read.floor_seq,
            ..PruneReport::default()
        }),
    }
}

/// One window as the prune rule sees it.
struct Span {
    first_seq: u64,
    /// Time of its newest row, if every row's time could be read.
    newest: Option<SystemTime>,
}

/// The first seq a prune by `spec` keeps (rows below it go), given the rows still
/// stored (`rows`, in seq order, with their windows) and the privacy floor; `None` when
/// it removes nothing. Never beyond the current window's first row.
pub fn prune_cut(
    rows: &[StoredRow],
    floor_seq: u64,
    spec: &PruneSpec,
    now: SystemTime,
) -> Option<u64> {
    let spans = spans(rows);
    let (current, sealed) = spans.split_last()?;
    let first_kept = spans.first()?.first_seq;
    let mut cut = first_kept;
    if let Some(keep) = spec.keep_windows {
        if sealed.len() > keep {
            let at = sealed.len() - keep;
            cut = cut.max(spans[at].first_seq);
        }
    }
    if let Some(age) = spec.older_than {
        let limit = now.checked_sub(age).unwrap_or(UNIX_EPOCH);
        let old = sealed
            .iter()
            .take_while(|s| s.newest.is_some_and(|t| t < limit))
            .count();
        cut = cut.max(spans[old].first_seq);
    }
    if spec.below_floor && floor_seq > 0 {
        // The window holding the floor (a soft clear opens its own, so this is the floor
        // itself); a floor recorded between boundaries keeps its whole window.
        let holding = spans
            .iter()
            .rev()
            .find(|s| s.first_seq <= floor_seq)
            .map_or(first_kept, |s| s.first_seq);
        cut = cut.max(holding);
    }
    let cut = cut.min(current.first_seq);
    (cut > first_kept).then_some(cut)
}

/// The windows of `rows` in order, with their first seq and newest row's time.
fn spans(rows: &[StoredRow]) -> Vec<Span> {
    let mut spans: Vec<Span> = Vec::new();
    let mut window: Option<&str> = None;
    for row in rows {
        let Some(seq) = row.seq else { continue };
        let ts = row_time(&row.raw);
        if window != Some(row.window.as_str()) {
            window = Some(row.window.as_str());
            spans.push(Span {
                first_seq: seq,
                newest: ts,
            });
        } else if let Some(span) = spans.last_mut() {
            span.newest = match (span.newest, ts) {
                (Some(a), Some(b)) => Some(a.max(b)),
                _ => None,
            };
        }
    }
    spans
}

/// The `ts` of a stored row (`YYYY-MM-DDTHH:MM:SS[.fff]Z`, as the store writes it).
fn row_time(raw: &[u8]) -> Option<SystemTime> {
    #[derive(serde::Deserialize)]
    struct Ts<'a> {
        #[serde(borrow)]
        ts: Option<&'a str>,
    }
    let ts: Ts<'_> = serde_json::from_slice(raw).ok()?;
    parse_rfc3339_utc(ts.ts?)
}

/// Parses `YYYY-MM-DDTHH:MM:SS[.fraction]Z`.
fn parse_rfc3339_utc(s: &str) -> Option<SystemTime> {
    let b = s.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || !s.ends_with('Z') {
        return None;
    }
    let num = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
    let (y, m, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hh, mm, ss) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) || hh > 23 || mm > 59 || ss > 60 {
        return None;
    }
    let millis = match s.get(19..s.len() - 1)? {
        "" => 0,
        f if f.starts_with('.') && f.len() > 1 => {
            let digits: String = f[1..].chars().take(3).collect();
            let scale = 10i64.pow(3 - digits.len() as u32);
            digits.parse::<i64>().ok()? * scale
        }
        _ => return None,
    };
    let days = days_from_civil(y, m, d);
    let secs = days * 86_400 + hh * 3_600 + mm * 60 + ss;
    let secs = u64::try_from(secs).ok()?;
    Some(UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_millis(millis as u64))
}

/// Days since 1970-01-01 of a Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(seq: u64, window: &str, ts: &str) -> StoredRow {
        StoredRow {
            seq: Some(seq),
            window: window.to_owned(),
            raw: format!(r#"{{"seq":{seq},"ts":"{ts}"}}"#).into_bytes(),
        }
    }

    fn at(ts: &str) -> SystemTime {
        parse_rfc3339_utc(ts).unwrap_or(UNIX_EPOCH)
    }

    fn rows() -> Vec<StoredRow> {
        vec![
            row(1, "w:0", "2026-01-01T00:00:00.000Z"),
            row(2, "w:0", "2026-01-02T00:00:00.000Z"),
            row(3, "w:3", "2026-02-01T00:00:00.000Z"),
            row(4, "w:4", "2026-03-01T00:00:00.000Z"),
            row(5, "w:4", "2026-03-02T00:00:00.000Z"),
            row(6, "w:6", "2026-04-01T00:00:00.000Z"),
        ]
    }

    #[test]
    fn parses_the_stores_timestamps() {
        let t = at("1970-01-02T00:00:01.500Z");
        assert_eq!(t, UNIX_EPOCH + Duration::from_millis(86_401_500));
        assert_eq!(
            at("2000-03-01T00:00:00Z"),
            UNIX_EPOCH + Duration::from_secs(951_868_800)
        );
        assert!(parse_rfc3339_utc("2000-03-01 00:00:00Z").is_none());
        assert!(parse_rfc3339_utc("2000-13-01T00:00:00Z").is_none());
    }

    #[test]
    fn keeps_the_newest_sealed_windows_and_always_the_current_one() {
        let now = at("2026-05-01T00:00:00Z");
        let keep = |n| PruneSpec {
            keep_windows: Some(n),
            ..PruneSpec::default()
        };
        assert_eq!(prune_cut(&rows(), 0, &keep(3), now), None);
        assert_eq!(prune_cut(&rows(), 0, &keep(2), now), Some(3));
        assert_eq!(prune_cut(&rows(), 0, &keep(1), now), Some(4));
        assert_eq!(prune_cut(&rows(), 0, &keep(0), now), Some(6));
        // Already pruned to w:4: nothing more for keep(1).
        assert_eq!(prune_cut(&rows()[3..], 0, &keep(1), now), None);
    }

    #[test]
    fn prunes_by_age_up_to_the_first_window_with_a_newer_or_unknown_row() {
        let now = at("2026-03-15T00:00:00Z");
        let older = |days: u64| PruneSpec {
            older_than: Some(Duration::from_secs(days * 86_400)),
            ..PruneSpec::default()
        };
        assert_eq!(prune_cut(&rows(), 0, &older(10), now), Some(6));
        assert_eq!(prune_cut(&rows(), 0, &older(30), now), Some(4));
        assert_eq!(prune_cut(&rows(), 0, &older(60), now), Some(3));
        assert_eq!(prune_cut(&rows(), 0, &older(100), now), None);
        let mut unknown = rows();
        unknown[2].raw = b"{\"seq\":3}".to_vec();
        assert_eq!(prune_cut(&unknown, 0, &older(10), now), Some(3));
    }

    #[test]
    fn purges_below_the_floor_but_never_the_current_window() {
        let now = at("2026-05-01T00:00:00Z");
        let purge = PruneSpec {
            below_floor: true,
            ..PruneSpec::default()
        };
        assert_eq!(prune_cut(&rows(), 4, &purge, now), Some(4));
        assert_eq!(prune_cut(&rows(), 5, &purge, now), Some(4));
        assert_eq!(prune_cut(&rows(), 0, &purge, now), None);
        assert_eq!(prune_cut(&rows(), 9, &purge, now), Some(6));
        assert_eq!(prune_cut(&[], 9, &purge, now), None);
    }
}
