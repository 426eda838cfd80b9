"""One connection pool per URL per process, however many threads open their first
PostgreSQL ``History`` of that URL at once."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import uuid

from stores import quote, sql, with_app_name

from ctxbudget import DatabaseError, History

POOL_SIZE = 8  # PgOptions::default().pool_size


def test_threads_opening_a_url_at_once_share_one_pool(pg_url: str) -> None:
    name = f"pool-{uuid.uuid4().hex[:12]}"
    url = with_app_name(pg_url, name)
    barrier = threading.Barrier(24)
    opened: list[History] = []
    errors: list[BaseException] = []

    def open_and_read(i: int) -> None:
        try:
            barrier.wait()
            h = History.open(url, conversation=f"{name}-{i}")
            h.append(
                [{"kind": "message", "role": "user", "parts": [{"type": "text", "text": "x"}]}]
            )
            opened.append(h)
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=open_and_read, args=(i,)) for i in range(24)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(opened) == 24
    rows = sql(
        pg_url,
        f"SELECT count(*) FROM pg_stat_activity WHERE application_name = {quote(name)}",
    )
    assert int(rows[0][0]) <= POOL_SIZE, f"{rows[0][0]} connections for one URL"


class _SilentServer:
    """A TCP server that accepts connections and answers nothing (a database host that
    is down in the worst way: every connection attempt waits for its timeout) until
    ``refuse()``, which answers each one, held or new, with a fatal error."""

    def __init__(self) -> None:
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self.port = self._listener.getsockname()[1]
        self.accepted = threading.Event()
        self._refusing = threading.Event()
        self._held: list[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                if self._refusing.is_set():
                    self._answer(conn)
                else:
                    self._held.append(conn)
            self.accepted.set()

    @staticmethod
    def _answer(conn: socket.socket) -> None:
        """A FATAL ErrorResponse (SQLSTATE 28000): not transient, so no retry."""
        fields = b"SFATAL\x00C28000\x00Mgo away\x00\x00"
        with contextlib.suppress(OSError):
            conn.sendall(b"E" + struct.pack("!I", len(fields) + 4) + fields)
            conn.close()

    def refuse(self) -> None:
        with self._lock:
            self._refusing.set()
            for conn in self._held:
                self._answer(conn)
            self._held.clear()

    def close(self) -> None:
        self.refuse()
        self._listener.close()


def test_a_down_url_does_not_hold_up_the_first_open_of_another(pg_url: str) -> None:
    """While the first open of a down URL keeps reconnecting (30 s), the first open of
    another, healthy URL goes ahead: first opens wait only for their own URL's."""
    down = _SilentServer()
    down_url = f"postgresql://nobody@127.0.0.1:{down.port}/x?sslmode=disable&connect_timeout=5"
    down_outcome: list[BaseException | History] = []

    def open_down() -> None:
        try:
            down_outcome.append(History.open(down_url, conversation="x"))
        except BaseException as e:  # reported below
            down_outcome.append(e)

    opener = threading.Thread(target=open_down, daemon=True)
    opener.start()
    healthy: list[History] = []
    try:
        assert down.accepted.wait(30), "the down URL's open never connected"
        name = f"healthy-{uuid.uuid4().hex[:12]}"
        worker = threading.Thread(
            target=lambda: healthy.append(
                History.open(with_app_name(pg_url, name), conversation=name)
            ),
            daemon=True,
        )
        worker.start()
        # Watchdog: well under the down URL's 30 s of reconnects.
        worker.join(timeout=15)
        assert healthy, "the first open of a healthy URL waited for a down URL's"
    finally:
        down.close()
        opener.join(timeout=60)
    assert len(down_outcome) == 1 and isinstance(down_outcome[0], DatabaseError), down_outcome
