"""Puts this folder on the import path, so every test folder can use `sessions` and
`model_cases`; the fixture of the shared models that several folders' tests run on."""

from __future__ import annotations

from pathlib import Path

import pytest
from model_cases import MODEL_NAMES, model_path


@pytest.fixture(params=MODEL_NAMES)
def shared_model(request) -> Path:
    return model_path(request.param)
