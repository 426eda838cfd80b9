"""The ``mistral_v3`` and ``mistral_v7`` counting profiles: a request's count equals the
length of the tokens ``mistral-common``'s request encoder
(``MistralTokenizer.encode_chat_completion``) produces for it, for the tekken and
SentencePiece files ``mistral-common`` ships (instruct tokenizers v3 and v7), on fixed
conversations (tools, tool calls, tool results), generated ones and a session's turns;
and each text piece between control tokens counts as ``mistral-common`` encodes it."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from chat_conversations import CONVERSATIONS, Messages, Tools, requests
from hypothesis import assume, given, settings
from tokenizer_files import package_file

import ctxbudget
from ctxbudget import Encoding
from ctxbudget.tokens import RequestProfile

# Each file mistral-common ships with the profile of its instruct tokenizer version.
PROFILE_OF: dict[str, RequestProfile] = {
    "tekken_240911.json": "mistral_v3",
    "tekken_240718.json": "mistral_v3",
    "mistral_instruct_tokenizer_240323.model.v3": "mistral_v3",
    "mistral_instruct_tokenizer_241114.model.v7": "mistral_v7",
    "mistral_instruct_tokenizer_241114.model.v7m1": "mistral_v7",
}
FILES = tuple(PROFILE_OF)

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
    for name, profile in PROFILE_OF.items():
        path = package_file("mistral_common", "data", name)
        oracle = MistralTokenizer.from_file(str(path))
        version = type(oracle.instruct_tokenizer).__name__
        assert version == f"InstructTokenizerV{profile[-1]}", (name, version)
        loaded[name] = (Encoding.from_file(path), oracle)
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
    name: str, enc: Encoding, oracle: Any, tokens: list[int], messages: Messages, tools: Tools
) -> None:
    counted = ctxbudget.count_messages(messages, tools, encoding=enc, profile=PROFILE_OF[name])
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
        profile = PROFILE_OF[name]
        assert ctxbudget.count_messages(messages, tools, encoding=enc, profile=profile) > 0
        return
    assert tokens is not None
    _assert_equal(name, enc, oracle, tokens, messages, tools)


@pytest.mark.parametrize(
    "name", ["tekken_240911.json", "mistral_instruct_tokenizer_241114.model.v7"]
)
def test_a_last_assistant_message_is_continued(models: Models, name: str) -> None:
    enc, oracle = models[name]
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Count to three."},
        {"role": "assistant", "content": "One, two,"},
    ]
    tokens = _encode(oracle, messages, None)
    assert tokens is not None
    assert tokens[-1] != oracle.instruct_tokenizer.tokenizer.eos_id
    _assert_equal(name, enc, oracle, tokens, messages, None)


SESSION_FILES = ["tekken_240911.json", "mistral_instruct_tokenizer_241114.model.v7"]


@pytest.mark.parametrize("name", SESSION_FILES)
def test_the_profile_counts_a_session_request(models: Models, name: str, tmp_path: Any) -> None:
    enc, oracle = models[name]
    session = ctxbudget.Session.open(
        tmp_path / "ws",
        model="open-mistral-nemo",
        context_window=128_000,
        encoding=enc,
        profile=PROFILE_OF[name],
        system="You are terse.",
    )
    assert session.profile == PROFILE_OF[name]
    session.add_user("Weather in Oslo? ¿Y en Bogotá?")
    turn = session.prepare()
    assert turn.status == "send"
    sent = turn.to_openai_chat()
    tokens = _encode(oracle, sent["messages"], sent.get("tools"))
    assert tokens is not None
    assert turn.count.total == len(tokens)


@pytest.mark.parametrize("name", SESSION_FILES)
def test_a_session_counts_every_turn_as_mistral_common(
    models: Models, name: str, tmp_path: Any
) -> None:
    """A conversation of several turns (tool calls, their results, replies) counted by
    the session at each prepare equals mistral-common's tokens for the request sent."""
    enc, oracle = models[name]
    session = ctxbudget.Session.open(
        tmp_path / "ws",
        model="open-mistral-nemo",
        context_window=128_000,
        encoding=enc,
        profile=PROFILE_OF[name],
        system="You are terse. Réponds en français si on te parle français.",
    )
    weather = {"city": "Oslo"}
    turns: list[tuple[str, str | None, str]] = [
        ("Weather in Oslo?", '{"temp": 4, "sky": "snow"}', "4 °C and snow."),
        ("Et à Paris ?", None, "Je ne sais pas sans outil."),
        ("def f(x):\n    return x ** 2  # 🐍", "ok", "Squares x.  "),
    ]
    counted_and_sent: list[tuple[int, int]] = []
    for index, (user, result, reply) in enumerate(turns):
        session.add_user(user)
        turn = session.prepare()
        assert turn.status == "send"
        sent = turn.to_openai_chat()
        tokens = _encode(oracle, sent["messages"], sent.get("tools"))
        assert tokens is not None
        counted_and_sent.append((turn.count.total, len(tokens)))
        if result is not None:
            call_id = f"call{index:05d}"
            session.add_assistant(
                None,
                [{"id": call_id, "name": "get_weather", "arguments": json.dumps(weather)}],
            )
            session.add_tool_results(
                [{"call_id": call_id, "name": "get_weather", "output": result}]
            )
            turn = session.prepare()
            sent = turn.to_openai_chat()
            tokens = _encode(oracle, sent["messages"], sent.get("tools"))
            assert tokens is not None
            counted_and_sent.append((turn.count.total, len(tokens)))
        session.add_assistant(reply)
    assert len(counted_and_sent) == 5
    assert [c for c, _ in counted_and_sent] == [s for _, s in counted_and_sent]


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
    _assert_equal(name, enc, oracle, tokens, messages, tools)


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
    _assert_equal(name, enc, oracle, tokens, messages, None)
