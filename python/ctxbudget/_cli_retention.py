"""``ctxbudget history delete|prune``: retention of a transcript (a workspace's or a
PostgreSQL conversation's). Both print what was removed; ``--json`` prints the report."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from ._cli_errors import UsageError
from ._redact import redact
from .history import History

__all__ = ["cmd_delete", "cmd_prune", "parse_age"]

_PROG = "ctxbudget history"
_UNITS = {"s": 1, "m": 60, "h": 3_600, "d": 86_400, "w": 604_800}


def parse_age(text: str) -> float:
    """``30d``, ``12h``, ``90m``, ``3600s``, ``2w`` (or plain seconds) as seconds."""
    match = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)([smhdw]?)", text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(
            f"an age looks like 30d, 12h, 90m, 3600s or 2w, got {text!r}"
        )
    return float(match.group(1)) * _UNITS[match.group(2) or "s"]


def cmd_delete(
    workspace: Path | None,
    url: str | None,
    conversation: str | None,
    shown: str,
    *,
    yes: bool,
    as_json: bool,
) -> int:
    """Deletes the transcript for good (``--yes`` required)."""
    if not yes:
        raise UsageError(
            _PROG,
            f"delete removes {shown} for good (rows, memory files, recovered tails); "
            "add --yes to confirm",
        )
    if workspace is not None:
        report = History.delete(workspace)
    else:
        report = History.delete(url or "", conversation=conversation)
    if as_json:
        print(json.dumps(report.to_dict(), indent=2))
        return 0
    if not report.existed:
        print(redact(f"nothing to delete: {shown} holds no conversation"))
        return 0
    print(
        redact(
            f"deleted {shown}: {report.rows} rows ({report.bytes} bytes), "
            f"{report.memory_files} memory files, {report.recovered_files} recovered tails"
        )
    )
    return 0


def cmd_prune(
    history: History,
    shown: str,
    *,
    keep_windows: int | None,
    older_than: float | None,
    below_floor: bool,
    as_json: bool,
) -> int:
    """Prunes sealed windows by the criteria given (at least one)."""
    if keep_windows is None and older_than is None and not below_floor:
        raise UsageError(
            _PROG, "prune needs a criterion: --keep-windows N, --older-than AGE or --below-floor"
        )
    report = history.prune(
        keep_windows=keep_windows, older_than=older_than, below_floor=below_floor
    )
    if as_json:
        print(json.dumps(report.to_dict(), indent=2))
        return 0
    if report.epoch is None:
        print(redact(f"nothing to prune in {shown}: rows kept from seq {report.kept_from}"))
        return 0
    print(
        redact(
            f"pruned {shown}: {report.rows} rows ({report.bytes} bytes); rows kept from seq "
            f"{report.kept_from}; privacy floor {report.floor_seq}; cursors minted before "
            "now answer history_changed"
        )
    )
    return 0
