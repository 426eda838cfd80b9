"""Small helpers shared by the tools and settings: tool definitions per provider, and
atomic file replacement (implemented in :mod:`._atomic`)."""

from __future__ import annotations

from typing import Any

from ._atomic import atomic_write

__all__ = ["FLAVORS", "atomic_write", "strict_parameters", "tool_definition"]

FLAVORS = ("json", "openai", "openai_responses", "anthropic")


def tool_definition(
    flavor: str,
    name: str,
    description: str,
    parameters: dict[str, Any],
    strict_parameters: dict[str, Any],
) -> dict[str, Any]:
    """The tool's definition for ``flavor``: the plain JSON Schema of its arguments
    (``json``), OpenAI Chat Completions or Responses (strict), or Anthropic Messages."""
    if flavor == "json":
        return parameters
    if flavor == "openai":
        return {
            "type": "function",
            "function": {
                "name": name,
                "description": description,
                "parameters": strict_parameters,
                "strict": True,
            },
        }
    if flavor == "openai_responses":
        return {
            "type": "function",
            "name": name,
            "description": description,
            "parameters": strict_parameters,
            "strict": True,
        }
    if flavor == "anthropic":
        return {"name": name, "description": description, "input_schema": parameters}
    raise ValueError(f"unknown schema flavor {flavor!r}; use {', '.join(FLAVORS)}")


def strict_parameters(
    schema: dict[str, Any], *, required: str | set[str], drop: tuple[str, ...] = ()
) -> dict[str, Any]:
    """OpenAI strict mode: every property required, the optional ones (not in
    ``required``) nullable, and keywords strict mode rejects (``drop``) removed."""
    needed = {required} if isinstance(required, str) else required
    properties: dict[str, Any] = {}
    for prop_name, spec in schema.get("properties", {}).items():
        prop = {k: v for k, v in spec.items() if k not in drop}
        if prop_name not in needed:
            prop["type"] = [prop["type"], "null"]
            if "enum" in prop:
                prop["enum"] = [*prop["enum"], None]
        properties[prop_name] = prop
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }
