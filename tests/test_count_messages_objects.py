"""count_messages takes what users pass: OpenAI SDK objects, pydantic models and
dataclasses of a provider's message shape, LangChain messages — each counted as the
message it is sent as, never as an object's dump; anything else is a TypeError."""

from __future__ import annotations

import dataclasses
from typing import Any

import pydantic
import pytest
from langchain_core.messages import (
    AIMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    trim_messages,
)
from openai.types.chat import ChatCompletionMessage

from ctxbudget import count_messages


def count(messages: list[Any]) -> int:
    return count_messages(messages, model="gpt-4o")


def test_langchain_messages_count_as_the_messages_they_send() -> None:
    assert count([HumanMessage("hi")]) == count([{"role": "user", "content": "hi"}])
    assert count([SystemMessage("be terse")]) == count([{"role": "system", "content": "be terse"}])
    call = {"name": "read_file", "args": {"path": "a.py"}, "id": "c1"}
    assert count([AIMessage("", tool_calls=[call])]) == count(
        [
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": "c1", "name": "read_file", "arguments": {"path": "a.py"}}],
            }
        ]
    )
    assert count([ToolMessage("ok", tool_call_id="c1")]) == count(
        [{"role": "tool", "content": "ok", "tool_call_id": "c1"}]
    )
    blocks = [{"type": "text", "text": "look"}, "and this"]
    assert count([HumanMessage(blocks)]) == count(
        [
            {
                "role": "user",
                "content": [{"type": "text", "text": "look"}, {"type": "text", "text": "and this"}],
            }
        ]
    )


def test_a_human_message_is_not_counted_as_its_json_dump() -> None:
    dump = HumanMessage("hi").model_dump_json()
    assert count([HumanMessage("hi")]) < count([{"role": "user", "content": dump}]) // 2


def test_openai_sdk_objects_and_user_models_count_as_their_dicts() -> None:
    message = ChatCompletionMessage(role="assistant", content="hello there")
    assert count([message]) == count([{"role": "assistant", "content": "hello there"}])

    class Msg(pydantic.BaseModel):
        role: str
        content: str
        name: str | None = None

    @dataclasses.dataclass
    class DMsg:
        role: str
        content: str

    expected = count([{"role": "user", "content": "Grüße"}])
    assert count([Msg(role="user", content="Grüße")]) == expected
    assert count([DMsg(role="user", content="Grüße")]) == expected


@pytest.mark.parametrize("bad", [object(), 42, "a string", ["role", "user"]])
def test_anything_else_is_a_type_error_naming_the_shapes(bad: object) -> None:
    with pytest.raises(TypeError, match="LangChain messages"):
        count([bad])


def test_a_model_without_role_or_type_is_no_message() -> None:
    class Note(pydantic.BaseModel):
        text: str

    with pytest.raises(TypeError, match="neither a 'role' nor a 'type'"):
        count([Note(text="x")])


def test_trim_messages_keeps_what_fits_when_counting_langchain_messages() -> None:
    history: list[Any] = [SystemMessage("You are terse.")]
    for n in range(20):
        history += [HumanMessage(f"question {n} " * 5), AIMessage(f"answer {n} " * 5)]
    one_turn = count(history[1:3])
    budget = count(history[:1]) + 6 * one_turn
    kept = trim_messages(
        history,
        max_tokens=budget,
        token_counter=lambda ms: count(list(ms)),
        strategy="last",
        include_system=True,
        start_on="human",
    )
    assert kept[0] == history[0]
    # Counts add up (the request's 1 token aside): the system message and six turns fit.
    assert len(kept) == 1 + 2 * 6
    assert count(kept) <= budget
