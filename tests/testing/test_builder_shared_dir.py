"""Locating the team's shared/ folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from cascader.testing.shared import shared_dir


def test_environment_variable_names_the_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CASCADER_SHARED", str(tmp_path))
    assert shared_dir() == tmp_path


def test_missing_folder_gives_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CASCADER_SHARED", str(tmp_path / "absent"))
    assert shared_dir() is None


def test_default_is_shared_beside_the_repository(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CASCADER_SHARED", raising=False)
    beside = Path(__file__).resolve().parents[2].parent / "shared"
    assert shared_dir() == (beside if beside.is_dir() else None)
