"""The ``mistral_v3`` counting profile: a request's count equals the length of the
tokens ``mistral-common``'s request encoder (``MistralTokenizer.encode_chat_completion``)
produces for it, for the tekken and SentencePiece v3 files ``mistral-common`` ships, on
fixed conversations (tools, tool calls, tool results) and generated ones; and each text
piece between control tokens counts as ``mistral-common`` encodes it."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from chat_conversations import CONVERSATIONS, Messages, Tools, requests
from hypothesis import assume, given, settings
from tokenizer_files import package_file

import ctxbudget
from ctxbudget import Encoding

FILES = ("tekken_240911.json", "tekken_240718.json", "mistral_instruct_tokenizer_240323.model.v3")

# Conversations mistral-common refuses: tool results without the id of their call.
REFUSED = {2}


class Models(dict[str, tuple[Encoding, Any]]):
    """Each file's encoding and mistral-common tokenizer (shown by name only)."""

    def __repr__(self) -> str:
        return f"Models({', '.join(self)})"


@pytest.fixture(scope="module")
def models() -> Models:
    from mistral_common.tokens.tokenizers.mistral import MistralTokenizer

    loaded = Models()
    for name in FILES:
        path = package_file("mistral_common", "data", name)
        loaded[name] = (Encoding.from_file(path), MistralTokenizer.from_file(str(path)))
    return loaded


def _served(messages: Messages, tools: Tools) -> tuple[Messages, Tools]:
    """The request as vLLM hands it to mistral-common: a last assistant message is a
    prefix to continue; a function's missing description and parameters are empty."""
    messages = copy.deepcopy(messages)
    if messages and messages[-1]["role"] == "assistant":
        messages[-1]["prefix"] = True
    tools = copy.deepcopy(tools)
    for tool in tools or ():
        function = tool["function"]
        function.setdefault("description", "")
        function.setdefault("parameters", {})
    return messages, tools


def _encode(oracle: Any, messages: Messages, tools: Tools) -> list[int] | None:
    """mistral-common's tokens for the request, or None where it refuses it."""
    from mistral_common.exceptions import MistralCommonException
    from mistral_common.protocol.instruct.request import ChatCompletionRequest
    from pydantic import ValidationError

    messages, tools = _served(messages, tools)
    try:
        request: ChatCompletionRequest[Any] = ChatCompletionRequest.model_validate(
            {"messages": messages, "tools": tools}
        )
        return list(oracle.encode_chat_completion(request).tokens)
    except (MistralCommonException, ValidationError, ValueError, AssertionError):
        return None


def _assert_equal(
    enc: Encoding, oracle: Any, tokens: list[int], messages: Messages, tools: Tools
) -> None:
    counted = ctxbudget.count_messages(messages, tools, encoding=enc, profile="mistral_v3")
    assert counted == len(tokens)
    tokenizer = oracle.instruct_tokenizer.tokenizer
    if type(tokenizer).__name__ != "Tekkenizer":
        return
    # Each run of text tokens between control tokens is one piece encoded on its own.
    piece: list[int] = []
    for token in [*tokens, tokenizer.bos_id]:
        if tokenizer.is_special(token):
            if piece:
                assert enc.count(tokenizer.decode(piece)) == len(piece)
            piece = []
        else:
            piece.append(token)


@pytest.mark.parametrize("case", range(len(CONVERSATIONS)))
@pytest.mark.parametrize("name", FILES)
def test_counts_equal_mistral_common(models: Models, name: str, case: int) -> None:
    enc, oracle = models[name]
    messages, tools = CONVERSATIONS[case]
    tokens = _encode(oracle, messages, tools)
    if case in REFUSED:
        assert tokens is None
        # ctxbudget still counts what the request would send.
        assert ctxbudget.count_messages(messages, tools, encoding=enc, profile="mistral_v3") > 0
        return
    assert tokens is not None
    _assert_equal(enc, oracle, tokens, messages, tools)


def test_a_last_assistant_message_is_continued(models: Models) -> None:
    enc, oracle = models["tekken_240911.json"]
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Count to three."},
        {"role": "assistant", "content": "One, two,"},
    ]
    tokens = _encode(oracle, messages, None)
    assert tokens is not None
    assert tokens[-1] != oracle.instruct_tokenizer.tokenizer.eos_id
    _assert_equal(enc, oracle, tokens, messages, None)


def test_the_profile_counts_a_session_request(models: Models, tmp_path: Any) -> None:
    enc, oracle = models["tekken_240911.json"]
    session = ctxbudget.Session.open(
        tmp_path / "ws",
        model="open-mistral-nemo",
        context_window=128_000,
        encoding=enc,
        profile="mistral_v3",
        system="You are terse.",
    )
    assert session.profile == "mistral_v3"
    session.add_user("Weather in Oslo? ¿Y en Bogotá?")
    turn = session.prepare()
    assert turn.status == "send"
    sent = turn.to_openai_chat()
    tokens = _encode(oracle, sent["messages"], sent.get("tools"))
    assert tokens is not None
    assert turn.count.total == len(tokens)


@pytest.mark.parametrize("name", FILES)
@settings(max_examples=60)
@given(request=requests())
def test_hypothesis_requests_equal_mistral_common(
    models: Models, name: str, request: tuple[Messages, Tools]
) -> None:
    enc, oracle = models[name]
    messages, tools = request
    tokens = _encode(oracle, messages, tools)
    assume(tokens is not None)
    assert tokens is not None
    _assert_equal(enc, oracle, tokens, messages, tools)


# What Python's json.loads reads beyond JSON, and writes back in its own form.
PYTHON_JSON = (
    "Infinity",
    "-Infinity",
    "NaN",
    '{"a": Infinity, "b": [NaN, -0, 1E5, 1e400]}',
    '{"a": 1, "b": 2, "a": 3}',
    "123456789012345678901234567890",
    '"\\u00e9\\ud83d\\ude00"',
    "0123",
    "[1,]",
)


@pytest.mark.parametrize("text", PYTHON_JSON)
@pytest.mark.parametrize("name", FILES)
def test_tool_text_counts_as_python_reads_it(models: Models, name: str, text: str) -> None:
    """Tool results and call arguments are written as Python's json.loads read them (a
    result of 'Infinity' once counted 2 tokens more than mistral-common sends)."""
    enc, oracle = models[name]
    call = {"id": "000000000", "type": "function"}
    messages: Messages = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{**call, "function": {"name": "f", "arguments": text}}],
        },
        {"role": "tool", "tool_call_id": "000000000", "content": text},
        {"role": "assistant", "content": "0"},
        {"role": "user", "content": ""},
    ]
    tokens = _encode(oracle, messages, None)
    assert tokens is not None
    _assert_equal(enc, oracle, tokens, messages, None)
