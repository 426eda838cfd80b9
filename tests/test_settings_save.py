"""Settings.save under SIGKILL: a writer killed mid-save leaves a temporary file, and the
next save in that directory reclaims it — but never the temporary file of a live writer."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ctxbudget import Settings, _atomic

# A child that saves and is killed while its temporary file is written, before the rename.
KILLED_MID_SAVE = """
import os, signal, sys
from ctxbudget import Settings
os.fsync = lambda fd: os.kill(os.getpid(), signal.SIGKILL)
Settings(default_threshold=0.25).save(sys.argv[1])
"""

# A child that saves in a loop until it is killed.
SAVING_FOREVER = """
import sys
from ctxbudget import Settings
n = 0
while True:
    n += 1
    Settings(default_threshold=(n % 100) / 100).save(sys.argv[1])
"""


def _temps(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith(".tmp"))


def test_a_temporary_file_left_by_a_killed_writer_is_reclaimed(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    Settings(default_threshold=0.5).save(path)
    proc = subprocess.run([sys.executable, "-c", KILLED_MID_SAVE, str(path)], timeout=120)
    assert proc.returncode == -signal.SIGKILL
    assert len(_temps(tmp_path)) == 1, "the killed writer left its temporary file"
    assert Settings.load(path).default_threshold == 0.5, "the old file is intact"
    Settings(default_threshold=0.75).save(path)
    assert _temps(tmp_path) == []
    assert Settings.load(path).default_threshold == 0.75


def test_a_live_writers_temporary_file_is_not_reclaimed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writing = threading.Event()
    proceed = threading.Event()
    real_write_all = _atomic._write_all

    def slow_write_all(fd: int, data: bytes) -> None:
        if data == b"slow":
            writing.set()
            assert proceed.wait(60)
        real_write_all(fd, data)

    monkeypatch.setattr(_atomic, "_write_all", slow_write_all)
    slow = threading.Thread(target=_atomic.atomic_write, args=(tmp_path / "a", b"slow"))
    slow.start()
    assert writing.wait(60)
    assert len(_temps(tmp_path)) == 1
    _atomic.atomic_write(tmp_path / "b", b"fast")  # reclaims in the same directory
    assert len(_temps(tmp_path)) == 1, "the live writer's file was kept"
    proceed.set()
    slow.join(60)
    assert (tmp_path / "a").read_bytes() == b"slow"
    assert (tmp_path / "b").read_bytes() == b"fast"
    assert _temps(tmp_path) == []


def test_a_file_reclaimed_before_it_was_locked_is_written_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The gap between creating the temporary file and locking it: a reclaimer that
    wins it removes the file, and the writer starts over with a new one."""
    real_flock = _atomic.fcntl.flock
    raced: list[int] = []

    def flock_after_a_reclaim(fd: int, op: int) -> None:
        if op == _atomic.fcntl.LOCK_EX and not raced:
            raced.append(fd)
            dir_fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
            try:
                assert _atomic.reclaim_stale(dir_fd) == 1
            finally:
                os.close(dir_fd)
        real_flock(fd, op)

    monkeypatch.setattr(_atomic.fcntl, "flock", flock_after_a_reclaim)
    _atomic.atomic_write(tmp_path / "a", b"data")
    assert raced
    assert (tmp_path / "a").read_bytes() == b"data"
    assert _temps(tmp_path) == []


def test_concurrent_saves_killed_at_random_leave_no_temporary_files(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    Settings().save(path)
    rng = random.Random(14)
    for _ in range(12):
        procs = [
            subprocess.Popen([sys.executable, "-c", SAVING_FOREVER, str(path)]) for _ in range(3)
        ]
        # Let them start saving (imports take a while), then kill each at a random moment.
        deadline = time.monotonic() + 60
        while Settings.load(path).default_threshold == Settings().default_threshold:
            assert time.monotonic() < deadline, "the children never saved"
            time.sleep(0.01)
        for proc in procs:
            time.sleep(rng.uniform(0, 0.02))
            proc.send_signal(signal.SIGKILL)
        for proc in procs:
            proc.wait(60)
        Settings.load(path)  # always a whole file
        Settings().save(path)
        assert _temps(tmp_path) == []
