"""``ctxbudget history …``: list, search, read, verify, recover and export a transcript.

``list``, ``items``, ``search`` and ``read`` go through the ``session_history`` tool (the
same bounds and privacy floor an agent gets); what they print is the items' text as a
person reads it, tool calls and results included, never the tool's raw JSON.

The transcript is a workspace's (``WORKSPACE``) or a PostgreSQL conversation's
(``--store postgresql://… --conversation ID``); ``recover`` applies to workspaces only.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypeVar

from ._cli_errors import CommandError, UsageError
from ._cli_retention import cmd_delete, cmd_prune
from ._redact import redact
from .budget_record import read_budgets
from .errors import InvalidArgumentError
from .history import (
    FileRecovery,
    FileVerify,
    History,
    Row,
    backend_of,
    is_database_url,
    url_problem,
)
from .session_history import SessionHistoryTool

__all__ = ["SNIPPET_CHARS", "cmd_history", "render_parts"]

SNIPPET_CHARS = 96
"""Characters of text shown per item in the ``items`` and ``search`` tables."""

_PAGE = 25  # the tool's largest item page
T = TypeVar("T")


_PROG = "ctxbudget history"


def _usage(message: str) -> UsageError:
    """Invalid arguments to a history command (exit 2)."""
    return UsageError(_PROG, message)


def _failed(message: str) -> CommandError:
    """A history command could not do what was asked (exit 1)."""
    return CommandError(_PROG, message)


@dataclass(frozen=True)
class _Target:
    """The transcript a command reads: a workspace, or a PostgreSQL conversation."""

    workspace: Path | None
    url: str | None = None
    conversation: str | None = None

    def open(self, *, recover: bool = True) -> History:
        if self.workspace is not None:
            return History.open(self.workspace, recover=recover)
        if backend_of(self.url) == "memory":
            return History.open(self.url or "")
        # Reading never creates a conversation: a mistyped id is an error instead.
        try:
            return History.open(self.url or "", conversation=self.conversation, create=False)
        except InvalidArgumentError as e:
            if "does not exist" in str(e):  # a valid id the database does not hold
                raise _failed(
                    f"conversation {self.conversation!r} does not exist in the database of "
                    "--store (ids are case-sensitive; nothing was created): check "
                    "--conversation and the URL"
                ) from None
            raise _usage(f"{e} (--store URL, --conversation ID)") from None

    @property
    def shown(self) -> str:
        """How a command line names it in messages and hints (any password redacted)."""
        if self.workspace is not None:
            return redact(str(self.workspace))
        if self.conversation is None:  # an in-memory store: its name says it all
            return str(self.url)
        return redact(f"--store {self.url} --conversation {self.conversation}")


def _value_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def render_parts(parts: Iterable[Mapping[str, Any]]) -> str:
    """A row's parts as a person reads them: text as it is, ``→ tool(args)`` for a call,
    ``← tool: output`` for a result, ``[media]`` for media."""
    pieces = []
    for p in parts:
        kind = p.get("type")
        if kind == "text":
            pieces.append(str(p.get("text", "")))
        elif kind == "tool_call":
            args = p.get("arguments")
            if isinstance(args, str):
                with contextlib.suppress(ValueError):
                    args = json.loads(args)
            shown = (
                ", ".join(f"{k}={_value_text(v)}" for k, v in args.items())
                if isinstance(args, dict)
                else _value_text(args if args is not None else "")
            )
            pieces.append(f"→ {p.get('name', '?')}({shown})")
        elif kind == "tool_result":
            pieces.append(f"← {p.get('name', 'tool')}: {_value_text(p.get('output', ''))}")
        elif kind == "media":
            pieces.append("[media]")
    return "\n".join(pieces)


def _snippet(text: str, query: str | None) -> str:
    flat = " ".join(text.split())
    at = flat.lower().find(query.lower()) if query else -1
    if len(flat) <= SNIPPET_CHARS:
        return flat
    start = 0 if at < 0 else max(0, min(at - SNIPPET_CHARS // 3, len(flat) - SNIPPET_CHARS))
    cut = flat[start : start + SNIPPET_CHARS - 2]
    return ("…" if start else "") + cut + "…"


def _rows_by_seq(history: History, seqs: Sequence[int]) -> dict[int, Row]:
    wanted, found = set(seqs), {}
    if wanted:
        for row in history.rows(since_seq=min(wanted)):
            if row.seq in wanted:
                found[row.seq] = row
                if len(found) == len(wanted):
                    break
    return found


# session_history codes that mean the command line's own arguments are wrong (exit 2);
# every other code is a failure to do it (exit 1).
_ARGUMENT_CODES = frozenset({"invalid_arguments", "query_required", "item_id_required"})


def _tool_error(result: Mapping[str, Any], shown: str) -> UsageError | CommandError:
    """A ``session_history`` refusal worded for the command line (the tool's own advice
    names tool actions and arguments, which are not commands)."""
    code, error = result["code"], result["error"]
    if code == "query_required":
        return _usage("search needs a QUERY of 1 to 1024 characters")
    if code == "window_not_found":
        return _failed(
            f"no such window in the retrievable history of {shown}; list the windows "
            f"with: ctxbudget history list {shown}"
        )
    if code == "history_changed":
        return _failed(
            f"the transcript of {shown} changed while it was being read (another process "
            "wrote or rotated it); run the command again"
        )
    if code in _ARGUMENT_CODES:
        return _usage(f"{code}: {error}")
    return _failed(f"{code}: {error}")


def _pages(
    tool: SessionHistoryTool, args: dict[str, Any], key: str, limit: int | None, shown: str
) -> tuple[list[Any], bool]:
    """Pages of a ``session_history`` call up to ``limit`` results; True if more exist."""
    out: list[Any] = []
    cursor = None
    while True:
        result = tool.call({**args, **({"cursor": cursor} if cursor else {})})
        if not result["ok"]:
            raise _tool_error(result, shown)
        out += result.get(key, [])
        cursor = result.get("cursor")
        if limit is not None and len(out) >= limit:
            return out[:limit], bool(cursor) or len(out) > limit
        if not cursor and result.get("has_more"):
            if shown.startswith("--store"):  # (a conversation always hands one out)
                raise _failed(f"{shown} changed while it was being read; run it again")
            # A workspace hands none out while its receipt does not vouch for the files.
            raise _failed(
                f"cannot read past the first {len(out)}: the receipt of {shown} does not "
                "vouch for its files now (a copied or restored workspace, or a write outside "
                f"ctxbudget); check with: ctxbudget history verify {shown} — a copy is "
                f"adopted by the next write or by: ctxbudget history recover {shown}"
            )
        if not cursor:
            return out, False


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
        for r in [header, *rows]
    )


def _item_table(
    history: History, items: Sequence[Mapping[str, Any]], query: str | None
) -> list[tuple[str, str, str, str]]:
    rows = _rows_by_seq(history, [int(i["item_id"]) for i in items])
    table = []
    for i in items:
        row = rows.get(int(i["item_id"]))
        text = render_parts(row.parts) if row is not None else str(i.get("text", ""))
        table.append((i["item_id"], i["window_id"], i["role"], _snippet(text, query)))
    return table


def _with_ticker(fn: Callable[[], T], ws: Path | None, what: str) -> T:
    """Runs ``fn``; on a terminal, shows the bytes being checked and the time elapsed
    (the check itself is one call into the core, which releases the GIL)."""
    if ws is None or not sys.stderr.isatty():
        return fn()
    size = sum(p.stat().st_size for p in (ws / "history").glob("chat*.jsonl"))
    done = threading.Event()
    start = time.perf_counter()

    def tick() -> None:
        while not done.wait(0.2):
            print(
                f"\r{what} {size / 2**20:,.1f} MiB… {time.perf_counter() - start:.1f} s",
                end="",
                file=sys.stderr,
                flush=True,
            )

    ticker = threading.Thread(target=tick, daemon=True)
    ticker.start()
    try:
        return fn()
    finally:
        done.set()
        ticker.join()
        print(
            f"\r{what} {size / 2**20:,.1f} MiB: {time.perf_counter() - start:.1f} s",
            file=sys.stderr,
        )


def _progress(done: int, total: int, what: str) -> None:
    if sys.stderr.isatty() and total:
        print(f"\r{what} {done * 100 // total:3d}%", end="", file=sys.stderr, flush=True)


def _verify(target: _Target, as_json: bool) -> int:
    history = target.open(recover=False)
    report = _with_ticker(history.verify, target.workspace, "verifying")
    file = report.detail
    if as_json:
        print(json.dumps(report.to_dict(), indent=2))
    elif not isinstance(file, FileVerify):
        for name, c in (("live rows", report.live), ("archived rows", report.archive)):
            print(f"{name}: {c.rows} rows, {c.malformed} malformed")
        if report.seq_violations:
            print(f"seq violations: {report.seq_violations} ({report.first_seq_violation})")
        print(f"{history.location}\n{'OK' if report.ok else 'NOT OK'}")
    else:
        for name, f in (("chat.jsonl", file.chat), ("chat-archive.jsonl", file.archive)):
            damage = (
                f"damage at byte {f.damage[0]} (line {f.damage[1]}): {f.damage[2]}"
                if f.damage
                else "no damage"
            )
            print(
                f"{name}: {f.bytes:,} bytes, {f.batches} batches, {f.rows} rows "
                f"({f.legacy_rows} unframed, {f.malformed_lines} malformed lines), "
                f"{f.torn_bytes} torn bytes, {damage}"
            )
        print(f"receipt: {file.receipt}")
        if file.receipt == "copied":
            print(
                "note: these files were copied or restored (their identities changed) and "
                "hold exactly what the receipt vouches for; session_history cursors from "
                "before the copy are refused, and the next write (or ctxbudget history "
                f"recover {target.shown}) adopts the copy under a new epoch"
            )
        print("OK" if report.ok else "NOT OK")
    return 0 if report.ok else 1


def _recover(ws: Path, as_json: bool) -> int:
    rec = History.open(ws, recover=False).recover()
    file = rec.detail
    if as_json:
        print(json.dumps(rec.to_dict(), indent=2))
    elif isinstance(file, FileRecovery):
        print(
            f"changed: {rec.changed}; torn bytes moved: "
            f"{file.chat_torn_bytes + file.archive_torn_bytes}"
            f"{' to ' + ', '.join(file.moved_to) if file.moved_to else ''}; "
            f"damage: {file.damage or 'none'}"
        )
    else:
        print(f"changed: {rec.changed}")
    return 0


def _export(target: _Target, output: str | None) -> int:
    rows = list(target.open(recover=False).rows())
    with contextlib.ExitStack() as stack:
        out = stack.enter_context(open(output, "w", encoding="utf-8")) if output else sys.stdout
        for n, row in enumerate(rows, 1):
            out.write(json.dumps(asdict(row), ensure_ascii=False) + "\n")
            if n % 1000 == 0:
                _progress(n, len(rows), "export")
    _progress(len(rows), len(rows), "export")
    if sys.stderr.isatty():
        print(file=sys.stderr)
    return 0


def _list(target: _Target, history: History, tool: SessionHistoryTool, as_json: bool) -> int:
    call = {"action": "list_windows", "limit": 50}
    windows, _ = _pages(tool, call, "windows", None, target.shown)
    if as_json:
        print(json.dumps(windows, indent=2))
        return 0
    budgets = read_budgets(history)
    if budgets:
        print(f"budget: {budgets[-1].describe()}")
    if not windows:
        print("no windows: the transcript holds no rows (above the privacy floor) yet")
        return 0
    print(
        _table(
            ("window", "kind", "items"),
            [(w["window_id"], w["boundary_kind"], str(w["item_count"])) for w in windows],
        )
    )
    print(f"\nnext: ctxbudget history items {target.shown} --window {windows[-1]['window_id']}")
    return 0


def _read(
    target: _Target, history: History, tool: SessionHistoryTool, item_id: int, as_json: bool
) -> int:
    call: dict[str, Any] = {"action": "read_item", "item_id": str(item_id), "limit_chars": 16_000}
    text, offset = "", 0
    while True:
        result = tool.call({**call, "offset_chars": offset})
        if not result["ok"]:
            if result["code"] == "item_not_found":
                raise _failed(
                    f"no item {item_id} in {history.location} that can be read (it does not "
                    f"exist, is over 1 MiB, or lies before a soft clear); list item IDs "
                    f"with: ctxbudget history items {target.shown}"
                )
            raise _tool_error(result, target.shown)
        item = result["items"][0]
        text += item["text"]
        if "next_char" not in item:
            break
        offset = item["next_char"]
    if as_json:
        whole = {k: v for k, v in item.items() if k not in ("next_char", "truncated")}
        print(json.dumps([{**whole, "text": text, "start_char": 0}], indent=2, ensure_ascii=False))
    else:
        row = _rows_by_seq(history, [item_id]).get(item_id)
        print(render_parts(row.parts) if row is not None else text)
    return 0


def _items(
    target: _Target,
    history: History,
    tool: SessionHistoryTool,
    call: dict[str, Any],
    limit: int,
    as_json: bool,
    query: str | None,
) -> int:
    items, more = _pages(tool, {**call, "limit": min(limit, _PAGE)}, "items", limit, target.shown)
    if as_json:
        print(json.dumps(items, indent=2, ensure_ascii=False))
        return 0
    if not items:
        print("no items" + (f" contain {query!r}" if query else ""))
        return 0
    print(_table(("item", "window", "role", "text"), _item_table(history, items, query)))
    if more:
        print(f"… more items: raise --limit (now {limit})")
    print(f"\nnext: ctxbudget history read {target.shown} {items[0]['item_id']}")
    return 0


def _target(args: argparse.Namespace) -> _Target:
    """The transcript the arguments name: ``WORKSPACE``, or ``--store URL --conversation ID``."""
    store, conversation, workspace = args.store, args.conversation, args.workspace
    if store is None and conversation is None and backend_of(workspace) == "memory":
        return _Target(None, workspace)  # an in-memory store of this process (`main()` in it)
    if store is None and workspace is not None and is_database_url(workspace):
        store, workspace = workspace, None  # a URL given in WORKSPACE's place
    if store is not None:
        if not is_database_url(store):
            raise _usage(
                f"--store: {url_problem(store)}"
                if url_problem(store)
                else f"--store takes a postgresql:// URL, got {store!r}; give a workspace "
                "directory as WORKSPACE instead"
            )
        if workspace is not None:
            raise _usage("give either a WORKSPACE or --store postgresql://…, not both")
        if not conversation:
            raise _usage(
                "a postgresql:// store holds many conversations: name one with --conversation ID"
            )
        return _Target(None, store, conversation)
    if conversation is not None:
        raise _usage(
            "--conversation applies to --store postgresql://…; a workspace holds one conversation"
        )
    if workspace is None:
        raise _usage(
            "name the transcript: a WORKSPACE directory, or --store postgresql://… "
            "--conversation ID"
        )
    problem = url_problem(workspace)
    if problem is not None:
        raise _usage(f"WORKSPACE: {problem}")
    ws = Path(workspace)
    if not (ws / "history").is_dir():
        raise _failed(
            f"{ws} has no history/ directory: give a workspace a session wrote, "
            "e.g. ctxbudget-workspace/cooperative after ctxbudget demo"
        )
    return _Target(ws)


def cmd_history(args: argparse.Namespace) -> int:
    """Runs one ``ctxbudget history`` subcommand."""
    target = _target(args)
    action = args.history_command
    if action == "verify":
        return _verify(target, args.json)
    if action == "recover":
        if target.workspace is None:
            raise _usage(
                "recover applies to a workspace's files (torn tails, interrupted "
                "rotations); a PostgreSQL conversation commits every append as one "
                "transaction and has nothing to recover — check it with verify"
            )
        return _recover(target.workspace, args.json)
    if action == "delete":
        return cmd_delete(
            target.workspace,
            target.url,
            target.conversation,
            target.shown,
            yes=args.yes,
            as_json=args.json,
        )
    if action == "prune":
        return cmd_prune(
            target.open(),
            target.shown,
            keep_windows=args.keep_windows,
            older_than=args.older_than,
            below_floor=args.below_floor,
            as_json=args.json,
        )
    if action == "export":
        if args.json:
            raise _usage("export always writes JSON Lines (one row per line); drop --json")
        return _export(target, args.output)
    history = target.open()
    tool = SessionHistoryTool(history)
    if action == "list":
        return _list(target, history, tool, args.json)
    if action == "read":
        return _read(target, history, tool, args.item_id, args.json)
    window = {"window_id": args.window} if args.window else {}
    if action == "items":
        call = {"action": "list_items", **window}
        return _items(target, history, tool, call, args.limit, args.json, None)
    call = {"action": "search", "query": args.query, **window}
    return _items(target, history, tool, call, args.limit, args.json, args.query)
