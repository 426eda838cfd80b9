"""OpenAI Agents SDK integration (``pip install openai-agents``).

:class:`AgentsSession` implements the SDK's session protocol (``get_items``,
``add_items``, ``pop_item``, ``clear_session``) on top of a :class:`ctxbudget.Session`:
the items are those of the active context window. :meth:`AgentsSession.tools` gives
``session_history``, ``memory`` and ``new_context`` as the SDK's function tools, and
:meth:`AgentsSession.run_config` installs the model-input filter that runs
:meth:`ctxbudget.Session.prepare` before every model call, so advisories and rollovers
happen inside ``Runner.run``.

The transcript stays append-only: ``pop_item`` appends a retraction row that hides the
item (nothing is rewritten), and ``clear_session`` is a soft clear — a privacy floor.
SDK items are stored whole in ``meta.agents_item`` so they come back exactly.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, cast

from ..session import Session, Turn

__all__ = ["AgentsSession", "NotSentError"]


class NotSentError(RuntimeError):
    """``prepare()`` decided not to send (reject, block or pause); see ``turn``."""

    def __init__(self, turn: Turn) -> None:
        super().__init__(f"ctxbudget: request not sent ({turn.status}): {turn.reason}")
        self.turn = turn


def _plain(item: Any) -> dict[str, Any]:
    if isinstance(item, Mapping):
        return dict(item)
    dump = getattr(item, "model_dump", None)
    if callable(dump):
        result: dict[str, Any] = dump(exclude_unset=True)
        return result
    raise TypeError(f"not an Agents SDK item: {type(item).__name__}")


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    texts = []
    for part in content or ():
        if isinstance(part, Mapping) and isinstance(part.get("text"), str):
            texts.append(part["text"])
    return "\n".join(texts)


def _key(item: Mapping[str, Any]) -> str:
    return json.dumps(item, sort_keys=True, default=str)


class AgentsSession:
    """The SDK's session protocol over a ctxbudget :class:`~ctxbudget.Session`."""

    session_settings = None

    def __init__(self, session: Session, session_id: str | None = None) -> None:
        self.session = session
        self.session_id = session_id or str(session.history.workspace)
        self.last_turn: Turn | None = None
        # Keys of every SDK item the store holds, and the last seq they were read up to:
        # the model-input filter runs before every model call and must not re-read the
        # whole transcript each time.
        self._known: set[str] = set()
        self._known_seq = 0

    # ----- the session protocol -------------------------------------------------------

    def _rows_for(self, items: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """Rows for a batch of items; a result names its tool even when the call is in
        the same batch (the SDK saves a call and its output together)."""
        names = self._call_names()
        for item in items:
            if item.get("type") == "function_call":
                names[str(item.get("call_id"))] = str(item.get("name"))
        return [self._row_for(item, names) for item in items]

    def _row_for(self, item: dict[str, Any], names: Mapping[str, str]) -> dict[str, Any]:
        kind = item.get("type")
        meta = {"agents_item": item}
        if kind == "function_call":
            raw = item.get("arguments") or "{}"
            try:
                arguments: Any = json.loads(raw)
            except ValueError:
                arguments = raw
            part = {
                "type": "tool_call",
                "id": item.get("call_id"),
                "name": item.get("name"),
                "arguments": arguments,
            }
            return {"kind": "message", "role": "assistant", "parts": [part], "meta": meta}
        if kind == "function_call_output":
            name = names.get(str(item.get("call_id")))
            part = {
                "type": "tool_result",
                "call_id": item.get("call_id"),
                "output": item.get("output"),
            }
            if name:
                part["name"] = name
            return {"kind": "message", "role": "tool", "parts": [part], "meta": meta}
        role = item.get("role")
        if role in ("user", "system", "developer", "assistant"):
            text = _content_text(item.get("content"))
            parts = [{"type": "text", "text": text}] if text else []
            row_role = "system" if role == "developer" else role
            return {"kind": "message", "role": row_role, "parts": parts, "meta": meta}
        # Reasoning and other items: kept whole, shown to no one but the SDK.
        return {"kind": "message", "role": "assistant", "parts": [], "meta": meta}

    def _call_names(self) -> dict[str, str]:
        names = {}
        for row in self.session._window_rows:
            for p in row.parts:
                if p.get("type") == "tool_call":
                    names[str(p.get("id"))] = str(p.get("name"))
        return names

    def _items(self) -> list[dict[str, Any]]:
        s = self.session
        s._sync()
        items = []
        for row in s._window_rows:
            if row.seq in s._hidden or row.kind in ("boundary", "rejected", "retraction"):
                continue
            stored = row.meta.get("agents_item")
            if isinstance(stored, dict):
                items.append(stored)
            else:
                text = "\n".join(p.get("text", "") for p in row.parts if p.get("type") == "text")
                role = "assistant" if row.role == "assistant" else "user"
                items.append({"role": role, "content": text})
        return items

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """Items of the active window, oldest first (the latest ``limit`` if given)."""
        items = self._items()
        return items[-limit:] if limit else items

    async def add_items(self, items: list[Any]) -> None:
        """Appends the items as one batch."""
        rows = self._rows_for([_plain(i) for i in items])
        if rows:
            self.session.history.append(rows)
            self.session._sync()

    async def pop_item(self) -> Any | None:
        """Hides the most recent item with a retraction row and returns it."""
        s = self.session
        s._sync()
        for row in reversed(s._window_rows):
            if row.seq in s._hidden or row.kind in ("boundary", "lead_in", "retraction"):
                continue
            s.history.append(
                [{"kind": "retraction", "role": "system", "meta": {"retracts": row.seq}}]
            )
            s._sync()
            stored = row.meta.get("agents_item")
            return stored if isinstance(stored, dict) else None
        return None

    async def clear_session(self) -> None:
        """A soft clear: a reset boundary, the privacy floor."""
        self.session.history.clear_soft()
        self.session._sync()

    # ----- tools and the model-input filter -------------------------------------------

    def tools(self) -> list[Any]:
        """``session_history``, ``memory`` and ``new_context`` (as offered) as the SDK's
        function tools."""
        from agents import FunctionTool

        def make(definition: Mapping[str, Any]) -> Any:
            name = definition["name"]

            async def invoke(_ctx: Any, args_json: str) -> str:
                result = self.session.run_tool(name, args_json if args_json else {})
                return json.dumps(result, ensure_ascii=False)

            return FunctionTool(
                name=name,
                description=definition["description"],
                params_json_schema=dict(definition["parameters"]),
                on_invoke_tool=invoke,
                strict_json_schema=False,
            )

        return [make(d) for d in self.session._tools()]

    def input_filter(self, data: Any) -> Any:
        """``RunConfig.call_model_input_filter``: runs ``prepare()`` and sends the active
        window (lead-in, advisories, ``[id: N]`` suffixes) with the system text."""
        from agents.run_config import ModelInputData

        s = self.session
        s._sync()
        known = self._known_items()
        # Items of this run the SDK has not saved yet: everything after the last one the
        # store knows. They are recorded now, so prepare() counts them.
        pending = [_plain(i) for i in data.model_data.input]
        last_known = max((n for n, i in enumerate(pending) if _key(i) in known), default=-1)
        unsaved = pending[last_known + 1 :]
        if unsaved:
            s.history.append(self._rows_for(unsaved))
            s._sync()
        turn = s.prepare()
        self.last_turn = turn
        if turn.status != "send":
            raise NotSentError(turn)
        instructions = "\n\n".join(x for x in (data.model_data.instructions, turn.system) if x)
        return ModelInputData(input=cast(Any, self._model_input(turn)), instructions=instructions)

    def _known_items(self) -> set[str]:
        """Keys of the SDK items in the store, updated from the rows added since."""
        for row in self.session.history.rows(since_seq=self._known_seq + 1):
            self._known_seq = max(self._known_seq, row.seq)
            item = row.meta.get("agents_item")
            if isinstance(item, dict):
                self._known.add(_key(item))
        return self._known

    def _model_input(self, turn: Turn) -> list[dict[str, Any]]:
        items = self._items()
        if self.session.mode_active:
            # User rows end with their item ID, as in Turn.messages.
            ids = {m["item_id"]: m["content"] for m in turn.messages if m.get("item_id")}
            rows = [
                r
                for r in self.session._window_rows
                if r.seq not in self.session._hidden
                and r.kind not in ("boundary", "rejected", "retraction")
            ]
            out = []
            for row, item in zip(rows, items, strict=False):
                if row.role == "user" and row.kind == "message" and row.id in ids:
                    out.append({"role": "user", "content": ids[row.id]})
                else:
                    out.append(item)
            return out
        return items

    def run_config(self, **kwargs: Any) -> Any:
        """A ``RunConfig`` with the model-input filter installed."""
        from agents import RunConfig

        return RunConfig(call_model_input_filter=self.input_filter, **kwargs)

    @staticmethod
    def new_id() -> str:
        return uuid.uuid4().hex


def sdk_items(items: Sequence[Any]) -> list[dict[str, Any]]:
    """Plain dicts of SDK items (for tests and logs)."""
    return [_plain(i) for i in items]
