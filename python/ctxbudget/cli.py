"""The ``ctxbudget`` command line."""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import NoReturn

from ._cli_errors import CliError, CommandError, UsageError, describe_os_error, exit_status
from ._ctxbudget import __version__
from ._redact import redact
from .errors import CtxBudgetError, InvalidArgumentError
from .history import History, is_database_url, workspace_path
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
                reason = f"cannot read {name}: {exc.strerror}"
                raise CommandError("ctxbudget count", reason) from exc
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
            "yes" if r.exact else "no (estimate)",
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
        raise UsageError("ctxbudget count", "give FILE arguments, '-' for stdin, or --sample")
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


def _workspace_argument(prog: str, workspace: str) -> Path:
    """The directory a WORKSPACE argument names; a URL-like string is an argument error
    (it never becomes a directory named after it)."""
    try:
        return workspace_path(workspace)
    except InvalidArgumentError as exc:
        raise UsageError(prog, str(exc)) from None


def _cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    return run_demo(
        _workspace_argument("ctxbudget demo", args.workspace),
        agents=["cooperative", "stubborn"] if args.agent == "both" else [args.agent],
        context_window=args.context_window,
        steps=args.steps,
        verbose=args.verbose,
    )


def _cmd_history(args: argparse.Namespace) -> int:
    from ._cli_history import cmd_history

    return cmd_history(args)


def _cmd_db(args: argparse.Namespace) -> int:
    from ._cli_db import cmd_db

    return cmd_db(args)


def _window_count(text: str) -> int:
    try:
        value = int(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def _age(text: str) -> float:
    from ._cli_retention import parse_age

    return parse_age(text)


def _cmd_plot(args: argparse.Namespace) -> int:
    from .plot import plot_budget, plot_usage

    target: str | History = args.workspace
    if args.store is not None or is_database_url(args.workspace):
        url = args.store or args.workspace
        if args.store is not None and args.workspace is not None:
            raise UsageError("ctxbudget plot", "give either a WORKSPACE or --store, not both")
        if not args.conversation:
            raise UsageError(
                "ctxbudget plot",
                "a postgresql:// store holds many conversations: name one with --conversation ID",
            )
        target = History.open(url, conversation=args.conversation, create=False)
    elif args.workspace is None:
        raise UsageError(
            "ctxbudget plot", "name the transcript: a WORKSPACE, or --store URL --conversation ID"
        )
    elif not (_workspace_argument("ctxbudget plot", args.workspace) / "history").is_dir():
        raise CommandError(
            "ctxbudget plot",
            f"{args.workspace} has no history/ directory: give a workspace a session wrote, "
            "e.g. ctxbudget-workspace/cooperative after ctxbudget demo",
        )
    given = {"model": args.model, "context_window": args.context_window}
    record, recorded = plot_budget(target, threshold=args.threshold, **given)
    out = plot_usage(target, args.output, threshold=args.threshold, **given)
    source = "recorded by the session" if recorded else "no budget recorded: model defaults"
    print(f"wrote {out} — budget: {record.describe()} ({source})")
    return 0


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line, redacted:
    ``PROG: error: … (see PROG --help)``, exit status 2."""

    def error(self, message: str) -> NoReturn:
        line = redact(f"{self.prog}: error: {message} (see {self.prog} --help)")
        self.exit(2, line + "\n")


def _positive_int(text: str) -> int:
    try:
        value = int(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, got {value}")
    return value


def _item_id(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(
            f"an item ID is a number such as 42, got {text!r} (IDs: ctxbudget history items)"
        )
    return int(text)


def _window_id(text: str) -> str:
    if not re.fullmatch(r"w:[0-9]+", text):
        raise argparse.ArgumentTypeError(
            f"a window ID looks like w:0 or w:12, got {text!r} (IDs: ctxbudget history list)"
        )
    return text


def _threshold(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"a threshold is from 0.0 to 1.0, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``ctxbudget`` command."""
    parser = _Parser(
        prog="ctxbudget", description="Token-budget context windows for agent backends."
    )
    parser.add_argument("--version", action="version", version=f"ctxbudget {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
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
    demo.add_argument("--context-window", type=_positive_int, default=64_000, metavar="N")
    demo.add_argument("--steps", type=_positive_int, default=45, metavar="N")
    demo.add_argument("--agent", choices=["cooperative", "stubborn", "both"], default="both")
    demo.add_argument(
        "-v", "--verbose", action="store_true", help="print every step, not only the events"
    )
    demo.set_defaults(func=_cmd_demo)
    history = sub.add_parser(
        "history",
        help="inspect a workspace's (or a PostgreSQL conversation's) transcript",
        description="List, search and read a transcript with the same bounds and privacy "
        "floor as the session_history tool; verify, recover or export it. The transcript is "
        "a WORKSPACE directory, or --store postgresql://… --conversation ID.",
    )
    hsub = history.add_subparsers(dest="history_command", required=True, parser_class=_Parser)
    for name, text in (
        ("list", "windows and their item counts"),
        ("items", "the items (messages, tool calls, results) of the history or one window"),
        ("search", "items containing a text (case-insensitive)"),
        ("read", "one item's whole text"),
        ("verify", "check every commit; exit 1 if anything is torn or damaged"),
        ("recover", "move torn tails to history/recovered/, re-stamp the receipt (adopts a copy)"),
        ("export", "every row (archive, then chat) as JSON lines"),
        ("delete", "delete the conversation for good (rows, memory files, recovered tails)"),
        ("prune", "remove sealed windows for good (by count, age, or below the privacy floor)"),
    ):
        cmd = hsub.add_parser(name, help=text, description=text)
        cmd.add_argument("workspace", metavar="WORKSPACE", nargs="?")
        cmd.add_argument(
            "--store",
            metavar="URL",
            help="a postgresql:// URL: the conversation's database instead of a WORKSPACE",
        )
        cmd.add_argument(
            "--conversation", metavar="ID", help="with --store: the conversation to read"
        )
        if name == "export":
            cmd.add_argument("-o", "--output", help="file to write (default: stdout)")
            # Export is JSON Lines already; --json is refused with a clear message.
            cmd.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
        else:
            cmd.add_argument("--json", action="store_true", help="JSON instead of a table")
        if name == "search":
            cmd.add_argument("query")
        if name in ("search", "items"):
            cmd.add_argument(
                "--window", type=_window_id, metavar="W", help="only this window, e.g. w:0"
            )
            cmd.add_argument(
                "--limit",
                type=_positive_int,
                default=25 if name == "search" else 50,
                metavar="N",
                help="most items (default %(default)s)",
            )
        if name == "read":
            cmd.add_argument("item_id", type=_item_id, metavar="ITEM")
        if name == "delete":
            cmd.add_argument("--yes", action="store_true", help="confirm: it cannot be undone")
        if name == "prune":
            cmd.add_argument(
                "--keep-windows",
                type=_window_count,
                metavar="N",
                help="keep the N newest sealed windows (the current one always stays)",
            )
            cmd.add_argument(
                "--older-than",
                type=_age,
                metavar="AGE",
                help="remove sealed windows whose newest row is older (30d, 12h, 90m, 3600s)",
            )
            cmd.add_argument(
                "--below-floor",
                action="store_true",
                help="remove everything below the privacy floor (after a soft clear)",
            )
    history.set_defaults(func=_cmd_history)
    db = sub.add_parser(
        "db",
        help="set up a PostgreSQL database: migrate, check, print the DDL",
        description="The PostgreSQL schema as a DBA runs it: migrate (as the role that owns "
        "the tables), check (what a runtime role sees), ddl (the SQL, for review).",
    )
    dsub = db.add_subparsers(dest="db_command", required=True, parser_class=_Parser)
    for name, text in (
        ("migrate", "create or migrate the schema (safe when run concurrently)"),
        ("check", "exit 1 unless the schema is current (changes nothing)"),
        ("ddl", "print the migration's SQL for review"),
    ):
        cmd = dsub.add_parser(name, help=text, description=text)
        if name != "ddl":
            cmd.add_argument("url", metavar="URL", help="a postgresql:// URL")
        cmd.add_argument(
            "--schema",
            metavar="NAME",
            help="the PostgreSQL schema (default: the URL's search_path)",
        )
    db.set_defaults(func=_cmd_db)
    plot = sub.add_parser(
        "plot",
        help="plot context usage per step (needs ctxbudget[plot])",
        description="Context usage per step with the warning, handoff, final and usable-limit "
        "lines and a marker per rollover. The budget is the one the workspace's session "
        "recorded; the options override it.",
    )
    plot.add_argument("workspace", metavar="WORKSPACE", nargs="?")
    plot.add_argument("--store", metavar="URL", help="a postgresql:// URL instead of WORKSPACE")
    plot.add_argument("--conversation", metavar="ID", help="with --store: the conversation")
    plot.add_argument("-o", "--output", default="usage.png")
    plot.add_argument("--model", default=None, help="default: the recorded model")
    plot.add_argument(
        "--context-window",
        type=_positive_int,
        default=None,
        metavar="N",
        help="default: the recorded window",
    )
    plot.add_argument("--threshold", type=_threshold, default=None, help="default: recorded")
    plot.set_defaults(func=_cmd_plot)
    return parser


def _doing(args: argparse.Namespace) -> str:
    """What a command was doing, for an I/O error message."""
    if args.command == "history":
        where = args.workspace or f"conversation {args.conversation!r}"
        return redact(f"{args.history_command} the transcript of {where}")
    if args.command == "plot":
        where = args.workspace or f"conversation {args.conversation!r}"
        return redact(f"plot {where} to {args.output}")
    if args.command == "demo":
        return f"run the demo in {args.workspace}"
    if args.command == "db":
        return f"{args.db_command} the database schema"
    return "count"


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``ctxbudget`` console script.

    Exit status (docs/cli.md): 0 done; 1 the command could not do what was asked (the
    message says why); 2 invalid arguments — argparse's, values the commands check,
    options that exclude each other, and ctxbudget errors that say an argument is wrong.
    Errors are one line on stderr, with any password in a URL redacted. Argument errors
    and the commands' own errors raise ``SystemExit`` with that status (after the line
    is printed); a ctxbudget or I/O error is returned as the status.
    """
    args = build_parser().parse_args(argv)
    try:
        result: int = args.func(args)
    except CliError as exc:
        print(exc.message, file=sys.stderr)
        raise
    except OSError as exc:  # before CtxBudgetError: the store's I/O errors are both
        line = describe_os_error(exc, _doing(args))
        print(redact(f"ctxbudget: error: {line}"), file=sys.stderr)
        return 1
    except CtxBudgetError as exc:
        print(redact(f"ctxbudget: error: {exc}"), file=sys.stderr)
        return exit_status(exc)
    return result


if __name__ == "__main__":
    sys.exit(main())
