"""The ``ctxbudget`` command line."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from .errors import CtxBudgetError
from .tokens import Encoding

__all__ = ["main"]

DEFAULT_ENCODINGS = ("o200k_base", "cl100k_base", "p50k_base", "r50k_base")
SAMPLE = "agent_session.md"
TIMING_REPEATS = 3


@dataclass(frozen=True, slots=True)
class CountRow:
    """One line of ``ctxbudget count`` output."""

    file: str
    bytes: int
    encoding: str
    tokens: int
    exact: bool
    forced_cuts: int
    seconds: float


def _read_inputs(files: Sequence[str], use_sample: bool) -> list[tuple[str, str]]:
    inputs: list[tuple[str, str]] = []
    if use_sample:
        text = resources.files("ctxbudget").joinpath("samples").joinpath(SAMPLE).read_text("utf-8")
        inputs.append((f"sample:{SAMPLE}", text))
    for name in files:
        if name == "-":
            data = sys.stdin.buffer.read()
        else:
            try:
                with open(name, "rb") as fh:
                    data = fh.read()
            except OSError as exc:
                raise SystemExit(f"ctxbudget: cannot read {name}: {exc.strerror}") from exc
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            print(
                f"ctxbudget: warning: {name} is not valid UTF-8 (first bad byte at offset "
                f"{exc.start}); invalid bytes are counted as U+FFFD",
                file=sys.stderr,
            )
            text = data.decode("utf-8", errors="replace")
        inputs.append((name, text))
    return inputs


def _count(encodings: Sequence[Encoding], inputs: Sequence[tuple[str, str]]) -> list[CountRow]:
    rows = []
    for name, text in inputs:
        for enc in encodings:
            best = float("inf")
            for _ in range(TIMING_REPEATS):
                start = time.perf_counter()
                detail = enc.count_detail(text)
                best = min(best, time.perf_counter() - start)
            rows.append(
                CountRow(
                    file=name,
                    bytes=len(text.encode("utf-8", errors="surrogatepass")),
                    encoding=enc.name + (" (estimate)" if enc.is_estimate else ""),
                    tokens=detail.tokens,
                    exact=detail.exact,
                    forced_cuts=detail.forced_cuts,
                    seconds=best,
                )
            )
    return rows


def _format_table(rows: Sequence[CountRow]) -> str:
    def duration(seconds: float) -> str:
        if seconds < 1e-3:
            return f"{seconds * 1e6:.1f} µs"
        if seconds < 1:
            return f"{seconds * 1e3:.2f} ms"
        return f"{seconds:.2f} s"

    def rate(row: CountRow) -> str:
        return f"{row.bytes / row.seconds / 2**20:.1f}" if row.seconds > 0 else "-"

    header = ("file", "bytes", "encoding", "tokens", "exact", "time", "MiB/s")
    body = [
        (
            r.file,
            f"{r.bytes:,}",
            r.encoding,
            f"{r.tokens:,}",
            "yes" if r.exact else f"no ({r.forced_cuts} cuts)" if r.forced_cuts else "no",
            duration(r.seconds),
            rate(r),
        )
        for r in rows
    ]
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]
    numeric = {1, 3, 5, 6}

    def fmt(line: Sequence[str]) -> str:
        cells = [
            cell.rjust(w) if i in numeric else cell.ljust(w)
            for i, (cell, w) in enumerate(zip(line, widths, strict=True))
        ]
        return "  ".join(cells).rstrip()

    return "\n".join([fmt(header), *(fmt(line) for line in body)])


def _cmd_count(args: argparse.Namespace) -> int:
    if not args.files and not args.sample:
        raise SystemExit("ctxbudget count: give FILE arguments, '-' for stdin, or --sample")
    if args.model:
        encodings = [Encoding.for_model(args.model, cache_size=0)]
    else:
        names = args.encoding or list(DEFAULT_ENCODINGS)
        encodings = [Encoding(name, cache_size=0) for name in names]
    rows = _count(encodings, _read_inputs(args.files, args.sample))
    if args.json:
        print(json.dumps([asdict(r) for r in rows], indent=2))
    else:
        print(_format_table(rows))
        print(
            f"\ntime: best of {TIMING_REPEATS} cold counts (no cache), one thread. "
            "exact = identical to tiktoken's encode_ordinary."
        )
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_agent, summary_table

    root = Path(args.workspace)
    agents = ["cooperative", "stubborn"] if args.agent == "both" else [args.agent]
    results = [
        run_agent(root / agent, agent=agent, context_window=args.context_window, steps=args.steps)
        for agent in agents
    ]
    print("\nSummary (asked = rollovers requested with new_context; forced = at the usable limit)")
    print(summary_table(results))
    print(
        f"\nWorkspaces left on disk under {root}/ — open them with ctxbudget.History or "
        "ctxbudget.SessionHistoryTool."
    )
    return 0


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
        for r in [header, *rows]
    ]
    return "\n".join(lines)


def _all_pages(tool: Any, args: dict[str, Any], key: str, limit: int | None) -> list[Any]:
    """Every page of a session_history call (the tool's bounds apply to each page)."""
    out: list[Any] = []
    cursor = None
    while True:
        result = tool.call({**args, **({"cursor": cursor} if cursor else {})})
        if not result["ok"]:
            raise SystemExit(f"ctxbudget history: {result['code']}: {result['error']}")
        out += result.get(key, [])
        cursor = result.get("cursor")
        if not cursor or (limit is not None and len(out) >= limit):
            return out[:limit] if limit is not None else out


def _progress(done: int, total: int, what: str) -> None:
    if sys.stderr.isatty() and total:
        print(f"\r{what} {done * 100 // total:3d}%", end="", file=sys.stderr, flush=True)


def _with_ticker(fn: Any, ws: Path, what: str) -> Any:
    """Runs ``fn``; on a terminal, shows the bytes being checked and the time elapsed
    (the check itself is one call into the core, which releases the GIL)."""
    if not sys.stderr.isatty():
        return fn()
    import threading

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


def _cmd_history(args: argparse.Namespace) -> int:
    from .history import History
    from .session_history import SessionHistoryTool

    ws = Path(args.workspace)
    if not (ws / "history").is_dir():
        raise SystemExit(f"ctxbudget history: {ws} has no history/ directory")
    action = args.history_command
    if action == "verify":
        report = _with_ticker(History.open(ws, recover=False).verify, ws, "verifying")
        if args.json:
            print(json.dumps(asdict(report), indent=2))
        else:
            for name, f in (("chat.jsonl", report.chat), ("chat-archive.jsonl", report.archive)):
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
            print(f"receipt: {report.receipt}\n{'OK' if report.ok else 'NOT OK'}")
        return 0 if report.ok else 1
    if action == "recover":
        rec = History.open(ws, recover=False).recover()
        print(
            json.dumps(asdict(rec), indent=2)
            if args.json
            else (
                f"changed: {rec.changed}; torn bytes moved: "
                f"{rec.chat_torn_bytes + rec.archive_torn_bytes}"
                f"{' to ' + ', '.join(rec.moved_to) if rec.moved_to else ''}; "
                f"damage: {rec.damage or 'none'}"
            )
        )
        return 0
    if action == "export":
        h = History.open(ws, recover=False)
        rows = list(h.rows())
        with contextlib.ExitStack() as stack:
            out = (
                stack.enter_context(open(args.output, "w", encoding="utf-8"))
                if args.output
                else sys.stdout
            )
            for n, row in enumerate(rows, 1):
                out.write(json.dumps(asdict(row), ensure_ascii=False) + "\n")
                if n % 1000 == 0:
                    _progress(n, len(rows), "export")
        _progress(len(rows), len(rows), "export")
        if sys.stderr.isatty():
            print(file=sys.stderr)
        return 0
    tool = SessionHistoryTool(History.open(ws))
    if action == "list":
        windows = _all_pages(tool, {"action": "list_windows", "limit": 50}, "windows", None)
        if args.json:
            print(json.dumps(windows, indent=2))
        else:
            print(
                _table(
                    ("window", "kind", "items"),
                    [(w["window_id"], w["boundary_kind"], str(w["item_count"])) for w in windows],
                )
            )
        return 0
    if action == "search":
        call = {"action": "search", "query": args.query, "limit": 25}
        if args.window:
            call["window_id"] = args.window
        items = _all_pages(tool, call, "items", args.limit)
    else:
        call = {
            "action": "read_item",
            "item_id": str(args.item_id),
            "offset_chars": 0,
            "limit_chars": 16_000,
        }
        text, offset = "", 0
        while True:
            result = tool.call({**call, "offset_chars": offset})
            if not result["ok"]:
                raise SystemExit(f"ctxbudget history: {result['code']}: {result['error']}")
            item = result["items"][0]
            text += item["text"]
            if "next_char" not in item:
                break
            offset = item["next_char"]
        items = [{**item, "text": text, "start_char": 0}]
        items[0].pop("next_char", None)
        items[0].pop("truncated", None)
    if args.json:
        print(json.dumps(items, indent=2, ensure_ascii=False))
    elif action == "read":
        print(items[0]["text"])
    else:
        print(
            _table(
                ("item", "window", "role", "text"),
                [
                    (i["item_id"], i["window_id"], i["role"], " ".join(i["text"].split())[:80])
                    for i in items
                ],
            )
        )
    return 0


def _cmd_plot(args: argparse.Namespace) -> int:
    from .plot import plot_usage

    out = plot_usage(
        args.workspace,
        args.output,
        model=args.model,
        context_window=args.context_window,
        threshold=args.threshold,
    )
    print(f"wrote {out}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``ctxbudget`` command."""
    parser = argparse.ArgumentParser(
        prog="ctxbudget", description="Token-budget context windows for agent backends."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    count = sub.add_parser(
        "count",
        help="count tokens of files",
        description="Count tokens of files exactly (tiktoken-identical), with timing.",
    )
    count.add_argument("files", nargs="*", metavar="FILE", help="files to count; '-' is stdin")
    count.add_argument("--sample", action="store_true", help="also count the bundled sample")
    which = count.add_mutually_exclusive_group()
    which.add_argument(
        "--encoding",
        action="append",
        metavar="NAME",
        help=f"encoding to use (repeatable; default: {', '.join(DEFAULT_ENCODINGS)})",
    )
    which.add_argument("--model", metavar="MODEL", help="count for this model's tokenizer")
    count.add_argument("--json", action="store_true", help="print JSON instead of a table")
    count.set_defaults(func=_cmd_count)
    demo = sub.add_parser(
        "demo",
        help="run scripted agents through handoffs and rollovers",
        description="Scripted agents (no network) on a small window: a cooperative one that "
        "hands off with new_context and a stubborn one that is rolled over at the limit.",
    )
    demo.add_argument("--workspace", default="ctxbudget-workspace", help="where to keep them")
    demo.add_argument("--context-window", type=int, default=64_000, metavar="N")
    demo.add_argument("--steps", type=int, default=90, metavar="N")
    demo.add_argument("--agent", choices=["cooperative", "stubborn", "both"], default="both")
    demo.set_defaults(func=_cmd_demo)
    history = sub.add_parser(
        "history",
        help="inspect a workspace's transcript",
        description="List, search and read a workspace's transcript with the same bounds and "
        "privacy floor as the session_history tool; verify, recover or export it.",
    )
    hsub = history.add_subparsers(dest="history_command", required=True)
    for name, text in (
        ("list", "windows and their item counts"),
        ("search", "items containing a text (case-insensitive)"),
        ("read", "one item's whole text"),
        ("verify", "check every commit; exit 1 if anything is torn or damaged"),
        ("recover", "move torn tails to history/recovered/, re-stamp the receipt"),
        ("export", "every row (archive, then chat) as JSON lines"),
    ):
        cmd = hsub.add_parser(name, help=text, description=text)
        cmd.add_argument("workspace", metavar="WORKSPACE")
        cmd.add_argument("--json", action="store_true", help="JSON instead of a table")
        if name == "search":
            cmd.add_argument("query")
            cmd.add_argument("--window", metavar="W", help="only this window, e.g. w:0")
            cmd.add_argument("--limit", type=int, default=25, help="most items (default 25)")
        if name == "read":
            cmd.add_argument("item_id", type=int)
        if name == "export":
            cmd.add_argument("-o", "--output", help="file to write (default: stdout)")
    history.set_defaults(func=_cmd_history)
    plot = sub.add_parser(
        "plot",
        help="plot context usage per step (needs ctxbudget[plot])",
        description="Context usage per step with the warning, handoff, final and usable-limit "
        "lines and a marker per rollover.",
    )
    plot.add_argument("workspace", metavar="WORKSPACE")
    plot.add_argument("-o", "--output", default="usage.png")
    plot.add_argument("--model", default="gpt-4o")
    plot.add_argument("--context-window", type=int, default=128_000, metavar="N")
    plot.add_argument("--threshold", type=float, default=0.7)
    plot.set_defaults(func=_cmd_plot)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``ctxbudget`` console script."""
    args = build_parser().parse_args(argv)
    try:
        result: int = args.func(args)
    except CtxBudgetError as exc:
        print(f"ctxbudget: error: {exc}", file=sys.stderr)
        return 2
    return result


if __name__ == "__main__":
    sys.exit(main())
