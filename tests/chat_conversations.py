"""Chat requests (OpenAI Chat messages and function tools) that the chat-template and
request-encoder tests render: tools with Unicode and quoting in their schemas, tool
calls with JSON-object and JSON-string arguments, tool results, reasoning text."""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import strategies as st

Messages = list[dict[str, Any]]
Tools = list[dict[str, Any]] | None

WEATHER: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city, in °C — «now»",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name"},
                "days": {"type": "integer", "minimum": 1, "maximum": 7},
                "units": {"type": "string", "enum": ["c", "f"]},
                "ratio": {"type": "number", "default": 0.5},
            },
            "required": ["city"],
        },
    },
}

SEARCH: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "search",
        "description": 'Search the web for "quoted" text\nwith newlines',
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
    },
}

CONVERSATIONS: list[tuple[Messages, Tools]] = [
    ([{"role": "user", "content": "Hello!"}], None),
    (
        [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "What's the weather in Paris?"},
        ],
        [WEATHER, SEARCH],
    ),
    (
        [
            {"role": "user", "content": "Weather in 東京 and Zürich?"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": {"city": "東京"}},
                    },
                    {
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Zürich"}'},
                    },
                ],
            },
            {"role": "tool", "content": '{"temp": 21.5}'},
            {"role": "tool", "content": '{"temp": -3}'},
            {"role": "assistant", "content": "<think>\nplan\n</think>\n\nTokyo 21.5, Zürich -3."},
            {"role": "user", "content": "Thanks 👍"},
        ],
        [WEATHER],
    ),
    # One call per turn, with the nine-character call ids Mistral's templates require.
    (
        [
            {"role": "system", "content": "Answer in one line."},
            {"role": "user", "content": "Search for «ctxbudget», then the weather in Oslo."},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "call00001",
                        "type": "function",
                        "function": {"name": "search", "arguments": {"q": "ctxbudget"}},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call00001", "content": "3 results\n- a\n- b"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "call00002",
                        "type": "function",
                        "function": {
                            "name": "get_weather",
                            "arguments": {"city": "Oslo", "days": 2, "ratio": 0.25},
                        },
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call00002", "content": '{"temp": 4}'},
            {"role": "assistant", "content": "Found it; Oslo is 4 °C."},
            {"role": "user", "content": 'And in "Bergen"?\t\n'},
        ],
        [WEATHER, SEARCH],
    ),
]


def _with_string_arguments(messages: Messages, content: str | None) -> Messages:
    """The conversation as a client sends it to templates that concatenate the
    arguments (DeepSeek's): each call's arguments a JSON string, a calling assistant
    message's content `content`."""
    out = copy.deepcopy(messages)
    for message in out:
        if message.get("tool_calls"):
            message["content"] = content
            for call in message["tool_calls"]:
                call["function"]["arguments"] = json.dumps(call["function"]["arguments"])
    return out


_ONE_CALL_PER_TURN = CONVERSATIONS[-1]
CONVERSATIONS.append((_with_string_arguments(_ONE_CALL_PER_TURN[0], ""), _ONE_CALL_PER_TURN[1]))
CONVERSATIONS.append((_with_string_arguments(_ONE_CALL_PER_TURN[0], None), _ONE_CALL_PER_TURN[1]))
NULL_CONTENT_CALLS = len(CONVERSATIONS) - 1
"""The conversation whose calling messages have null content (`transformers` drops it,
so templates that add the content to text refuse it)."""

_text = st.text(max_size=40)
_call_id = st.text("abcdefghijklmnopqrstuvwxyz0123456789", min_size=9, max_size=9)


@st.composite
def _turn(draw: st.DrawFn) -> Messages:
    """A user message and the assistant's answer: text, or one tool call, its result
    and a text."""
    user = {"role": "user", "content": draw(_text)}
    if not draw(st.booleans()):
        return [user, {"role": "assistant", "content": draw(_text)}]
    call_id = draw(_call_id)
    arguments: dict[str, Any] | str = {"city": draw(_text)}
    as_string = draw(st.booleans())
    if as_string:
        arguments = json.dumps(arguments, ensure_ascii=draw(st.booleans()))
    return [
        user,
        {
            "role": "assistant",
            "content": None if as_string else "",
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": arguments},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call_id, "content": draw(_text)},
        {"role": "assistant", "content": draw(_text)},
    ]


@st.composite
def requests(draw: st.DrawFn) -> tuple[Messages, Tools]:
    """A request as a chat template expects one: an optional system message, turns of
    user and assistant (tool calls among them), a last user message, and no tools or
    some."""
    messages: Messages = []
    if draw(st.booleans()):
        messages.append({"role": "system", "content": draw(_text)})
    for turn in draw(st.lists(_turn(), max_size=3)):
        messages.extend(turn)
    messages.append({"role": "user", "content": draw(_text)})
    tools = draw(st.sampled_from([None, [WEATHER], [WEATHER, SEARCH]]))
    return messages, tools
