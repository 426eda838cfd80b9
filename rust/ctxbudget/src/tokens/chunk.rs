//! Cutting long text into chunks without changing its token count.
//!
//! A cut at an *exact pre-token boundary* — a point where the encoding's regex always
//! starts a new piece, whatever follows — splits the pre-tokenization into two
//! independent halves, so counting the chunks separately gives the same total. Where no
//! such point exists within the bound (a megabyte of spaces, one enormous word), the
//! chunk runs on to the next one: text is never cut anywhere else, so chunking never
//! changes a count.

use super::pretokenize::Family;
use super::unicode::{class_at, len_before};

/// The default chunk bound: none. The pre-tokenizer and the mergers are linear on any
/// text, so counting needs no chunks; the bound exists for tests (see
/// `Encoding::with_chunk_bytes`), which check that chunking never changes a count.
pub(crate) const CHUNK_BYTES: usize = usize::MAX;

/// How far past a newline we look for the end of its whitespace run.
const NEWLINE_LOOKAHEAD: usize = 64;

/// Where the chunk that starts at `start` ends: an exact boundary or the end of text.
///
/// Exact boundaries are searched backwards from `start + max` down to `start + max / 2`,
/// then forwards from `start + max`, so every chunk advances by at least half the bound
/// and each byte is looked at a bounded number of times: the search is linear overall.
pub(crate) fn next_cut(family: Family, text: &[u8], start: usize, max: usize) -> usize {
    let limit = start.saturating_add(max);
    if limit >= text.len() {
        return text.len();
    }
    let floor = start + max / 2;
    let mut p = limit;
    while p > floor {
        if is_exact_boundary(family, text, p) {
            return p;
        }
        p -= 1;
    }
    (limit + 1..text.len())
        .find(|&p| is_exact_boundary(family, text, p))
        .unwrap_or(text.len())
}

/// Bytes a segment of the count cache spans at least, unless the text ends first
/// (see [`segment_end`]).
pub(crate) const SEGMENT_MIN_BYTES: usize = 1024;

/// How far past [`SEGMENT_MIN_BYTES`] a segment looks for a line start before it
/// takes any exact boundary.
const SEGMENT_LINE_WINDOW: usize = 1024;

/// Where the segment of the count cache that starts at `start` ends: an exact
/// pre-token boundary at least [`SEGMENT_MIN_BYTES`] on, or the end of the text.
///
/// The start of a line comes first (the first one past the minimum within
/// [`SEGMENT_LINE_WINDOW`]): lines keep their place whatever was edited before them,
/// so the segments of a text that grew or changed line up with those of the text
/// counted before, and are found in the cache. Without one, the first exact boundary
/// of any kind (a space after a word). Each byte is searched at most twice plus the
/// window per segment, and `memchr` does the searching: cheap beside counting.
pub(crate) fn segment_end(family: Family, text: &[u8], start: usize) -> usize {
    let from = start + SEGMENT_MIN_BYTES;
    if from >= text.len() {
        return text.len();
    }
    let window = (from + SEGMENT_LINE_WINDOW).min(text.len());
    for newline in memchr::memchr_iter(b'\n', &text[from..window]) {
        let p = from + newline + 1;
        if p >= text.len() {
            return text.len();
        }
        if is_exact_boundary(family, text, p) {
            return p;
        }
    }
    let mut q = from;
    while let Some(hit) = memchr::memchr2(b' ', b'\n', &text[q..]) {
        let at = q + hit;
        let byte = text[at];
        let p = if byte == b' ' { at } else { at + 1 };
        if p >= text.len() {
            return text.len();
        }
        if is_exact_boundary(family, text, p) {
            return p;
        }
        // Within a run of spaces or newlines (a megabyte of them) no position is an
        // exact boundary but the one after the run's last newline: step over the run
        // instead of checking each byte.
        q = at + 1;
        while text.get(q) == Some(&byte) {
            q += 1;
        }
        if byte == b'\n' && q > at + 1 && q < text.len() && is_exact_boundary(family, text, q) {
            return q;
        }
    }
    text.len()
}

/// Whether a new piece always starts at byte `p` (`0 < p < text.len()`).
///
/// Two rules, each checked against every alternative of the patterns in
/// `pretokenize.rs`:
/// - an ASCII space right after printable, non-space ASCII: no piece runs from a
///   non-space character into a following space, and `?`-prefixed pieces start there;
/// - right after the last `\r`/`\n` of a whitespace run that is followed by a
///   non-whitespace character (o200k: not `/`, which its punctuation pieces swallow
///   after newlines). For the GPT-2 pattern, whose `\s+(?!\S)` leaves a newline's
///   preceding whitespace attached, only a lone newline after non-whitespace counts.
///
/// DeepSeek's splits have rules of their own ([`super::deepseek::is_exact_boundary`]);
/// a [`Family::Regex`] (any other split regexes) has none: its text is never cut.
pub(crate) fn is_exact_boundary(family: Family, text: &[u8], p: usize) -> bool {
    match family {
        Family::Regex(_) => return false,
        Family::DeepSeek => return super::deepseek::is_exact_boundary(text, p),
        _ => {}
    }
    let before = text[p - 1];
    if text[p] == b' ' && (0x21..=0x7E).contains(&before) {
        return true;
    }
    if before != b'\n' && before != b'\r' {
        return false;
    }
    match family {
        Family::Cl100k | Family::Llama3 | Family::Qwen2 | Family::O200k | Family::Tekken => {
            let stop = (p + NEWLINE_LOOKAHEAD).min(text.len());
            let mut q = p;
            while q < stop {
                // Indentation, the common case, without a class lookup per byte.
                if matches!(text[q], b' ' | b'\t') {
                    q += 1;
                    continue;
                }
                let (class, len) = class_at(text, q);
                if !class.is_space() {
                    let slash_joins = matches!(family, Family::O200k | Family::Tekken);
                    return !(slash_joins && q == p && text[q] == b'/');
                }
                if text[q] == b'\n' || text[q] == b'\r' {
                    return false;
                }
                q += len;
            }
            false
        }
        Family::Regex(_) | Family::DeepSeek => false,
        Family::Gpt2 => {
            let lone = p == 1 || !class_at(text, p - 1 - len_before(text, p - 1)).0.is_space();
            lone && !class_at(text, p).0.is_space()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn space_after_word_is_exact() {
        let t = b"hello world";
        for f in [Family::Gpt2, Family::Cl100k, Family::O200k] {
            assert!(is_exact_boundary(f, t, 5));
            assert!(!is_exact_boundary(f, t, 3));
        }
    }

    #[test]
    fn newline_rules_differ_by_family() {
        let t = b"a\n  b";
        assert!(is_exact_boundary(Family::Cl100k, t, 2));
        assert!(is_exact_boundary(Family::O200k, t, 2));
        assert!(!is_exact_boundary(Family::Gpt2, t, 2));
        let slash = b"!\n/x";
        assert!(!is_exact_boundary(Family::O200k, slash, 2));
        assert!(is_exact_boundary(Family::Cl100k, slash, 2));
        let trailing = b"a\n   ";
        assert!(!is_exact_boundary(Family::Cl100k, trailing, 2));
    }

    #[test]
    fn without_a_boundary_the_chunk_runs_on() {
        let text = format!("{}x yz", "中".repeat(100));
        let p = next_cut(Family::O200k, text.as_bytes(), 0, 32);
        assert_eq!(p, 301);
        assert_eq!(
            next_cut(Family::O200k, "中".repeat(100).as_bytes(), 0, 32),
            300
        );
    }

    #[test]
    fn segments_end_at_line_starts_else_at_any_exact_boundary() {
        let code = "x = 1\n".repeat(SEGMENT_MIN_BYTES / 6 + 100);
        let end = segment_end(Family::O200k, code.as_bytes(), 0);
        assert!(end >= SEGMENT_MIN_BYTES && end.is_multiple_of(6), "{end}");
        let prose = "word ".repeat(SEGMENT_MIN_BYTES / 5 + 100);
        let end = segment_end(Family::O200k, prose.as_bytes(), 0);
        assert_eq!(end, SEGMENT_MIN_BYTES + 4 - SEGMENT_MIN_BYTES % 5);
        assert_eq!(prose.as_bytes()[end], b' ');
        let spaces = format!("x{}\n\n\ny {}", " ".repeat(5_000), "\n".repeat(5_000));
        assert_eq!(segment_end(Family::O200k, spaces.as_bytes(), 0), 5_004);
        let run = "a".repeat(5_000);
        assert_eq!(segment_end(Family::O200k, run.as_bytes(), 0), 5_000);
        assert_eq!(segment_end(Family::Cl100k, b"short", 0), 5);
    }

    #[test]
    fn exact_cut_within_the_bound_comes_first() {
        let text = "word ".repeat(40);
        let p = next_cut(Family::Cl100k, text.as_bytes(), 0, 64);
        assert!(p <= 64);
        assert_eq!(text.as_bytes()[p], b' ');
    }
}
