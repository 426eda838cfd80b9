//! Pre-tokenizers that are a sequence of `Split` regexes no hand-written scanner covers
//! (DeepSeek V3's three splits, for one).
//!
//! HuggingFace `tokenizers` runs each split over every piece the previous one made,
//! keeping both the matches and the text between them as pieces ("Isolated"). Its
//! regex engine (Oniguruma) backtracks; `fancy-regex` has the same leftmost-first
//! semantics and the same lookaround syntax. It delegates the parts of a pattern without
//! lookaround to the `regex` crate (linear), and backtracks only where a lookahead such
//! as `\s+(?!\S)` needs it: for the patterns of these files that costs each match time
//! proportional to its own whitespace run, so a split is linear in its input. The
//! backtracking limit is lifted, so a megabyte-long run is a piece as for the original
//! rather than an error.

use fancy_regex::{Regex, RegexBuilder};

/// One pre-tokenizer: split regexes applied in order.
pub(crate) struct RegexSplits {
    patterns: Vec<Regex>,
}

impl std::fmt::Debug for RegexSplits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.patterns.iter().map(Regex::as_str))
            .finish()
    }
}

impl RegexSplits {
    /// Compiles `patterns`; the error names the pattern that does not compile.
    pub(crate) fn new(patterns: &[String]) -> Result<RegexSplits, String> {
        let patterns = patterns
            .iter()
            .map(|p| {
                RegexBuilder::new(p)
                    .backtrack_limit(usize::MAX)
                    .build()
                    .map_err(|e| format!("split regex {p:?} does not compile: {e}"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(RegexSplits { patterns })
    }

    /// Calls `piece` with every piece of `text`, in order.
    pub(crate) fn for_each_piece(&self, text: &str, piece: &mut impl FnMut(&[u8])) {
        self.split(0, text, piece);
    }

    fn split(&self, level: usize, text: &str, piece: &mut impl FnMut(&[u8])) {
        let Some(regex) = self.patterns.get(level) else {
            if !text.is_empty() {
                piece(text.as_bytes());
            }
            return;
        };
        let mut last = 0;
        for found in regex.find_iter(text) {
            // Matching can only fail on the backtracking limit, which is lifted; should
            // it fail anyway, the rest of the text stays one piece of this level.
            let Ok(found) = found else { break };
            if found.start() > last {
                self.split(level + 1, &text[last..found.start()], piece);
            }
            if found.end() > found.start() {
                self.split(level + 1, found.as_str(), piece);
            }
            last = found.end();
        }
        if last < text.len() {
            self.split(level + 1, &text[last..], piece);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(splits: &RegexSplits, text: &str) -> Vec<String> {
        let mut out = Vec::new();
        splits.for_each_piece(text, &mut |p| {
            out.push(String::from_utf8_lossy(p).into_owned());
        });
        out
    }

    #[test]
    fn splits_apply_in_sequence_and_keep_the_gaps() {
        let splits = RegexSplits::new(&[r"\p{N}{1,3}".to_owned(), r"\s+(?!\S)|\s+".to_owned()])
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            pieces(&splits, "ab12345  cd"),
            ["ab", "123", "45", " ", " ", "cd"]
        );
    }

    #[test]
    fn a_megabyte_run_is_one_piece() {
        let splits =
            RegexSplits::new(&[r"\s+(?!\S)|\s+".to_owned()]).unwrap_or_else(|e| panic!("{e}"));
        let text = " ".repeat(1 << 20);
        assert_eq!(pieces(&splits, &text).len(), 1);
    }

    #[test]
    fn bad_patterns_are_named() {
        let err = RegexSplits::new(&["(".to_owned()])
            .err()
            .unwrap_or_default();
        assert!(err.contains("\"(\""), "{err}");
    }
}
