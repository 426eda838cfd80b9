//! Counts must equal tiktoken-rs (the reference implementation over the same rank
//! tables) for every encoding, on generated text full of the characters that decide
//! where tiktoken's regexes split, and GitHub's bpe-openai (a second, independent
//! exact implementation, for o200k and cl100k) on long runs of megabytes, which
//! tiktoken-rs cannot count in reasonable time. Every count must say it is exact.
use ctxbudget::Encoding;
use proptest::prelude::*;

const ENCODINGS: [&str; 6] = [
    "o200k_base",
    "o200k_harmony",
    "cl100k_base",
    "p50k_base",
    "p50k_edit",
    "r50k_base",
];

fn oracle(name: &str) -> &'static tiktoken_rs::CoreBPE {
    match name {
        "o200k_base" => tiktoken_rs::o200k_base_singleton(),
        "o200k_harmony" => tiktoken_rs::o200k_harmony_singleton(),
        "cl100k_base" => tiktoken_rs::cl100k_base_singleton(),
        "p50k_base" => tiktoken_rs::p50k_base_singleton(),
        "p50k_edit" => tiktoken_rs::p50k_edit_singleton(),
        _ => tiktoken_rs::r50k_base_singleton(),
    }
}

/// bpe-openai's tokenizer, for the encodings it ships.
fn second_oracle(name: &str) -> Option<&'static bpe_openai::Tokenizer> {
    match name {
        "o200k_base" | "o200k_harmony" => Some(bpe_openai::o200k_base()),
        "cl100k_base" => Some(bpe_openai::cl100k_base()),
        _ => None,
    }
}

fn ours(name: &str) -> Encoding {
    match Encoding::new(name) {
        Ok(e) => e.with_cache_capacity(0),
        Err(e) => panic!("{e}"),
    }
}

/// Characters from every class the scanners distinguish, weighted towards the
/// boundaries: spaces, newlines, apostrophes, case changes, marks, digits, slashes.
fn tricky_char() -> impl Strategy<Value = char> {
    prop_oneof![
        4 => prop::sample::select(vec![
            ' ', ' ', ' ', '\n', '\r', '\t', '\'', '/', '.', ',', '!', '-', '_', '"', '\\',
            '\u{3000}', '\u{a0}', '\u{2028}', '\u{85}', '\u{b}', '\u{c}', '\0',
        ]),
        4 => prop::sample::select(vec![
            'a', 'b', 's', 't', 'd', 'm', 'l', 'v', 'e', 'r', 'S', 'T', 'L', 'V', 'E', 'R', 'D',
            'M', 'A', 'Z', 'ſ', 'K', 'ǅ', 'ʰ', 'é', 'É', 'ß', 'Ω',
        ]),
        2 => prop::sample::select(vec![
            '0', '1', '9', '٣', '½', 'Ⅻ', '²',
        ]),
        2 => prop::sample::select(vec![
            '\u{301}', '\u{308}', '\u{94d}', '中', '文', 'の', 'ア', '한', 'ก', '\u{e31}', 'ה',
            'ع', '😀', '👍', '\u{200d}', '\u{fe0f}', '\u{fffd}', '€', '→',
        ]),
        1 => any::<char>(),
    ]
}

fn tricky_text() -> impl Strategy<Value = String> {
    prop::collection::vec(tricky_char(), 0..80).prop_map(|cs| cs.into_iter().collect())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3_000, ..ProptestConfig::default() })]

    #[test]
    fn equals_tiktoken_rs(text in tricky_text()) {
        for name in ENCODINGS {
            let expected = oracle(name).encode_ordinary(&text).len();
            let got = ours(name).count_detail(&text);
            prop_assert!(got.exact);
            prop_assert_eq!(got.tokens, expected, "{} on {:?}", name, text);
            if let Some(second) = second_oracle(name) {
                prop_assert_eq!(second.count(text.as_str()), expected, "{} on {:?}", name, text);
            }
        }
    }

    #[test]
    fn exact_chunking_changes_nothing(text in tricky_text(), reps in 1usize..20, chunk in 64usize..300) {
        let text = text.repeat(reps);
        for name in ENCODINGS {
            let expected = oracle(name).encode_ordinary(&text).len();
            let got = ours(name).with_chunk_bytes(chunk).count_detail(&text);
            prop_assert!(got.exact);
            prop_assert_eq!(got.tokens, expected, "{} chunk {} on {:?}", name, chunk, text);
        }
    }
}

/// Code-like text: words, capitals, digits, punctuation, indentation and newlines,
/// mostly ASCII (the scanners' one- and two-byte fast paths, and the per-thread piece
/// cache, which repeated words hit), with a little non-ASCII next to it.
fn code_like_text() -> impl Strategy<Value = String> {
    let unit = prop_oneof![
        6 => "[a-z_]{1,12}",
        2 => "[A-Z][a-z]{0,8}",
        1 => "[A-Z]{2,5}",
        2 => "[0-9]{1,6}",
        4 => prop::sample::select(vec![
            " ", "  ", "\n", "\n    ", "\n\n        ", "\t", "\r\n", " \n", "(", ")", ".", ",",
            ":", "=", " = ", "==", "'", "'s", "'T", "\"", "#", "/", "//", "\n/", "!\n", "->",
            "[", "]", "{", "}", "*", "\u{b}", "\u{c}", "\0",
        ]).prop_map(str::to_owned),
        1 => prop::sample::select(vec![
            "é", "É", "中", "\u{301}", "\u{a0}", "\u{3000}", "😀", "ʰ", "ǅ", "ſ", "٣",
        ]).prop_map(str::to_owned),
    ];
    prop::collection::vec(unit, 0..60).prop_map(|units| units.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2_000, ..ProptestConfig::default() })]

    /// Counted twice (the second time with the piece cache holding its pieces), and
    /// equal to tiktoken-rs both times.
    #[test]
    fn code_like_text_equals_tiktoken_rs(text in code_like_text()) {
        for name in ENCODINGS {
            let expected = oracle(name).encode_ordinary(&text).len();
            let enc = ours(name);
            prop_assert_eq!(enc.count(&text), expected, "{} on {:?}", name, text);
            prop_assert_eq!(enc.count(&text), expected, "{} again on {:?}", name, text);
        }
    }
}

/// Documents made of lines drawn from a small pool, so that documents share segments
/// of the per-thread segment cache (which cuts at exact boundaries at least 1 KiB
/// apart), with now and then a line of tricky text or a long run between them.
fn documents() -> impl Strategy<Value = Vec<String>> {
    let line = prop_oneof![
        6 => code_like_text(),
        1 => tricky_text(),
        1 => (run_unit(), 1usize..400).prop_map(|(unit, n)| unit.repeat(n)),
    ];
    (
        prop::collection::vec(line, 1..12),
        prop::collection::vec(prop::collection::vec(0usize..12, 0..120), 1..6),
    )
        .prop_map(|(pool, docs)| {
            docs.into_iter()
                .map(|picks| {
                    picks
                        .into_iter()
                        .map(|i| format!("{}\n", pool[i % pool.len()]))
                        .collect()
                })
                .collect()
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// Documents counted one after another on one thread (their shared segments then
    /// come from the segment cache, filled by the documents before), interleaved with
    /// the same documents counted on a fresh thread (an empty segment cache): every
    /// count equals tiktoken-rs.
    #[test]
    fn cached_and_uncached_segments_equal_tiktoken_rs(docs in documents()) {
        for name in ["o200k_base", "cl100k_base", "r50k_base"] {
            let enc = ours(name);
            for doc in &docs {
                let expected = oracle(name).encode_ordinary(doc).len();
                let fresh = std::thread::scope(|s| s.spawn(|| enc.count(doc)).join().ok());
                prop_assert_eq!(fresh, Some(expected), "{} fresh on {:?}", name, doc);
                prop_assert_eq!(enc.count(doc), expected, "{} on {:?}", name, doc);
                prop_assert_eq!(enc.count(doc), expected, "{} again on {:?}", name, doc);
            }
        }
    }
}

/// One unit of a long run: a character, a pair, or a base64-like or code-like word.
fn run_unit() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            " ", "a", "\n", "中", "😀", "7", "!", "é", "\t", "\r\n", "ab", "aB", "Zx", "가", "ก",
            "\u{301}", "=", "-", "_", "0", "  \n", "/", "a ", "\u{3000}",
        ])
        .prop_map(str::to_owned),
        "[A-Za-z0-9+/]{1,12}",
        "[a-z]{1,6}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Runs of up to several MiB, between short tricky text, equal bpe-openai.
    #[test]
    fn long_runs_equal_bpe_openai(
        head in tricky_text(),
        unit in run_unit(),
        bytes in 1usize..(3 << 20),
        tail in tricky_text(),
    ) {
        let text = format!("{head}{}{tail}", unit.repeat(bytes / unit.len() + 1));
        for name in ["o200k_base", "cl100k_base"] {
            let expected = second_oracle(name).map(|t| t.count(text.as_str()));
            let got = ours(name).count_detail(&text);
            prop_assert!(got.exact);
            prop_assert_eq!(Some(got.tokens), expected, "{} on {:?}…{:?} x{}", name, head, unit, bytes);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// Runs of a few KiB, which tiktoken-rs's quadratic merge still counts, for all six
    /// encodings (bpe-openai has no GPT-2 tables).
    #[test]
    fn runs_equal_tiktoken_rs(
        head in tricky_text(),
        unit in run_unit(),
        bytes in 1usize..3_000,
        tail in tricky_text(),
    ) {
        let text = format!("{head}{}{tail}", unit.repeat(bytes / unit.len() + 1));
        for name in ENCODINGS {
            let expected = oracle(name).encode_ordinary(&text).len();
            let got = ours(name).count_detail(&text);
            prop_assert!(got.exact);
            prop_assert_eq!(got.tokens, expected, "{} on {:?}…{:?} x{}", name, head, unit, bytes);
        }
    }
}

/// The runs the issue measured, each of 1 and 4 MiB.
#[test]
fn megabyte_runs_are_exact() {
    let base64 = "QmFzZTY0IGJsb2IgZnJvbSBhIHRvb2wgb3V0cHV0Lg+/";
    for unit in [" ", "a", "\n", "中", "😀", "7", base64] {
        for mib in [1usize, 4] {
            let text = unit.repeat((mib << 20) / unit.len());
            for name in ["o200k_base", "cl100k_base"] {
                let got = ours(name).count_detail(&text);
                assert!(got.exact);
                let expected = second_oracle(name).map(|t| t.count(text.as_str()));
                assert_eq!(Some(got.tokens), expected, "{name} {unit:?} {mib} MiB");
            }
        }
    }
}

#[test]
fn long_pieces_agree() {
    for name in ENCODINGS {
        for text in [
            "a".repeat(3_000),
            "ab".repeat(1_500),
            "Zx".repeat(900),
            "中".repeat(700),
            "!".repeat(2_000),
            " ".repeat(2_000),
            "\n".repeat(2_000),
            "😀".repeat(500),
            "é".repeat(900),
        ] {
            let expected = oracle(name).encode_ordinary(&text).len();
            assert_eq!(
                ours(name).count(&text),
                expected,
                "{name} on {:?}…",
                &text[..8]
            );
        }
    }
}
