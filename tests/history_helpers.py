"""Helpers shared by the transcript-store tests."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from ctxbudget import (
    FileRecovery,
    FileState,
    FileVerify,
    History,
    Receipt,
    RecoveryReport,
    VerifyReport,
)

_TABLE: list[int] = []


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli), written independently of the implementation under test."""
    if not _TABLE:
        for i in range(256):
            c = i
            for _ in range(8):
                c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
            _TABLE.append(c)
    crc = 0xFFFFFFFF
    for b in data:
        crc = _TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def msg(text: str, role: str = "user", **meta: Any) -> dict[str, Any]:
    return {
        "kind": "message",
        "role": role,
        "parts": [{"type": "text", "text": text}],
        "meta": meta,
    }


def texts(history: Any) -> list[tuple[int, str]]:
    """(seq, first text part or kind) of every visible row."""
    out = []
    for row in history.rows():
        text = next((p.get("text") for p in row.parts if p.get("type") == "text"), None)
        out.append((row.seq, text if text is not None else f"<{row.kind}>"))
    return out


def chat_path(ws: Path) -> Path:
    return ws / "history" / "chat.jsonl"


def rewrite_last_batch_same_size(ws: Path) -> bool:
    """Changes one letter of the last framed row and re-frames the batch with a valid
    CRC of the same length: a same-size rewrite no stamp-free check can see."""
    path = chat_path(ws)
    lines = path.read_bytes().split(b"\n")[:-1]
    if len(lines) < 3 or not lines[-1].startswith(b'{"commit":'):
        return False
    header_at = max(i for i, line in enumerate(lines) if line.startswith(b'{"batch":'))
    row_at = len(lines) - 2
    row = json.loads(lines[row_at])
    parts = row.get("parts") or []
    if not parts or not parts[0].get("text"):
        return False
    old_commit = json.loads(lines[-1])
    for letter in "qxzjkvwy":
        text = parts[0]["text"]
        new_text = letter + text[1:] if text[0] != letter else "Q" + text[1:]
        new_row = lines[row_at].replace(
            json.dumps(text, ensure_ascii=False).encode(),
            json.dumps(new_text, ensure_ascii=False).encode(),
            1,
        )
        if len(new_row) != len(lines[row_at]):
            continue
        framed = b"".join(line + b"\n" for line in [*lines[header_at:row_at], new_row])
        crc = crc32c(framed)
        commit = lines[-1].replace(
            b'"crc":' + str(old_commit["commit"]["crc"]).encode(), b'"crc":' + str(crc).encode()
        )
        if len(commit) != len(lines[-1]):
            continue
        new_lines = [*lines[:row_at], new_row, commit]
        path.write_bytes(b"".join(line + b"\n" for line in new_lines))
        return True
    return False


def spawn_worker(
    script: Path, ws: Path, worker: int, generation: int, acks: Path
) -> subprocess.Popen[bytes]:
    """Starts a SIGKILL-test worker process: ``script WS WORKER GENERATION ACK_LOG``; it
    appends to ``ws`` and logs each acknowledged batch to ``acks/<worker>.log``."""
    log = acks / f"{worker}.log"
    return subprocess.Popen(
        [sys.executable, str(script), str(ws), str(worker), str(generation), str(log)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def fill_two_windows(h: Any) -> None:
    """A user message, a rollover and a long assistant reply (seqs 1 to 4): the
    transcript the command-line tests read."""
    h.append([msg("the deploy key is in vault")])
    h.rollover(rollover_id="r", reason="usable_limit", lead_in="lead-in text")
    h.append([msg("after " * 5000, "assistant")])


SESSION_HISTORY_CODES = frozenset(
    {
        "invalid_arguments",
        "query_required",
        "item_id_required",
        "window_not_found",
        "item_not_found",
        "invalid_cursor",
        "history_changed",
        "history_timeout",
        "history_unavailable",
    }
)
"""Every error code a ``session_history`` result may carry (SPEC §6)."""


def file_verify(report: VerifyReport) -> FileVerify:
    """The file store's part of a workspace's ``verify()`` report."""
    assert isinstance(report.detail, FileVerify), report
    return report.detail


def file_recovery(report: RecoveryReport) -> FileRecovery:
    """The file store's part of a workspace's ``recover()`` report."""
    assert isinstance(report.detail, FileRecovery), report
    return report.detail


def receipt_of(history: History) -> Receipt | None:
    """A workspace's append receipt as stored (``None``: missing or unreadable)."""
    detail = history.state().detail
    assert isinstance(detail, FileState), detail
    return detail.receipt
