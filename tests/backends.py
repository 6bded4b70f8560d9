"""The study storages the storage tests run on: SQLite always, PostgreSQL when a server is
given (.ci/run starts one and sets DSE_TEST_POSTGRES_URL), so a run without one skips only
those cases and says why."""

from __future__ import annotations

import os
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
