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
            other => return Err(format!(
                "its model type is {other:?}: only BPE and Unigram SentencePiece models are read"
            )),
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
