"""How long each study command takes to give up on a PostgreSQL server that accepts the
connection and never answers (the storage's connect and statement timeouts bound it).

Run: pytest benchmarks/bench_silent_server.py --benchmark-only -s
`tests/dse/test_storage_safety.py` checks the behaviour (each command fails with one line
naming the server); this measures the time, which a loaded machine stretches."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def silent_port() -> Iterator[int]:
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
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    for connection in held:
        connection.close()
    server.close()


@pytest.mark.parametrize("command", ["export", "report"])
def test_giving_up_on_a_silent_server(
    benchmark, command: str, silent_port: int, tmp_path: Path
) -> None:
    url = f"postgresql+psycopg2://dse@127.0.0.1:{silent_port}/studies"
    out = ["-o", str(tmp_path / "c.json")] if command == "export" else ["--out", str(tmp_path)]
    argv = [sys.executable, "-m", "dse.cli", command, "--storage", url, "--study", "s"]
    argv += ["--trial", "0", *out] if command == "export" else out

    def run() -> int:
        return subprocess.run(argv, capture_output=True, check=False).returncode

    assert benchmark.pedantic(run, rounds=1, iterations=1) == 2
