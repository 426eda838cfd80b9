//! SentencePiece models (`tokenizer.model`: Llama 2, Mistral v1–v3, Gemma, T5 and the
//! like), counted as the `sentencepiece` library encodes: its normalizer, then its BPE
//! merge or its Unigram Viterbi search, then its treatment of unknown characters (byte
//! fallback writes each as its UTF-8 bytes; otherwise a run of them is one piece).

mod bpe;
mod normalize;
mod proto;
mod trie;
mod unigram;

use rustc_hash::FxHashMap;

use proto::{ModelType, PieceType};
use trie::Trie;

/// What counting needs to know of a piece.
#[derive(Clone, Copy)]
struct Piece {
    score: f32,
    kind: PieceType,
}

/// A SentencePiece model read from its file.
pub(crate) struct Model {
    kind: ModelType,
    /// Pieces text can produce (normal, user-defined and unused ones), by their bytes.
    pieces: FxHashMap<Box<[u8]>, Piece>,
    /// The same pieces by their bytes, with their index into `scores` (Unigram only).
    lattice: Trie,
    /// Scores and kinds, by the value `lattice` holds.
    by_value: Vec<Piece>,
    /// User-defined symbols: one piece wherever they appear, never normalized.
    user: Trie,
    normalizer: normalize::Normalizer,
    byte_fallback: bool,
    /// Lowest and highest score of normal pieces (Unigram: unknown characters score
    /// the lowest minus 10; user-defined symbols get the highest per byte).
    min_score: f32,
    max_score: f32,
    /// Whether BPE may merge each word apart: no piece joins a character to a
    /// following space mark, so no merge crosses the start of a word.
    word_parts: bool,
}

/// Counts pieces as `sentencepiece` emits them.
struct Tally {
    tokens: usize,
    prev_unknown: bool,
    byte_fallback: bool,
}

impl Tally {
    /// One piece of `len` bytes, unknown or not.
    #[inline]
    fn piece(&mut self, len: usize, unknown: bool) {
        if !unknown {
            self.tokens += 1;
        } else if self.byte_fallback {
            self.tokens += len;
        } else if !self.prev_unknown {
            // A run of unknown pieces is emitted as one.
            self.tokens += 1;
        }
        self.prev_unknown = unknown;
    }
}

/// Whether a file's first bytes look like a serialized `ModelProto`: a `pieces`
/// field (number 1, length-delimited) holding a piece's text (field 1 again).
pub(crate) fn looks_like_model(data: &[u8]) -> bool {
    data.first() == Some(&0x0a) && data.iter().skip(1).take(5).any(|&b| b == 0x0a)
}

impl Model {
    /// Reads a serialized `ModelProto` (the bytes of a `tokenizer.model` file).
    pub(crate) fn parse(data: &[u8]) -> Result<Model, String> {
        let model =
            proto::parse(data).map_err(|e| format!("not a SentencePiece model file ({e})"))?;
        match model.model_type {
            ModelType::Bpe | ModelType::Unigram => {}
            other => {
                return Err(format!(
                "its model type is {other:?}: only BPE and Unigram SentencePiece models are read"
            ))
            }
        }
        if model.pieces.is_empty() {
            return Err("a SentencePiece model without pieces".to_owned());
        }
        if !model.pieces.iter().any(|p| p.kind == PieceType::Unknown) {
            return Err("a SentencePiece model without an unknown piece".to_owned());
        }
        let normalizer = normalize::Normalizer::new(&model)?;
        let mut pieces: FxHashMap<Box<[u8]>, Piece> = FxHashMap::default();
        let mut by_value = Vec::new();
        let mut user_keys = Vec::new();
        let (mut min_score, mut max_score) = (f32::MAX, f32::MIN_POSITIVE);
        for p in &model.pieces {
            if p.piece.is_empty() {
                return Err("a piece is empty".to_owned());
            }
            if p.kind == PieceType::Normal {
                min_score = min_score.min(p.score);
                max_score = max_score.max(p.score);
            }
            if !matches!(
                p.kind,
                PieceType::Normal | PieceType::UserDefined | PieceType::Unused
            ) {
                continue;
            }
            if p.kind == PieceType::UserDefined {
                user_keys.push(p.piece);
            }
            let piece = Piece {
                score: p.score,
                kind: p.kind,
            };
            // The first of two equal pieces is the one sentencepiece keeps (it
            // refuses such files; so does this reader).
            if pieces.insert(p.piece.into(), piece).is_some() {
                return Err(format!(
                    "the piece {:?} is defined twice",
                    String::from_utf8_lossy(p.piece)
                ));
            }
            by_value.push(piece);
        }
        let lattice = if model.model_type == ModelType::Unigram {
            let mut value = 0u32;
            Trie::new(
                model
                    .pieces
                    .iter()
                    .filter(|p| {
                        matches!(
                            p.kind,
                            PieceType::Normal | PieceType::UserDefined | PieceType::Unused
                        )
                    })
                    .map(|p| {
                        value += 1;
                        (p.piece, value - 1)
                    }),
            )
        } else {
            Trie::new(std::iter::empty())
        };
        // Unused pieces are given back as the parts last seen forming them anywhere in
        // the text, so a text with any is merged whole.
        let word_parts = !pieces
            .iter()
            .any(|(piece, p)| p.kind == PieceType::Unused || joins_a_character_to_a_space(piece));
        Ok(Model {
            kind: model.model_type,
            pieces,
            lattice,
            by_value,
            user: Trie::new(user_keys.into_iter().map(|k| (k, 0))),
            normalizer,
            byte_fallback: model.byte_fallback,
            min_score,
            max_score,
            word_parts,
        })
    }

    /// Number of pieces `sentencepiece` encodes `text` into (`encode(text)`: no
    /// `<s>` or `</s>`).
    pub(crate) fn count(&self, text: &str) -> usize {
        let mut normalized = Vec::with_capacity(text.len() + 8);
        self.normalizer.normalize(text, &self.user, &mut normalized);
        let mut tally = Tally {
            tokens: 0,
            prev_unknown: false,
            byte_fallback: self.byte_fallback,
        };
        match self.kind {
            ModelType::Unigram => unigram::encode(self, &normalized, &mut tally),
            _ => bpe::encode(self, &normalized, &mut tally),
        }
        tally.tokens
    }
}

/// Whether `piece` holds a character other than the space mark followed by the mark.
fn joins_a_character_to_a_space(piece: &[u8]) -> bool {
    let mark = normalize::SPACE_MARK;
    let mut i = 0;
    let mut prev_is_other = false;
    while i < piece.len() {
        if piece[i..].starts_with(mark) {
            if prev_is_other {
                return true;
            }
            prev_is_other = false;
            i += mark.len();
        } else {
            prev_is_other = true;
            i += normalize::one_char_len(piece[i]).min(piece.len() - i);
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Appends a varint.
    fn varint(out: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }

    /// Appends a length-delimited field.
    fn bytes(out: &mut Vec<u8>, field: u64, data: &[u8]) {
        varint(out, field << 3 | 2);
        varint(out, data.len() as u64);
        out.extend_from_slice(data);
    }

    /// Appends a varint field.
    fn number(out: &mut Vec<u8>, field: u64, v: u64) {
        varint(out, field << 3);
        varint(out, v);
    }

    /// A model file: `pieces` (text, score, type), model type 1 (Unigram) or 2 (BPE),
    /// byte fallback, and whether extra spaces are removed.
    fn model(pieces: &[(&str, f32, u64)], kind: u64, byte_fallback: bool, trim: bool) -> Model {
        let mut file = Vec::new();
        let mut all: Vec<(String, f32, u64)> = vec![("<unk>".to_owned(), 0.0, 2)];
        if byte_fallback {
            all.extend((0..=255u8).map(|b| (format!("<0x{b:02X}>"), 0.0, 6)));
        }
        all.extend(pieces.iter().map(|&(p, s, t)| (p.to_owned(), s, t)));
        for (piece, score, kind) in &all {
            let mut p = Vec::new();
            bytes(&mut p, 1, piece.as_bytes());
            varint(&mut p, 2 << 3 | 5);
            p.extend_from_slice(&score.to_bits().to_le_bytes());
            number(&mut p, 3, *kind);
            bytes(&mut file, 1, &p);
        }
        let mut trainer = Vec::new();
        number(&mut trainer, 3, kind);
        number(&mut trainer, 35, u64::from(byte_fallback));
        bytes(&mut file, 2, &trainer);
        let mut normalizer = Vec::new();
        bytes(&mut normalizer, 1, b"identity");
        number(&mut normalizer, 4, u64::from(trim));
        bytes(&mut file, 3, &normalizer);
        assert!(looks_like_model(&file));
        Model::parse(&file).unwrap_or_else(|e| panic!("{e}"))
    }

    const NORMAL: u64 = 1;
    const USER: u64 = 4;
    const UNUSED: u64 = 5;

    fn letters() -> Vec<(&'static str, f32, u64)> {
        ["▁", "a", "b", "c", "d"]
            .iter()
            .map(|&p| (p, -100.0, NORMAL))
            .collect()
    }

    #[test]
    fn bpe_merges_the_best_scored_pair_first_and_the_leftmost_among_equals() {
        let mut pieces = letters();
        pieces.extend([("ab", -1.0, NORMAL), ("bc", -2.0, NORMAL)]);
        let m = model(&pieces, 2, false, false);
        // ▁ a b c: "ab" scores higher than "bc", so "c" stays alone.
        assert_eq!(m.count("abc"), 3);
        // Equal scores: the leftmost pair merges first (a b a b -> ab ab).
        let mut pieces = letters();
        pieces.extend([("ab", -1.0, NORMAL), ("ba", -1.0, NORMAL)]);
        let m = model(&pieces, 2, false, false);
        assert_eq!(m.count("abab"), 3);
        assert_eq!(m.count("baba"), 3); // ▁ ba ba
    }

    #[test]
    fn bpe_gives_unused_pieces_back_as_their_parts() {
        let mut pieces = letters();
        pieces.extend([("ab", -1.0, NORMAL), ("abc", -0.5, UNUSED)]);
        let m = model(&pieces, 2, false, false);
        assert!(
            !m.word_parts,
            "a model with unused pieces merges the text whole"
        );
        // ▁ ab c -> ▁ abc, given back as ab + c.
        assert_eq!(m.count("abc"), 3);
    }

    #[test]
    fn words_merge_apart_exactly_when_no_piece_crosses_a_word_start() {
        let mut pieces = letters();
        pieces.extend([("▁a", -1.0, NORMAL), ("▁▁", -0.5, NORMAL)]);
        let m = model(&pieces, 2, false, false);
        assert!(m.word_parts);
        assert_eq!(m.count("a a  a"), 4); // ▁a ▁a ▁ ▁a (the space run keeps ▁▁ apart)
        let mut pieces = letters();
        pieces.push(("a▁", -1.0, NORMAL));
        assert!(!model(&pieces, 2, false, false).word_parts);
    }

    #[test]
    fn unknown_characters_are_bytes_with_byte_fallback_else_one_piece_a_run() {
        let m = model(&letters(), 2, false, false);
        assert_eq!(m.count("a中文b"), 4); // ▁ a <unk> b
        let m = model(&letters(), 2, true, false);
        assert_eq!(m.count("a中文b"), 9); // ▁ a + 6 bytes + b
        let m = model(&letters(), 1, false, false);
        assert_eq!(m.count("a中文b"), 4);
        let m = model(&letters(), 1, true, false);
        assert_eq!(m.count("a中文b"), 9);
    }

    #[test]
    fn extra_spaces_are_removed_only_when_the_model_says_so() {
        let kept = model(&letters(), 2, false, false);
        let trimmed = model(&letters(), 2, false, true);
        assert_eq!(kept.count("  a  b "), 8); // ▁ ▁ ▁ a ▁ ▁ b ▁
        assert_eq!(trimmed.count("  a  b "), 4); // ▁ a ▁ b
        assert_eq!(trimmed.count("   "), 0);
        assert_eq!(kept.count(""), 0);
    }

    #[test]
    fn unigram_takes_the_best_path_and_user_symbols_win() {
        let mut pieces = letters();
        pieces.extend([
            ("▁ab", -3.0, NORMAL),
            ("cd", -1.0, NORMAL),
            ("▁abc", -3.5, NORMAL),
        ]);
        let m = model(&pieces, 1, false, false);
        // ▁ab + cd (-4) beats ▁abc + d (-103.5).
        assert_eq!(m.count("abcd"), 2);
        assert_eq!(m.count("bcd"), 3); // ▁ b cd
        pieces.push(("bcd", 0.0, USER));
        let m = model(&pieces, 1, false, false);
        // A user-defined symbol scores its length times the highest score (no higher
        // than the smallest positive float) less 0.1: ▁ bcd.
        assert_eq!(m.count("bcd"), 2);
    }

    #[test]
    fn malformed_files_are_refused_with_a_reason() {
        let err = |data: &[u8]| Model::parse(data).err().unwrap_or_default();
        assert!(err(&[0x0a, 0x80]).contains("SentencePiece"));
        assert!(err(&[0x0a, 0x05, 0x0a]).contains("past the end"));
        let mut no_unknown = Vec::new();
        let mut p = Vec::new();
        bytes(&mut p, 1, b"a");
        bytes(&mut no_unknown, 1, &p);
        assert!(err(&no_unknown).contains("unknown piece"));
    }
}
