"""Fixtures for the flow tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from flow_models import MODEL_NAMES, model_path


@pytest.fixture(params=MODEL_NAMES)
def shared_model(request) -> Path:
    return model_path(request.param)
