"""The ``ctxbudget`` command line."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path

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
