//! What a `tokenizer.json` does to text before its pre-tokenizer: it cuts out its added
//! tokens (special ones included: `<|im_start|>` in a rendered chat is one token) and
//! normalizes the text between them.
//!
//! The order is HuggingFace's: added tokens marked `normalized: false` are found in
//! the raw text, the stretches between them are normalized, and tokens marked
//! `normalized: true` are then found in the normalized stretches. Matching is
//! leftmost-longest, as there; `lstrip`/`rstrip` tokens take the whitespace beside them,
//! and `single_word` ones match only between non-word characters.

use std::borrow::Cow;

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use unicode_normalization_alignments::UnicodeNormalization;

/// A Unicode normalization form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Form {
    /// Canonical composition.
    Nfc,
    /// Canonical decomposition.
    Nfd,
    /// Compatibility composition.
    Nfkc,
    /// Compatibility decomposition.
    Nfkd,
}

/// How one added token matches.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct AddedToken {
    /// Takes the whitespace before it.
    pub(crate) lstrip: bool,
    /// Takes the whitespace after it.
    pub(crate) rstrip: bool,
    /// Matches only where no word character touches it.
    pub(crate) single_word: bool,
    /// Matched in normalized text rather than raw text.
    pub(crate) normalized: bool,
}

/// Added tokens of one matching pass.
struct Pass {
    automaton: AhoCorasick,
    tokens: Vec<AddedToken>,
}

impl Pass {
    fn new(tokens: Vec<(String, AddedToken)>) -> Result<Option<Pass>, String> {
        if tokens.is_empty() {
            return Ok(None);
        }
        let automaton = AhoCorasickBuilder::new()
            .match_kind(MatchKind::LeftmostLongest)
            .build(tokens.iter().map(|(content, _)| content))
            .map_err(|e| format!("added tokens: {e}"))?;
        Ok(Some(Pass {
            automaton,
            tokens: tokens.into_iter().map(|(_, t)| t).collect(),
        }))
    }

    /// Calls `gap` with each stretch between added tokens and returns how many added
    /// tokens `text` holds.
    fn split(&self, text: &str, gap: &mut impl FnMut(&str) -> usize) -> usize {
        let mut total = 0;
        let mut last = 0;
        for found in self.automaton.find_iter(text) {
            let token = self.tokens[found.pattern().as_usize()];
            let (mut start, mut end) = (found.start(), found.end());
            if found.start() < last {
                continue; // inside the whitespace an `rstrip` token took
            }
            if token.single_word && !self.alone(text, start, end) {
                continue;
            }
            if token.lstrip {
                start = last + text[last..start].trim_end().len();
            }
            if token.rstrip {
                end = text.len() - text[end..].trim_start().len();
            }
            if start > last {
                total += gap(&text[last..start]);
            }
            total += 1;
            last = end;
        }
        if last < text.len() {
            total += gap(&text[last..]);
        }
        total
    }

    fn alone(&self, text: &str, start: usize, end: usize) -> bool {
        let word = |c: char| c.is_alphanumeric() || c == '_';
        !text[..start].chars().next_back().is_some_and(word)
            && !text[end..].chars().next().is_some_and(word)
    }
}

/// Added tokens and normalizers of one tokenizer.
pub(crate) struct TextRules {
    raw: Option<Pass>,
    normalized: Option<Pass>,
    forms: Vec<Form>,
}

impl TextRules {
    /// Rules from the added tokens (`content`, how it matches) and the normalization
    /// forms, applied in order.
    pub(crate) fn new(
        added: Vec<(String, AddedToken)>,
        forms: Vec<Form>,
    ) -> Result<TextRules, String> {
        let (normalized, raw): (Vec<_>, Vec<_>) = added
            .into_iter()
            .filter(|(content, _)| !content.is_empty())
            .partition(|(_, t)| t.normalized);
        Ok(TextRules {
            raw: Pass::new(raw)?,
            normalized: Pass::new(normalized)?,
            forms,
        })
    }

    /// Whether the rules change nothing (no added tokens, no normalizer).
    pub(crate) fn is_empty(&self) -> bool {
        self.raw.is_none() && self.normalized.is_none() && self.forms.is_empty()
    }

    /// Tokens of `text`: its added tokens, plus what `count` says of each normalized
    /// stretch between them.
    pub(crate) fn count(&self, text: &str, count: &mut impl FnMut(&str) -> usize) -> usize {
        let mut normalized_gap = |gap: &str| -> usize {
            let gap = self.normalize(gap);
            match &self.normalized {
                Some(pass) => pass.split(&gap, count),
                None => count(&gap),
            }
        };
        match &self.raw {
            Some(pass) => pass.split(text, &mut normalized_gap),
            None => normalized_gap(text),
        }
    }

    fn normalize<'t>(&self, text: &'t str) -> Cow<'t, str> {
        let mut out = Cow::Borrowed(text);
        for form in &self.forms {
            // Most text is already in every form: check quickly before rebuilding it.
            // HuggingFace's own normalizer crate (its Unicode version decides what
            // happens to characters assigned since). ASCII is in every form.
            if out.is_ascii() {
                continue;
            }
            use unicode_normalization_alignments as un;
            let done = match form {
                Form::Nfc => un::is_nfc_quick(out.chars()),
                Form::Nfd => un::is_nfd_quick(out.chars()),
                Form::Nfkc => un::is_nfkc_quick(out.chars()),
                Form::Nfkd => un::is_nfkd_quick(out.chars()),
            } == un::IsNormalized::Yes;
            if done {
                continue;
            }
            let text: &str = &out;
            let normalized: String = match form {
                Form::Nfc => text.nfc().map(|(c, _)| c).collect(),
                Form::Nfd => text.nfd().map(|(c, _)| c).collect(),
                Form::Nfkc => text.nfkc().map(|(c, _)| c).collect(),
                Form::Nfkd => text.nfkd().map(|(c, _)| c).collect(),
            };
            out = Cow::Owned(normalized);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(tokens: &[(&str, AddedToken)], forms: Vec<Form>) -> TextRules {
        let added = tokens.iter().map(|(c, t)| ((*c).to_owned(), *t)).collect();
        TextRules::new(added, forms).unwrap_or_else(|e| panic!("{e}"))
    }

    fn gaps(rules: &TextRules, text: &str) -> (usize, Vec<String>) {
        let mut seen = Vec::new();
        let n = rules.count(text, &mut |g| {
            seen.push(g.to_owned());
            0
        });
        (n, seen)
    }

    #[test]
    fn added_tokens_are_cut_out_longest_first() {
        let plain = AddedToken::default();
        let r = rules(&[("<a>", plain), ("<a><b>", plain)], vec![]);
        assert_eq!(gaps(&r, "x<a><b>y<a>"), (2, vec!["x".into(), "y".into()]));
    }

    #[test]
    fn strip_flags_take_the_whitespace() {
        let l = AddedToken {
            lstrip: true,
            ..AddedToken::default()
        };
        let r_ = AddedToken {
            rstrip: true,
            ..AddedToken::default()
        };
        let r = rules(&[("<l>", l), ("<r>", r_)], vec![]);
        assert_eq!(gaps(&r, "a  <l> b"), (1, vec!["a".into(), " b".into()]));
        assert_eq!(gaps(&r, "a <r>  b"), (1, vec!["a ".into(), "b".into()]));
    }

    #[test]
    fn single_word_tokens_need_non_word_neighbours() {
        let w = AddedToken {
            single_word: true,
            ..AddedToken::default()
        };
        let r = rules(&[("cat", w)], vec![]);
        assert_eq!(gaps(&r, "a cat"), (1, vec!["a ".into()]));
        assert_eq!(gaps(&r, "cats").0, 0);
    }

    /// HuggingFace normalizes with Unicode 9's tables: a character assigned since
    /// (U+209F, a subscript letter of Unicode 16) is left as it is, as there.
    #[test]
    fn normalization_uses_huggingface_unicode_version() {
        let r = rules(&[], vec![Form::Nfkc]);
        assert_eq!(gaps(&r, "x\u{209f}").1, ["x\u{209f}"]);
    }

    #[test]
    fn stretches_are_normalized() {
        let r = rules(&[], vec![Form::Nfkc]);
        assert_eq!(gaps(&r, "ﬁ").1, ["fi"]);
        let r = rules(&[], vec![Form::Nfc]);
        assert_eq!(gaps(&r, "e\u{301}").1, ["é"]);
    }
}
