//! SentencePiece's Unigram search (`unigram_model.cc`, `EncodeOptimized`): the best
//! path through every piece that starts at each character, by the sum of the pieces'
//! scores — in one pass, each position keeping the best path that ends there. A
//! character no piece of its own covers may be an unknown piece, scored 10 below the
//! lowest score; a user-defined symbol scores its length times the highest score, less
//! 0.1, so that it wins. Linear in the text's length times the longest piece's.

use super::normalize::one_char_len;
use super::proto::PieceType;
use super::{Model, Tally};

/// The best path ending at a position: its score, where its last piece starts
/// (`u32::MAX`: no path yet), and whether that piece is unknown.
#[derive(Clone, Copy)]
struct Best {
    score: f32,
    starts_at: u32,
    unknown: bool,
}

/// The penalty of an unknown character below the lowest score.
const UNKNOWN_PENALTY: f32 = 10.0;

/// Encodes `text` (normalized) and tallies its pieces.
pub(super) fn encode(model: &Model, text: &[u8], tally: &mut Tally) {
    let size = text.len();
    if size == 0 {
        return;
    }
    let unknown_score = model.min_score - UNKNOWN_PENALTY;
    let mut best = vec![
        Best {
            score: 0.0,
            starts_at: u32::MAX,
            unknown: false,
        };
        size + 1
    ];
    let mut starts_at = 0usize;
    while starts_at < size {
        let here = best[starts_at].score;
        let char_len = one_char_len(text[starts_at]).min(size - starts_at);
        let mut has_single = false;
        model.lattice.prefixes(&text[starts_at..], |len, value| {
            let piece = model.by_value[value as usize];
            if piece.kind == PieceType::Unused {
                return;
            }
            let target = &mut best[starts_at + len];
            // sentencepiece computes a user-defined symbol's score in double precision
            // and the others in single; both are kept in single.
            let candidate = if piece.kind == PieceType::UserDefined {
                (len as f32 * model.max_score) as f64 - 0.1 + f64::from(here)
            } else {
                f64::from(piece.score + here)
            };
            if target.starts_at == u32::MAX || candidate > f64::from(target.score) {
                *target = Best {
                    score: candidate as f32,
                    starts_at: starts_at as u32,
                    unknown: false,
                };
            }
            if len == char_len {
                has_single = true;
            }
        });
        if !has_single {
            let target = &mut best[starts_at + char_len];
            let candidate = unknown_score + here;
            if target.starts_at == u32::MAX || candidate > target.score {
                *target = Best {
                    score: candidate,
                    starts_at: starts_at as u32,
                    unknown: true,
                };
            }
        }
        starts_at += char_len;
    }
    // The path runs backwards; pieces are tallied forwards, since a run of unknown
    // pieces counts as one.
    let mut path = Vec::new();
    let mut end = size;
    while end > 0 {
        let node = best[end];
        if node.starts_at == u32::MAX {
            break; // unreachable: every character starts a piece or an unknown one
        }
        path.push((end - node.starts_at as usize, node.unknown));
        end = node.starts_at as usize;
    }
    for &(len, unknown) in path.iter().rev() {
        tally.piece(len, unknown);
    }
}
