//! The rank tables, read straight from tiktoken's published `.tiktoken` files.
//!
//! The four files in `data/` are byte-for-byte the files tiktoken downloads (their
//! SHA-256 digests, checked in the tests, are the ones tiktoken pins). Each line is a
//! base64 token and its rank, in rank order. Decoding them takes a few milliseconds,
//! where building a full regex-backed tokenizer only to read its table back took
//! seconds.

/// Raw table files, embedded in the library.
const O200K: &str = include_str!("data/o200k_base.tiktoken");
const CL100K: &str = include_str!("data/cl100k_base.tiktoken");
const P50K: &str = include_str!("data/p50k_base.tiktoken");
const R50K: &str = include_str!("data/r50k_base.tiktoken");

/// The table file of each shipped encoding (encodings that differ only in special
/// tokens share a file: ordinary text never produces special tokens).
pub(crate) fn source(name: &str) -> Option<&'static str> {
    Some(match name {
        "o200k_base" | "o200k_harmony" => O200K,
        "cl100k_base" => CL100K,
        "p50k_base" | "p50k_edit" => P50K,
        "r50k_base" => R50K,
        _ => return None,
    })
}

/// Every token of one encoding, in rank order. Token *ids* are positions in this
/// order, so comparing ids compares ranks even where the ranks have gaps.
pub(crate) struct Vocab {
    /// All token bytes, concatenated in rank order.
    pub(crate) bytes: Vec<u8>,
    /// `starts[id]..starts[id + 1]` are the bytes of token `id`. (The ranks the file
    /// states are not kept: only their order counts, and ids keep it.)
    pub(crate) starts: Vec<u32>,
}

/// Value of each base64 digit (standard alphabet), 0xFF for anything else.
const BASE64_DIGITS: [u8; 256] = {
    let mut table = [0xFFu8; 256];
    let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut i = 0;
    while i < 64 {
        table[alphabet[i] as usize] = i as u8;
        i += 1;
    }
    table
};

/// Appends the bytes of one padded standard-base64 string to `out`; `None` if it is
/// not one. (A general decoder spends more on setup than on a token of a few bytes.)
pub(crate) fn decode_base64(text: &[u8], out: &mut Vec<u8>) -> Option<()> {
    if text.is_empty() || !text.len().is_multiple_of(4) {
        return None;
    }
    let pad = text
        .iter()
        .rev()
        .take(2)
        .take_while(|&&c| c == b'=')
        .count();
    let body = &text[..text.len() - pad];
    let mut acc = 0u32;
    let mut bits = 0;
    for &c in body {
        let v = BASE64_DIGITS[usize::from(c)];
        if v == 0xFF {
            return None;
        }
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    // Leftover bits must be the zero padding of the last digit.
    (acc & ((1 << bits) - 1) == 0).then_some(())
}

/// One `base64 rank` line in its plain form (padded base64, one space, decimal digits,
/// `\n` or the end) at `data[at..]`: the token's bytes are appended to `out`, and its rank
/// and where the next line starts returned. `None` for any other line, which the general
/// parse reads (or refuses, saying why); `out` then holds bytes past its old length.
///
/// A `.tiktoken` file is hundreds of thousands of such lines, and this single pass over
/// them costs about half of splitting each into lines and fields first.
#[inline]
fn plain_line(data: &[u8], at: usize, out: &mut Vec<u8>) -> Option<(u32, usize)> {
    let mut i = at;
    loop {
        let &[a, b, c, d] = data.get(i..i + 4)? else {
            return None;
        };
        let [va, vb, vc, vd] = [a, b, c, d].map(|x| BASE64_DIGITS[usize::from(x)]);
        i += 4;
        if (va | vb | vc | vd) & 0xC0 == 0 {
            let quad =
                u32::from(va) << 18 | u32::from(vb) << 12 | u32::from(vc) << 6 | u32::from(vd);
            out.extend_from_slice(&quad.to_be_bytes()[1..]);
            if data.get(i) == Some(&b' ') {
                break;
            }
            continue;
        }
        // The last quad, padded: its leftover bits must be zero.
        if (va | vb) & 0xC0 != 0 || data.get(i) != Some(&b' ') {
            return None;
        }
        if c == b'=' && d == b'=' && vb & 0x0F == 0 {
            out.push(va << 2 | vb >> 4);
        } else if vc & 0xC0 == 0 && d == b'=' && vc & 0x03 == 0 {
            out.extend_from_slice(&[va << 2 | vb >> 4, vb << 4 | vc >> 2]);
        } else {
            return None;
        }
        break;
    }
    i += 1;
    let digits = i;
    let mut rank = 0u32;
    while let Some(&c) = data.get(i).filter(|c| c.is_ascii_digit()) {
        rank = rank.checked_mul(10)?.checked_add(u32::from(c - b'0'))?;
        i += 1;
    }
    match data.get(i) {
        _ if i == digits => None,
        Some(b'\n') => Some((rank, i + 1)),
        None => Some((rank, i)),
        Some(_) => None,
    }
}

impl Vocab {
    /// Parses a `.tiktoken` file: one `base64 rank` line per token, ranks increasing.
    pub(crate) fn parse(data: &str) -> Result<Vocab, String> {
        let text = data.as_bytes();
        let mut vocab = Vocab {
            bytes: Vec::with_capacity(data.len() / 2),
            starts: vec![0],
        };
        let mut last = None;
        let mut index = 0;
        let mut at = 0;
        while at < text.len() {
            let mark = vocab.bytes.len();
            let err = |what: &str| format!("line {}: {what}", index + 1);
            let rank = match plain_line(text, at, &mut vocab.bytes) {
                Some((rank, next)) => {
                    at = next;
                    rank
                }
                None => {
                    // Anything else, as `str::lines` splits it: CRLF endings, blank
                    // lines, spaces around the rank, and every malformed line.
                    vocab.bytes.truncate(mark);
                    let end = text[at..]
                        .iter()
                        .position(|&b| b == b'\n')
                        .map_or(text.len(), |n| at + n);
                    let line = &data[at..end];
                    at = end + 1;
                    let line = line.strip_suffix('\r').unwrap_or(line);
                    if line.is_empty() {
                        continue;
                    }
                    let (token, rank) = line
                        .split_once(' ')
                        .ok_or_else(|| err("expected `<base64> <rank>`"))?;
                    let rank: u32 = rank
                        .trim()
                        .parse()
                        .map_err(|_| err("rank is not a number"))?;
                    decode_base64(token.as_bytes(), &mut vocab.bytes)
                        .ok_or_else(|| err("bad base64 token"))?;
                    rank
                }
            };
            if last.is_some_and(|last| rank <= last) {
                return Err(err("ranks must increase"));
            }
            last = Some(rank);
            let end = u32::try_from(vocab.bytes.len()).map_err(|_| err("table too large"))?;
            if end == *vocab.starts.last().unwrap_or(&0) {
                return Err(err("empty token"));
            }
            vocab.starts.push(end);
            index += 1;
        }
        Ok(vocab)
    }

    /// A table of `tokens`, given in rank order (ranks 0, 1, 2, …). Empty tokens are
    /// refused, as in a `.tiktoken` file.
    pub(crate) fn from_tokens<'a>(
        tokens: impl IntoIterator<Item = &'a [u8]>,
    ) -> Result<Vocab, String> {
        let mut vocab = Vocab {
            bytes: Vec::new(),
            starts: vec![0],
        };
        for (rank, token) in tokens.into_iter().enumerate() {
            if token.is_empty() {
                return Err(format!("token {rank} is empty"));
            }
            vocab.bytes.extend_from_slice(token);
            let end = u32::try_from(vocab.bytes.len()).map_err(|_| "table too large")?;
            vocab.starts.push(end);
        }
        Ok(vocab)
    }

    /// Number of tokens.
    pub(crate) fn len(&self) -> usize {
        self.starts.len() - 1
    }

    /// Bytes of token `id`.
    #[inline]
    pub(crate) fn token(&self, id: u32) -> &[u8] {
        let i = id as usize;
        &self.bytes[self.starts[i] as usize..self.starts[i + 1] as usize]
    }

    /// Every token with its id.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u32, &[u8])> + '_ {
        (0..self.len() as u32).map(move |id| (id, self.token(id)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::{Digest, Sha256};

    fn oracle(name: &str) -> tiktoken_rs::CoreBPE {
        let built = match name {
            "o200k_base" => tiktoken_rs::o200k_base(),
            "o200k_harmony" => tiktoken_rs::o200k_harmony(),
            "cl100k_base" => tiktoken_rs::cl100k_base(),
            "p50k_base" => tiktoken_rs::p50k_base(),
            "p50k_edit" => tiktoken_rs::p50k_edit(),
            _ => tiktoken_rs::r50k_base(),
        };
        built.unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn files_are_the_ones_tiktoken_pins() {
        // Digests from tiktoken's `openai_public.py` (`expected_hash`).
        let pinned = [
            (
                O200K,
                "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
            ),
            (
                CL100K,
                "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
            ),
            (
                P50K,
                "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069",
            ),
            (
                R50K,
                "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930",
            ),
        ];
        for (data, digest) in pinned {
            let got: String = Sha256::digest(data.as_bytes())
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            assert_eq!(got, digest);
        }
    }

    /// Every rank decodes in tiktoken-rs to exactly our bytes, and every rank
    /// tiktoken-rs knows (special tokens aside) is ours: a truncated, reordered or
    /// altered table fails here.
    #[test]
    fn tables_equal_tiktoken_rs() {
        for name in super::super::encoding_names() {
            // An alias (`gpt2`) is checked through the table it names.
            let file = super::super::models::rank_source(name);
            let vocab = Vocab::parse(source(file).unwrap_or_default())
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            let bpe = oracle(name);
            // The ranks the file states, in id order.
            let ranks: Vec<u32> = source(file)
                .unwrap_or_default()
                .lines()
                .filter_map(|l| l.split_once(' ')?.1.trim().parse().ok())
                .collect();
            assert_eq!(ranks.len(), vocab.len(), "{name}");
            for (id, bytes) in vocab.iter() {
                let rank = ranks[id as usize];
                let theirs = bpe
                    .decode_bytes(&[rank])
                    .unwrap_or_else(|e| panic!("{name} rank {rank}: {e:?}"));
                assert_eq!(bytes, theirs.as_slice(), "{name} rank {rank}");
            }
            let special: Vec<String> = bpe.special_tokens().iter().map(|s| s.to_string()).collect();
            let last = *ranks.last().unwrap_or(&0);
            let mut extra = 0;
            for rank in 0..last + 4_096 {
                if ranks.binary_search(&rank).is_err() {
                    if let Ok(bytes) = bpe.decode_bytes(&[rank]) {
                        assert!(
                            special.iter().any(|s| s.as_bytes() == bytes.as_slice()),
                            "{name}: tiktoken-rs has rank {rank} that we lack"
                        );
                        extra += 1;
                    }
                }
            }
            assert!(extra <= special.len(), "{name}");
            let expected_len = match name {
                "o200k_base" | "o200k_harmony" => 199_998,
                "cl100k_base" => 100_256,
                "p50k_base" | "p50k_edit" => 50_280,
                _ => 50_256,
            };
            assert_eq!(vocab.len(), expected_len, "{name}");
        }
    }

    #[test]
    fn decoder_agrees_with_the_base64_crate() {
        use base64::Engine as _;
        let engine = base64::engine::general_purpose::STANDARD;
        for len in 0..40usize {
            let bytes: Vec<u8> = (0..len).map(|i| (i * 37 + len) as u8).collect();
            let text = engine.encode(&bytes);
            let mut out = Vec::new();
            assert_eq!(
                decode_base64(text.as_bytes(), &mut out).map(|_| out),
                (len > 0).then_some(bytes)
            );
        }
    }

    #[test]
    fn bad_files_are_refused_with_the_line() {
        let err = |s: &str| Vocab::parse(s).err().unwrap_or_default();
        assert!(err("YQ== 0\nYg== 0\n").contains("line 2"));
        assert!(err("YQ== x\n").contains("not a number"));
        assert!(err("YQ==\n").contains("line 1"));
        assert!(err("!!!! 0\n").contains("base64"));
        assert!(err("YQ= 0\n").contains("base64"));
        assert!(err("YR== 0\n").contains("base64"));
        assert!(err("YQ== 4294967296\n").contains("not a number"));
        assert!(err("YQ==YQ== 0\n").contains("base64"));
        assert!(err("YQ==  0\nYg== 0\n").contains("line 2"));
        assert!(err("YQ== 0\n\n \n").contains("line 2"));
        assert_eq!(Vocab::parse("YQ== 0\nYg== 5\n").map(|v| v.len()), Ok(2));
    }

    /// Tokens of every length, so that every padding and quad count occurs.
    fn tokens() -> Vec<Vec<u8>> {
        (1..40usize)
            .map(|len| (0..len).map(|i| (i * 91 + len * 7) as u8).collect())
            .collect()
    }

    #[test]
    fn plain_lines_read_as_the_general_parse_reads_them() {
        use base64::Engine as _;
        let engine = base64::engine::general_purpose::STANDARD;
        let tokens = tokens();
        let line = |(rank, t): (usize, &Vec<u8>)| format!("{} {}", engine.encode(t), rank * 3);
        let lines: Vec<String> = tokens.iter().enumerate().map(line).collect();
        // The plain form, then forms only the general parse reads: CRLF endings, blank
        // lines, spaces around the rank, no final newline.
        let plain = lines.join("\n") + "\n";
        let crlf = lines.join("\r\n") + "\r\n";
        let loose = lines
            .iter()
            .enumerate()
            .map(|(i, l)| {
                if i % 2 == 0 {
                    format!("{l} \n\n")
                } else {
                    format!("{l}\n")
                }
            })
            .collect::<String>();
        let unended = lines.join("\n");
        for text in [plain, crlf, loose, unended] {
            let vocab = Vocab::parse(&text).unwrap_or_else(|e| panic!("{e}: {text:?}"));
            let read: Vec<&[u8]> = vocab.iter().map(|(_, t)| t).collect();
            assert_eq!(read, tokens.iter().map(Vec::as_slice).collect::<Vec<_>>());
        }
    }
}
