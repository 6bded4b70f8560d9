"""How long each study command takes to give up on a PostgreSQL server that accepts the
connection and never answers (the storage's connect and statement timeouts bound it).

Run: pytest benchmarks/bench_silent_server.py --benchmark-only -s
`tests/dse/test_storage_safety.py` checks the behaviour (each command fails with one line
naming the server); this measures the time, which a loaded machine stretches."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from backends import silent_server


@pytest.fixture(scope="module")
def silent_port() -> Iterator[int]:
    with silent_server() as port:
        yield port


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
