"""Puts this folder on the import path, so every test folder can use `sessions` and
`model_cases`; the fixture of the shared models that several folders' tests run on; with the
caches off (`DSE_CACHES=off`), the tests of what a cache kept (marked `caches`) are skipped."""

from __future__ import annotations

from pathlib import Path

import pytest
from model_cases import MODEL_NAMES, model_path

from cascader.memo import caches_on


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if caches_on():
        return
    skip = pytest.mark.skip(reason="checks what a cache kept; DSE_CACHES=off keeps nothing")
    for item in items:
        if "caches" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(params=MODEL_NAMES)
def shared_model(request) -> Path:
    return model_path(request.param)
