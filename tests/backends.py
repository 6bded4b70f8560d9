"""The study storages the storage tests run on: SQLite always, PostgreSQL when a server is
given (.ci/run starts one and sets DSE_TEST_POSTGRES_URL), so a run without one skips only
those cases and says why."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

POSTGRES_URL = os.environ.get("DSE_TEST_POSTGRES_URL")
needs_postgres = pytest.mark.skipif(
    POSTGRES_URL is None, reason="DSE_TEST_POSTGRES_URL not set (.ci/run sets it)"
)
BACKENDS = ["sqlite", pytest.param("postgresql", marks=needs_postgres)]


def storage_url(backend: str, tmp_path: Path) -> str:
    """The storage URL of `backend`: the server's database, or a new SQLite file."""
    if backend == "postgresql":
        assert POSTGRES_URL is not None
        return POSTGRES_URL
    return f"sqlite:///{tmp_path / 'study.db'}"


@contextlib.contextmanager
def silent_server() -> Iterator[int]:
    """A TCP port on 127.0.0.1 that accepts connections and never says a word (a database
    server that hangs), closed when the block ends."""
    server = socket.create_server(("127.0.0.1", 0), backlog=64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        thread.join()
        for connection in held:
            connection.close()
        server.close()
