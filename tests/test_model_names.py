"""Model names as hosts write them (LiteLLM's provider/model, Bedrock IDs, Hugging Face
repositories, Ollama tags): their context windows and tokenizers (SPEC §1)."""

from __future__ import annotations

from pathlib import Path

import pytest

import ctxbudget
from ctxbudget import InvalidArgumentError, Session, UnknownModelError
from ctxbudget.session import context_window_for


@pytest.mark.parametrize(
    ("model", "window", "encoding", "estimate"),
    [
        ("openai/gpt-4o", 128_000, "o200k_base", None),
        ("azure/gpt-4.1-mini", 1_047_576, "o200k_base", None),
        ("openrouter/openai/gpt-5-mini", 400_000, "o200k_base", None),
        ("anthropic/claude-sonnet-4-5", 200_000, "cl100k_base", 1.3),
        ("bedrock/us.anthropic.claude-3-5-sonnet-20241022-v2:0", 200_000, "cl100k_base", 1.3),
        ("gemini/gemini-2.5-pro", 1_048_576, "o200k_base", 1.1),
        ("vertex_ai/gemini-1.5-pro-002", 2_097_152, "o200k_base", 1.1),
    ],
)
def test_provider_prefixed_names_open_a_session(
    tmp_path: Path, model: str, window: int, encoding: str, estimate: float | None
) -> None:
    s = Session.open(tmp_path, model=model, durability="none")
    assert s.budget.context_window == window
    assert s.encoding.name == encoding
    assert s.encoding.estimate_scale == estimate
    assert ctxbudget.count_tokens("hello", model=model) >= 1


@pytest.mark.parametrize(
    ("model", "window"),
    [
        ("meta-llama/Llama-3.1-8B-Instruct", 131_072),
        ("hosted_vllm/Qwen/Qwen2.5-7B-Instruct", 32_768),
        ("bedrock/meta.llama3-1-70b-instruct-v1:0", 131_072),
        ("deepseek/deepseek-chat", 131_072),
        ("mistral/mistral-large-latest", 131_072),
        ("groq/llama-3.3-70b-versatile", 131_072),
    ],
)
def test_open_weight_windows_are_known_and_their_tokenizer_is_asked_for(
    tmp_path: Path, model: str, window: int
) -> None:
    assert context_window_for(model) == window
    with pytest.raises(UnknownModelError, match="encoding="):
        Session.open(tmp_path, model=model, durability="none")
    s = Session.open(tmp_path, model=model, encoding="o200k_base", durability="none")
    assert s.budget.context_window == window


def test_ollama_windows_are_the_servers_to_say(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="num_ctx"):
        Session.open(tmp_path, model="ollama/llama3.1:8b", encoding="o200k_base")
    s = Session.open(
        tmp_path, model="ollama/llama3.1:8b", encoding="o200k_base", context_window=8_192
    )
    assert s.budget.context_window == 8_192


def test_unknown_models_keep_their_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="context_window="):
        Session.open(tmp_path, model="my-private-model")
    with pytest.raises(UnknownModelError):
        ctxbudget.encoding_for_model("openai/not-a-model")
