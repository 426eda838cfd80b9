"""``gpt2`` is an encoding name of its own, as in tiktoken: the ranks and split pattern of
``r50k_base`` under the name tiktoken gives them for ``gpt2``/``gpt-2``."""

from __future__ import annotations

import pytest
import tiktoken.model

import ctxbudget

TEXTS = ["hello world", "  indented\n\tcode(x) # 123", "naïve café — ünïcödé ✓", "a" * 300]


@pytest.mark.parametrize("model", ["gpt2", "gpt-2"])
def test_model_table_names_gpt2_like_tiktoken(model: str) -> None:
    assert tiktoken.model.encoding_name_for_model(model) == "gpt2"
    enc = ctxbudget.encoding_for_model(model)
    assert enc.name == "gpt2"
    assert not enc.is_estimate


def test_gpt2_is_a_shipped_encoding_with_r50k_ranks() -> None:
    assert "gpt2" in ctxbudget.encoding_names()
    gpt2 = ctxbudget.Encoding("gpt2")
    r50k = ctxbudget.Encoding("r50k_base")
    assert gpt2.name == "gpt2" and repr(gpt2) == "Encoding('gpt2')"
    assert gpt2.count_many(TEXTS) == r50k.count_many(TEXTS)
    assert ctxbudget.count_tokens(TEXTS[1], encoding="gpt2") == r50k.count(TEXTS[1])
