"""Function tools are counted as the model reads them: the TypeScript namespace of
OpenAI's harmony format. The rendering equals openai-harmony's (the oracle) on generated
schemas, and a request's tool tokens are that text's plus the calibrated framing."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxbudget import Encoding, count_messages
from ctxbudget.tokens import FUNCTION_TOKENS, FUNCTIONS_TOKENS, render_tools

harmony = pytest.importorskip("openai_harmony")

O200K_CACHE_KEY = "fb374d419588a4632f3f557e76b4b70aebbca790"  # tiktoken's cache name


@pytest.fixture(scope="module")
def developer_text(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Renders a developer message with ``tools`` through openai-harmony, offline (its
    vocabulary file comes from the tiktoken cache the tests use)."""
    cache = Path(os.environ.get("TIKTOKEN_CACHE_DIR", ""))
    if not (cache / O200K_CACHE_KEY).is_file():
        pytest.skip("o200k_base is not in TIKTOKEN_CACHE_DIR")
    vocab = tmp_path_factory.mktemp("harmony-vocab")
    shutil.copyfile(cache / O200K_CACHE_KEY, vocab / "o200k_base.tiktoken")
    os.environ["TIKTOKEN_ENCODINGS_BASE"] = str(vocab)
    enc = harmony.load_harmony_encoding(harmony.HarmonyEncodingName.HARMONY_GPT_OSS)

    def render(tools: list[dict[str, Any]]) -> str:
        described = [
            harmony.ToolDescription.new(t["name"], t["description"], parameters=t["parameters"])
            for t in tools
        ]
        content = harmony.DeveloperContent.new().with_function_tools(described)
        message = harmony.Message.from_role_and_content(harmony.Role.DEVELOPER, content)
        text = enc.decode_utf8(enc.render(message))
        prefix = "<|start|>developer<|message|>"
        assert text.startswith(prefix) and text.endswith("<|end|>"), text
        return text[len(prefix) : -len("<|end|>")]

    return render


names = st.from_regex(r"[a-z][a-z0-9_]{0,12}", fullmatch=True)
words = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cc", "Cs", "Zl", "Zp")), max_size=30
)
literals = st.lists(st.from_regex(r"[A-Za-z0-9 _-]{1,10}", fullmatch=True), min_size=1, max_size=4)


def _decorated(base: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    extras = st.fixed_dictionaries(
        {},
        optional={
            "description": words,
            "title": words,
            "examples": st.lists(words, max_size=2),
            "nullable": st.booleans(),
            "default": st.one_of(words, st.integers(-5, 5), st.booleans()),
        },
    )
    return st.builds(lambda b, e: {**b, **e}, base, extras)


leaves = st.one_of(
    st.just({"type": "string"}),
    st.builds(lambda vals: {"type": "string", "enum": vals}, literals),
    st.sampled_from([{"type": "number"}, {"type": "integer"}, {"type": "boolean"}]),
    st.just({"type": ["string", "null"]}),
    st.just({"type": "array"}),
    st.just({}),
)


def _objects(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    props = st.dictionaries(names, children, max_size=4)
    return st.builds(
        lambda p, req, desc: {
            "type": "object",
            "properties": p,
            "required": [k for k in p if req],
            **({"description": desc} if desc else {}),
        },
        props,
        st.booleans(),
        st.one_of(st.none(), words),
    )


schemas = st.recursive(
    _decorated(leaves),
    lambda inner: st.one_of(
        _objects(inner),
        st.builds(lambda items: {"type": "array", "items": items}, inner),
        st.builds(
            lambda variants, desc: {"oneOf": variants, **({"description": desc} if desc else {})},
            st.lists(_decorated(leaves), min_size=1, max_size=3),
            st.one_of(st.none(), words),
        ),
    ),
    max_leaves=8,
)
tools = st.lists(
    st.builds(
        lambda name, desc, params: {"name": name, "description": desc, "parameters": params},
        names,
        st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40),
        st.one_of(st.none(), _objects(schemas)),
    ),
    min_size=1,
    max_size=3,
    unique_by=lambda t: t["name"],
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tools)
def test_rendering_equals_openai_harmony(developer_text: Any, tools: list[dict[str, Any]]) -> None:
    assert render_tools(tools) == developer_text(tools)


def test_every_tool_shape_renders_alike(developer_text: Any) -> None:
    params = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    neutral = {"name": "find", "description": "Finds things.", "parameters": params}
    shapes = [
        {"type": "function", "function": neutral},
        {"type": "function", **neutral, "strict": True},
        {"name": "find", "description": "Finds things.", "input_schema": params},
    ]
    for shape in shapes:
        assert render_tools([shape]) == developer_text([neutral])
    assert render_tools([{"type": "web_search_preview"}]) == "# Tools\n\n## functions\n"


def test_a_requests_tool_tokens_are_the_rendering_plus_its_framing() -> None:
    enc = Encoding("o200k_base")
    params = {"type": "object", "properties": {"path": {"type": "string"}}}
    defs = [{"type": "function", "function": {"name": n, "parameters": params}} for n in "ab"]
    hi = [{"role": "user", "content": "hi"}]
    added = count_messages(hi, defs, model="gpt-4o") - count_messages(hi, model="gpt-4o")
    assert added == FUNCTIONS_TOKENS + FUNCTION_TOKENS * len(defs) + enc.count(render_tools(defs))
