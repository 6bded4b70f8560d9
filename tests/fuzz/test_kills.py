"""A short kill run (issue 21; `benchmarks/kills.py` is the long one): sweeps and workers
SIGKILLed at random moments, on SQLite and PostgreSQL. The study stays consistent, requested
and queued counts agree, and a later run finishes every ticket.

The PostgreSQL case needs a server: .ci/run starts one and sets DSE_TEST_POSTGRES_URL."""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import pytest
from backends import BACKENDS, storage_url
from kills import finish, kill_round, new_study, open_tickets, problems

from cascader.testing.networks import single_op_model

pytestmark = pytest.mark.slow  # the full suite only: `pytest -m "not slow"` leaves it out

KILLS = 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_killed_sweeps_and_workers_leave_a_consistent_study(backend: str, tmp_path: Path) -> None:
    model = tmp_path / "conv.tflite"
    model.write_bytes(single_op_model("CONV_2D", stride=2, padding="VALID"))
    storage = storage_url(backend, tmp_path)
    study = f"kills-{os.getpid()}-{time.time_ns()}"
    new_study(model, storage, study)
    rng = random.Random(21)
    for _ in range(KILLS):
        kill_round(rng, model, storage, study, latest=5.0)
        assert problems(storage, study) == []
    code, _, err = finish(storage, study)
    assert code == 0, err
    assert open_tickets(storage, study) == 0
    assert problems(storage, study) == []
