"""One study's seeded sweep with --jobs 1 and --jobs 2 side by side: the wall time and the front.

Run: pytest benchmarks/bench_jobs.py --benchmark-only -s
DSE_BENCH_MODEL picks the model (default ../shared/models/mobilenet_v2_100_224.tflite, else
the bundled example), DSE_BENCH_TRIALS the trials (60) and DSE_BENCH_SEED the seed (7). Both
runs use both producers, as a default sweep does. The extra info holds the wall seconds, the
front's points, and how many of the other run's front points this front matches (a point is
matched when one of this front's uses no more SRAM and no more cycles); --jobs 2 adds its
speed-up over --jobs 1 of the same run and how many of its points --jobs 1's front matches.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import time
from pathlib import Path

import pytest

from cascader.testing.shared import shared_dir
from dse.cli import main

TRIALS = os.environ.get("DSE_BENCH_TRIALS", "60")
SEED = os.environ.get("DSE_BENCH_SEED", "7")
_FRONTS: dict[int, list[tuple[float, float]]] = {}
_WALL: dict[int, float] = {}


def _model() -> Path:
    given = os.environ.get("DSE_BENCH_MODEL")
    if given:
        return Path(given)
    shared = shared_dir()
    if shared is not None and (shared / "models" / "mobilenet_v2_100_224.tflite").is_file():
        return shared / "models" / "mobilenet_v2_100_224.tflite"
    return Path(__file__).resolve().parents[1] / "examples" / "mobilenet_like_96.tflite"


def _sweep(out: Path, jobs: int) -> list[tuple[float, float]]:
    argv = ["sweep", "--model", str(_model()), "--trials", TRIALS, "--seed", SEED,
            "--jobs", str(jobs), "--out", str(out), "--study", "s", "--json"]  # fmt: skip
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(io.StringIO()):
        assert main(argv) == 0
    rows = json.loads(buf.getvalue())["front"]
    return [(row["sram_used_bytes"], row["total_cycles"]) for row in rows]


def _matched(front: list[tuple[float, float]], others: list[tuple[float, float]]) -> int:
    return sum(any(s <= os_ and c <= oc for s, c in front) for os_, oc in others)


@pytest.mark.parametrize("jobs", [1, 2])
def test_one_study(benchmark, tmp_path: Path, jobs: int) -> None:
    runs = iter(range(1000))

    def once() -> None:
        out = tmp_path / f"run{next(runs)}"
        start = time.perf_counter()
        _FRONTS[jobs] = _sweep(out, jobs)
        _WALL[jobs] = time.perf_counter() - start

    benchmark.pedantic(once, rounds=1, iterations=1)
    info = benchmark.extra_info
    info.update(model=_model().name, wall_s=round(_WALL[jobs], 1), front=len(_FRONTS[jobs]))
    other = 3 - jobs
    if other in _FRONTS:
        info[f"matches_of_jobs_{other}"] = f"{_matched(_FRONTS[jobs], _FRONTS[other])}/"
        info[f"matches_of_jobs_{other}"] += str(len(_FRONTS[other]))
    if jobs == 2 and 1 in _WALL:
        info["speedup_over_jobs_1"] = round(_WALL[1] / _WALL[2], 2)
        info["jobs_1_matches_of_jobs_2"] = f"{_matched(_FRONTS[1], _FRONTS[2])}/{len(_FRONTS[2])}"
    print(json.dumps({"jobs": jobs, **info}, indent=1))
