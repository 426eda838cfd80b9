"""A copied or restored workspace is not damaged: ``verify`` says ``copied`` and ok (the
CLI exits 0 and says how the copy is adopted), while cursors minted before the copy
still fail closed, the next write or ``recover`` adopts the copy under a new epoch, and
a copy whose content differs from what its receipt vouches for is still NOT OK."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from history_helpers import file_verify, msg

from ctxbudget import History, SessionHistoryTool
from ctxbudget.cli import main


def _workspace(tmp_path: Path, *, rotated: bool) -> Path:
    ws = tmp_path / "ws"
    h = History.open(ws)
    h.append([msg(f"message {i} " + "x" * 200) for i in range(40)])
    if rotated:
        h.rollover(rollover_id="r1", reason="manual", lead_in="carry on")
        h.append([msg(f"after {i}") for i in range(30)])
        h.rotate()
        assert (ws / "history" / "chat-archive.jsonl").exists()
    assert file_verify(h.verify()).receipt == "stable"
    return ws


def _page(history: History, cursor: str | None = None) -> dict[str, Any]:
    call: dict[str, Any] = {"action": "list_items", "limit": 5}
    return SessionHistoryTool(history).call({**call, **({"cursor": cursor} if cursor else {})})


@pytest.mark.parametrize("rotated", [False, True], ids=["chat", "chat+archive"])
@pytest.mark.parametrize("how", ["copytree", "copy-no-times", "restore-in-place"])
def test_a_copy_verifies_ok_and_is_adopted_under_a_new_epoch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], rotated: bool, how: str
) -> None:
    ws = _workspace(tmp_path, rotated=rotated)
    first = _page(History.open(ws))
    assert first["ok"] and first["cursor"]
    epoch = History.open(ws).state().epoch
    assert epoch is not None
    copy = tmp_path / "copy"
    if how == "copytree":
        shutil.copytree(ws, copy)  # new inodes, times kept
    elif how == "copy-no-times":
        shutil.copytree(ws, copy, copy_function=shutil.copyfile)  # new inodes and times
    else:  # a backup restored over the original: same paths, new files
        shutil.copytree(ws, tmp_path / "backup")
        shutil.rmtree(ws)
        shutil.copytree(tmp_path / "backup", ws)
        copy = ws

    report = History.open(copy, recover=False).verify()
    assert report.ok, report
    assert file_verify(report).receipt == "copied"
    assert main(["history", "verify", str(copy)]) == 0
    out = capsys.readouterr().out
    assert out.rstrip().endswith("OK") and "NOT OK" not in out
    assert "copied or restored" in out and f"ctxbudget history recover {copy}" in out

    # Before adoption the CLI reads the first page and says why it cannot go on.
    with pytest.raises(SystemExit) as exit_:
        main(["history", "items", str(copy), "--limit", "200"])
    assert exit_.value.code == 1 and f"ctxbudget history recover {copy}" in str(exit_.value)
    capsys.readouterr()

    # Reading needs no adoption; a cursor minted on the original is refused on the copy
    # (elsewhere it is bound to another workspace, too).
    refused = {"history_changed"} if copy == ws else {"history_changed", "invalid_cursor"}
    opened = History.open(copy)
    on_copy = _page(opened)
    assert on_copy["ok"] and on_copy["items"] == first["items"]
    stale = _page(opened, first["cursor"])
    assert not stale["ok"] and stale["code"] in refused, stale

    # The next write adopts the copy: a new epoch, a stable receipt, the old cursor
    # still refused.
    opened.append([msg("written on the copy")])
    state = opened.state()
    assert state.epoch is not None and state.epoch != epoch
    assert file_verify(opened.verify()).receipt == "stable" and opened.verify().ok
    stale = _page(opened, first["cursor"])
    assert not stale["ok"] and stale["code"] in refused, stale
    # The copy handed out no cursor of its own before it was adopted (nothing vouched
    # for its files); adopted, it pages again.
    assert "cursor" not in on_copy and "cursor_unavailable" in on_copy["warnings"]
    assert _page(opened)["cursor"]


def test_recover_adopts_a_copy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ws = _workspace(tmp_path, rotated=True)
    epoch = History.open(ws).state().epoch
    assert epoch is not None
    shutil.copytree(ws, tmp_path / "copy")
    assert main(["history", "recover", str(tmp_path / "copy")]) == 0
    assert "changed: True" in capsys.readouterr().out
    h = History.open(tmp_path / "copy")
    assert file_verify(h.verify()).receipt == "stable"
    assert h.state().epoch not in (None, epoch)
    assert file_verify(History.open(ws).verify()).receipt == "stable", "the original is untouched"


def _flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    "change",
    ["flip a byte", "truncate a batch", "append a line", "older receipt", "touch only"],
)
def test_a_copy_that_differs_from_its_receipt_is_not_ok(tmp_path: Path, change: str) -> None:
    ws = _workspace(tmp_path, rotated=False)
    receipt_then = (ws / "history" / "receipt.json").read_bytes()
    History.open(ws).append([msg("one more batch")])
    copy = tmp_path / "copy"
    shutil.copytree(ws, copy)
    chat = copy / "history" / "chat.jsonl"
    size = chat.stat().st_size
    if change == "flip a byte":
        _flip(chat, size // 2)
    elif change == "truncate a batch":
        with open(chat, "r+b") as f:
            f.truncate(size - 10)
    elif change == "append a line":
        with open(chat, "ab") as f:
            f.write(b'{"not":"a batch"}\n')
    elif change == "older receipt":  # a backup mixing files from two moments
        (copy / "history" / "receipt.json").write_bytes(receipt_then)
    else:  # same content, new times: intact, as a copy
        os.utime(chat, ns=(1, 1))
    report = History.open(copy, recover=False).verify()
    if change == "touch only":
        assert report.ok and file_verify(report).receipt == "copied"
    else:
        assert not report.ok, (change, report)
        assert main(["history", "verify", str(copy)]) == 1
