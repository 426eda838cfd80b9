"""Counts of realistic gpt-4o requests beside the OpenAI cookbook's formula, LiteLLM's
``token_counter`` and LangChain's ``get_num_tokens_from_messages`` (the corpus and the
counters: tests/request_corpus.py; the same comparison as a table: benches/README.md).

Goals (issue 27): plain chat equal to the cookbook; tool schemas and tool-call turns
within 2% of the cookbook's formula; images equal to OpenAI's documented rule.
"""

from __future__ import annotations

import pytest
from request_corpus import Case, cookbook, corpus, ctxbudget_count, documented_image_tokens

CASES = corpus()


def test_the_corpus_covers_the_issue() -> None:
    by_category = {
        c: [k for k in CASES if k.category == c] for c in ("chat", "tools", "tool calls", "images")
    }
    assert len(CASES) >= 30
    assert all(len(v) >= 6 for v in by_category.values())
    assert {len(c.tools) for c in by_category["tools"]} >= {1, 20}
    details = {d for c in by_category["images"] for _, _, d in c.images}
    assert details == {"low", "high", "auto"}


@pytest.mark.parametrize("case", [c for c in CASES if c.category == "chat"], ids=lambda c: c.name)
def test_plain_chat_equals_the_cookbook(case: Case) -> None:
    assert ctxbudget_count(case) == cookbook(case)


@pytest.mark.parametrize(
    "case", [c for c in CASES if c.category in ("tools", "tool calls")], ids=lambda c: c.name
)
def test_tools_and_tool_calls_are_within_two_percent_of_the_cookbook(case: Case) -> None:
    ours, theirs = ctxbudget_count(case), cookbook(case)
    assert abs(ours - theirs) <= 0.02 * theirs, (ours, theirs)


@pytest.mark.parametrize("case", [c for c in CASES if c.category == "images"], ids=lambda c: c.name)
def test_images_equal_the_documented_rule(case: Case) -> None:
    text_only = Case(
        case.name,
        "chat",
        [
            {**m, "content": [p for p in m["content"] if p["type"] == "text"]}
            if isinstance(m["content"], list)
            else m
            for m in case.messages
        ],
    )
    images = sum(documented_image_tokens(w, h, d) for w, h, d in case.images)
    assert ctxbudget_count(case) - ctxbudget_count(text_only) == images
    assert ctxbudget_count(case) == cookbook(case)


@pytest.mark.litellm_in_process
def test_litellm_and_langchain_agree_on_chat() -> None:
    """The third-party counters read the same rule for chat: a check that the corpus
    and the cookbook implementation here are the ones they reproduce."""
    pytest.importorskip("litellm")
    pytest.importorskip("langchain_openai")
    from request_corpus import langchain_count, litellm_count

    for case in (c for c in CASES if c.category == "chat"):
        assert litellm_count(case) == langchain_count(case) == cookbook(case), case.name
