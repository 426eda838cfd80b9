"""The ``harmony`` profile (gpt-oss) counts exactly the tokens ``openai-harmony`` renders
for a conversation — system and developer messages, tools, user and assistant turns,
reasoning, tool calls and results, the generation prompt — token for token, on
Hypothesis-generated conversations. The conversation is built here with
openai-harmony's own objects, following the layout docs/concepts.md states."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxbudget import Session, count_messages
from ctxbudget.tokens import profile_for

harmony = pytest.importorskip("openai_harmony")

O200K_CACHE_KEY = "fb374d419588a4632f3f557e76b4b70aebbca790"  # tiktoken's cache name
MODEL = "gpt-oss-20b"


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Tokens openai-harmony renders for a chat-shaped request, offline (its vocabulary
    file comes from the tiktoken cache the tests use)."""
    cache = Path(os.environ.get("TIKTOKEN_CACHE_DIR", ""))
    if not (cache / O200K_CACHE_KEY).is_file():
        pytest.skip("o200k_base is not in TIKTOKEN_CACHE_DIR")
    vocab = tmp_path_factory.mktemp("harmony-vocab")
    shutil.copyfile(cache / O200K_CACHE_KEY, vocab / "o200k_base.tiktoken")
    os.environ["TIKTOKEN_ENCODINGS_BASE"] = str(vocab)
    enc = harmony.load_harmony_encoding(harmony.HarmonyEncodingName.HARMONY_GPT_OSS)
    return lambda messages, tools: len(
        enc.render_conversation_for_completion(
            harmony.Conversation.from_messages(conversation(messages, tools)),
            harmony.Role.ASSISTANT,
        )
    )


def _text(message: dict[str, Any]) -> str:
    content = message.get("content") or ""
    if isinstance(content, list):
        return "".join(p["text"] for p in content)
    return str(content)


def conversation(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> list[Any]:
    """The harmony messages of a chat request, built with openai-harmony's objects."""
    h = harmony
    out = [h.Message.from_role_and_content(h.Role.SYSTEM, h.SystemContent.new())]
    lead = 0
    instructions = []
    while lead < len(messages) and messages[lead]["role"] in ("system", "developer"):
        if _text(messages[lead]):
            instructions.append(_text(messages[lead]))
        lead += 1
    dev = h.DeveloperContent.new()
    if instructions:
        dev = dev.with_instructions("\n\n".join(instructions))
    if tools:
        dev = dev.with_function_tools(
            [
                h.ToolDescription.new(t["name"], t["description"], parameters=t["parameters"])
                for t in tools
            ]
        )
    if instructions or tools:
        out.append(h.Message.from_role_and_content(h.Role.DEVELOPER, dev))
    names = {c["id"]: c["function"]["name"] for m in messages for c in m.get("tool_calls", ())}
    for m in messages[lead:]:
        role = m["role"]
        if role == "user":
            out.append(h.Message.from_role_and_content(h.Role.USER, _text(m)))
        elif role in ("system", "developer"):
            later = h.DeveloperContent.new().with_instructions(_text(m))
            out.append(h.Message.from_role_and_content(h.Role.DEVELOPER, later))
        elif role == "tool":
            author = h.Author.new(h.Role.TOOL, f"functions.{names[m['tool_call_id']]}")
            out.append(
                h.Message.from_author_and_content(author, _text(m))
                .with_channel("commentary")
                .with_recipient("assistant")
            )
        else:
            calls = m.get("tool_calls", [])
            thought = "".join(m.get("reasoning", ()))
            if thought:  # empty reasoning is not sent
                out.append(
                    h.Message.from_role_and_content(h.Role.ASSISTANT, thought).with_channel(
                        "analysis"
                    )
                )
            if _text(m):
                channel = "commentary" if calls else "final"
                out.append(
                    h.Message.from_role_and_content(h.Role.ASSISTANT, _text(m)).with_channel(
                        channel
                    )
                )
            for call in calls:
                out.append(
                    h.Message.from_role_and_content(h.Role.ASSISTANT, call["function"]["arguments"])
                    .with_channel("commentary")
                    .with_recipient(f"functions.{call['function']['name']}")
                    .with_content_type("<|constrain|>json")
                )
    return out


texts = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=60)
words = st.from_regex(r"[a-z][a-z0-9_]{0,10}", fullmatch=True)
params = st.one_of(
    st.none(),
    st.builds(
        lambda props, req: {
            "type": "object",
            "properties": props,
            "required": list(props)[:1] if req else [],
        },
        st.dictionaries(
            words,
            st.sampled_from(
                [
                    {"type": "string", "description": "A value."},
                    {"type": "integer"},
                    {"type": "string", "enum": ["a", "b"]},
                    {"type": "array", "items": {"type": "string"}},
                ]
            ),
            max_size=3,
        ),
        st.booleans(),
    ),
)
tool_lists = st.lists(
    st.builds(
        lambda name, desc, p: {"name": name, "description": desc, "parameters": p},
        words,
        texts,
        params,
    ),
    max_size=3,
    unique_by=lambda t: t["name"],
)
arguments = st.one_of(
    st.just("{}"),
    st.builds(lambda k, v: f'{{"{k}": "{v}"}}', words, words),
    texts,
)


@st.composite
def conversations(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    tools = draw(tool_lists)
    messages: list[dict[str, Any]] = [
        {"role": draw(st.sampled_from(["system", "developer"])), "content": draw(texts)}
        for _ in range(draw(st.integers(0, 2)))
    ]
    for turn in range(draw(st.integers(0, 4))):
        messages.append({"role": "user", "content": draw(texts)})
        if draw(st.booleans()):
            messages.append({"role": "system", "content": draw(texts)})
        for step in range(draw(st.integers(0, 2)) if tools else 0):
            calls = [
                {
                    "id": f"c{turn}-{step}-{n}",
                    "type": "function",
                    "function": {"name": draw(st.sampled_from(tools))["name"], "arguments": a},
                }
                for n, a in enumerate(draw(st.lists(arguments, min_size=1, max_size=2)))
            ]
            reply: dict[str, Any] = {"role": "assistant", "content": draw(texts)}
            reply["tool_calls"] = calls
            if draw(st.booleans()):
                reply["reasoning"] = [draw(texts)]
            messages.append(reply)
            messages.extend(
                {"role": "tool", "tool_call_id": c["id"], "content": draw(texts)} for c in calls
            )
        if draw(st.booleans()):
            final: dict[str, Any] = {"role": "assistant", "content": draw(texts)}
            if draw(st.booleans()):
                final["reasoning"] = [draw(texts)]
            messages.append(final)
    return messages, tools


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversations())
def test_counts_exactly_what_openai_harmony_renders(
    rendered: Any, convo: tuple[list[dict[str, Any]], list[dict[str, Any]]]
) -> None:
    messages, tools = convo
    assert count_messages(messages, tools, model=MODEL) == rendered(messages, tools)


def test_a_conversation_with_tools_token_for_token(rendered: Any) -> None:
    weather = {
        "type": "object",
        "properties": {"city": {"type": "string", "description": "City name."}},
        "required": ["city"],
    }
    tools = [{"name": "get_weather", "description": "Gets the weather.", "parameters": weather}]
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a weather bot."},
        {"role": "user", "content": "Weather in Paris and Oslo?"},
        {
            "role": "assistant",
            "content": "",
            "reasoning": ["Two cities: two calls."],
            "tool_calls": [
                {"id": "a", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}},
                {"id": "b", "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'}},
            ],
        },
        {"role": "tool", "tool_call_id": "a", "content": '{"temp": 21}'},
        {"role": "tool", "tool_call_id": "b", "content": '{"temp": 9}'},
        {"role": "assistant", "content": "Paris 21°C, Oslo 9°C.", "reasoning": ["Done."]},
        {"role": "user", "content": "Thanks!"},
    ]
    expected = rendered(messages, tools)
    for model in ("gpt-oss-20b", "gpt-oss-120b", "openai/gpt-oss-120b"):
        assert profile_for(model) == "harmony"
        assert count_messages(messages, tools, model=model) == expected
    # The chat profile counts the same request differently: the profile matters.
    assert count_messages(messages, tools, model=MODEL, profile="openai_chat") != expected


def test_a_session_on_gpt_oss_counts_the_harmony_request(tmp_path: Path, rendered: Any) -> None:
    s = Session.open(tmp_path / "ws", model="openai/gpt-oss-120b", durability="none")
    assert s.profile == "harmony"
    s.add_user("Summarise the log.")
    s.add_assistant("It failed twice.")
    s.add_user("Why?")
    turn = s.prepare()
    sent = [{"role": "system", "content": turn.system}, *turn.messages]
    assert turn.decision.projected == rendered(
        [{"role": m["role"], "content": m["content"]} for m in sent], turn.tools
    )
