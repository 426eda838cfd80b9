//! The few fields of a SentencePiece `ModelProto` that counting needs, read straight
//! from the protocol-buffer wire format (the schema is small and stable, so a reader
//! of its wire format is less than a code generator and its runtime would be).

/// One field of a message: its number and its value.
pub(super) enum Value<'a> {
    /// A varint (wire type 0): integers, booleans and enums.
    Varint(u64),
    /// A 32-bit value (wire type 5): floats.
    Fixed32(u32),
    /// A 64-bit value (wire type 1).
    Fixed64,
    /// Length-delimited bytes (wire type 2): strings, bytes, nested messages.
    Bytes(&'a [u8]),
}

/// Reads a varint at `*at`, moving past it.
fn varint(data: &[u8], at: &mut usize) -> Result<u64, String> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *data.get(*at).ok_or("a varint runs past the end")?;
        *at += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return Ok(value);
        }
    }
    Err("a varint longer than ten bytes".to_owned())
}

/// Calls `each` with every field of the message `data`, in order.
pub(super) fn fields<'a>(
    data: &'a [u8],
    mut each: impl FnMut(u64, Value<'a>) -> Result<(), String>,
) -> Result<(), String> {
    let mut at = 0;
    while at < data.len() {
        let key = varint(data, &mut at)?;
        let value = match key & 7 {
            0 => Value::Varint(varint(data, &mut at)?),
            1 => {
                at = at
                    .checked_add(8)
                    .filter(|&end| end <= data.len())
                    .ok_or("a 64-bit field runs past the end")?;
                Value::Fixed64
            }
            2 => {
                let len = usize::try_from(varint(data, &mut at)?)
                    .map_err(|_| "a field longer than memory")?;
                let end = at
                    .checked_add(len)
                    .filter(|&end| end <= data.len())
                    .ok_or("a length-delimited field runs past the end")?;
                let bytes = &data[at..end];
                at = end;
                Value::Bytes(bytes)
            }
            5 => {
                let bytes = data
                    .get(at..at + 4)
                    .ok_or("a 32-bit field runs past the end")?;
                at += 4;
                Value::Fixed32(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
            }
            other => return Err(format!("wire type {other} is not protocol buffers")),
        };
        each(key >> 3, value)?;
    }
    Ok(())
}

/// The kind of a piece (`ModelProto.SentencePiece.Type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum PieceType {
    /// An ordinary piece.
    Normal,
    /// The unknown piece.
    Unknown,
    /// A control symbol (`<s>`, `</s>`): never read from text.
    Control,
    /// A user-defined symbol: always one piece where it appears in text.
    UserDefined,
    /// A piece the model keeps but never emits (its parts are emitted instead).
    Unused,
    /// A byte piece (`<0x41>`) of byte fallback.
    Byte,
}

/// One piece of the vocabulary.
pub(super) struct ProtoPiece<'a> {
    /// Its text.
    pub(super) piece: &'a [u8],
    /// Its score (BPE: merge priority; Unigram: log probability).
    pub(super) score: f32,
    /// Its kind.
    pub(super) kind: PieceType,
}

/// The model types of `TrainerSpec.model_type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ModelType {
    /// Unigram language model (the default).
    Unigram,
    /// Byte-pair encoding.
    Bpe,
    /// Whitespace-split words.
    Word,
    /// Characters.
    Char,
}

/// The fields of a model file that counting reads.
pub(super) struct ProtoModel<'a> {
    /// Every piece, in id order.
    pub(super) pieces: Vec<ProtoPiece<'a>>,
    /// The algorithm.
    pub(super) model_type: ModelType,
    /// Unknown characters become their UTF-8 bytes.
    pub(super) byte_fallback: bool,
    /// The space mark goes after words rather than before.
    pub(super) treat_whitespace_as_suffix: bool,
    /// The normalization rule's name (`identity`, `nmt_nfkc`, …).
    pub(super) normalizer_name: String,
    /// The compiled normalization rules (empty for `identity`).
    pub(super) precompiled_charsmap: &'a [u8],
    /// A space mark is put before the text.
    pub(super) add_dummy_prefix: bool,
    /// Leading, trailing and repeated spaces are removed.
    pub(super) remove_extra_whitespaces: bool,
    /// Spaces are written as U+2581.
    pub(super) escape_whitespaces: bool,
}

fn piece(data: &[u8]) -> Result<ProtoPiece<'_>, String> {
    let mut out = ProtoPiece {
        piece: &[],
        score: 0.0,
        kind: PieceType::Normal,
    };
    fields(data, |number, value| {
        match (number, value) {
            (1, Value::Bytes(b)) => out.piece = b,
            (2, Value::Fixed32(bits)) => out.score = f32::from_bits(bits),
            (3, Value::Varint(kind)) => {
                out.kind = match kind {
                    1 => PieceType::Normal,
                    2 => PieceType::Unknown,
                    3 => PieceType::Control,
                    4 => PieceType::UserDefined,
                    5 => PieceType::Unused,
                    6 => PieceType::Byte,
                    other => return Err(format!("a piece of unknown type {other}")),
                }
            }
            _ => {}
        }
        Ok(())
    })?;
    Ok(out)
}

/// Reads a serialized `ModelProto`.
pub(super) fn parse(data: &[u8]) -> Result<ProtoModel<'_>, String> {
    let mut model = ProtoModel {
        pieces: Vec::new(),
        model_type: ModelType::Unigram,
        byte_fallback: false,
        treat_whitespace_as_suffix: false,
        normalizer_name: String::new(),
        precompiled_charsmap: &[],
        add_dummy_prefix: true,
        remove_extra_whitespaces: true,
        escape_whitespaces: true,
    };
    fields(data, |number, value| {
        match (number, value) {
            (1, Value::Bytes(b)) => model.pieces.push(piece(b)?),
            (2, Value::Bytes(trainer)) => fields(trainer, |n, v| {
                match (n, v) {
                    (3, Value::Varint(t)) => {
                        model.model_type = match t {
                            1 => ModelType::Unigram,
                            2 => ModelType::Bpe,
                            3 => ModelType::Word,
                            4 => ModelType::Char,
                            other => return Err(format!("unknown model type {other}")),
                        }
                    }
                    (24, Value::Varint(b)) => model.treat_whitespace_as_suffix = b != 0,
                    (35, Value::Varint(b)) => model.byte_fallback = b != 0,
                    _ => {}
                }
                Ok(())
            })?,
            (3, Value::Bytes(normalizer)) => fields(normalizer, |n, v| {
                match (n, v) {
                    (1, Value::Bytes(name)) => {
                        model.normalizer_name = String::from_utf8_lossy(name).into_owned()
                    }
                    (2, Value::Bytes(map)) => model.precompiled_charsmap = map,
                    (3, Value::Varint(b)) => model.add_dummy_prefix = b != 0,
                    (4, Value::Varint(b)) => model.remove_extra_whitespaces = b != 0,
                    (5, Value::Varint(b)) => model.escape_whitespaces = b != 0,
                    _ => {}
                }
                Ok(())
            })?,
            _ => {}
        }
        Ok(())
    })?;
    Ok(model)
}
