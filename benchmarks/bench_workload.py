"""The SoC workload benchmark: `dse sweep --workload` with --jobs 1 and --jobs 2 side by side.

Run: pytest benchmarks/bench_workload.py --benchmark-only -s
DSE_BENCH_WORKLOAD names the workload file (default examples/soc_workload.toml: the five
shared models and the example on five NPU configurations), DSE_BENCH_TRIALS the trials per
study (default: the sweep's), DSE_BENCH_SEED seeds the samplers (default 1). Each round is one
whole workload run in a fresh folder. The extra info holds the wall time, the seconds spent
scoring points per producer (from each trial's `score_seconds`) and their shares, the
studies' front sizes, how many of Vela's own dense-sweep points (../shared/baselines:
ethos-u55-256 Shared_Sram, ethos-u65-256 Dedicated_Sram) the union fronts match and the
cascader's points alone match, and, for --jobs 2, the speed-up over --jobs 1 of the same run.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import time
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from cascader.testing.shared import shared_dir
from dse.cli import main
from dse.front import pareto_front
from dse.study import load_settings

sys.path.insert(0, str(Path(__file__).resolve().parent))
from quality_union import matched, vela_dense_sweep

ROOT = Path(__file__).resolve().parents[1]
WORKLOAD = Path(os.environ.get("DSE_BENCH_WORKLOAD", ROOT / "examples" / "soc_workload.toml"))
TRIALS = os.environ.get("DSE_BENCH_TRIALS")
SEED = os.environ.get("DSE_BENCH_SEED", "1")
_WALL: dict[int, float] = {}

pytestmark = pytest.mark.skipif(shared_dir() is None, reason="../shared/models missing")


def _run(out: Path, jobs: int) -> None:
    argv = ["sweep", "--workload", str(WORKLOAD), "--jobs", str(jobs), "--seed", SEED]
    argv += ["--out", str(out), "--json"] + (["--trials", TRIALS] if TRIALS else [])
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(argv) == 0


def _measured(out: Path) -> dict:
    storage = f"sqlite:///{out / 'study.db'}"
    seconds = {"cascader": 0.0, "vela": 0.0}
    dense = vela_dense_sweep()
    fronts, union, ours, total_points = {}, 0, 0, 0
    for summary in optuna.get_all_study_summaries(storage):
        study = optuna.load_study(study_name=summary.study_name, storage=storage)
        complete = study.get_trials(states=(TrialState.COMPLETE,))
        for t in complete:
            seconds[t.user_attrs["metrics"]["producer"]] += t.user_attrs.get("score_seconds", 0)
        front = [t.user_attrs["metrics"] for t in pareto_front(study, complete)]
        fronts[summary.study_name] = len(front)
        settings = load_settings(study)
        key = (Path(settings.source_path).stem, settings.accelerator, settings.memory_mode)
        if key in dense:
            cascader = [t for t in complete if t.user_attrs["metrics"]["producer"] == "cascader"]
            own = [t.user_attrs["metrics"] for t in pareto_front(study, cascader)]
            union += matched(front, dense[key])
            ours += matched(own, dense[key])
            total_points += len(dense[key])
    scored = sum(seconds.values()) or 1.0
    return {
        "score_seconds": {k: round(v, 1) for k, v in seconds.items()},
        "producer_share": {k: round(v / scored, 3) for k, v in seconds.items()},
        "front_sizes": fronts,
        "front_points": sum(fronts.values()),
        "vela_dense_points": total_points,
        "vela_dense_matched_union": union,
        "vela_dense_matched_cascader_alone": ours,
    }


@pytest.mark.parametrize("jobs", [1, 2])
def test_workload(benchmark, tmp_path: Path, jobs: int) -> None:
    rounds = iter(range(1000))

    def once() -> None:
        out = tmp_path / f"run{next(rounds)}"
        start = time.perf_counter()
        _run(out, jobs)
        _WALL[jobs] = time.perf_counter() - start
        benchmark.extra_info.update(_measured(out))

    benchmark.pedantic(once, rounds=1, iterations=1)
    benchmark.extra_info["wall_s"] = round(_WALL[jobs], 1)
    if jobs == 2 and 1 in _WALL:
        benchmark.extra_info["speedup_over_jobs_1"] = round(_WALL[1] / _WALL[2], 2)
    print(json.dumps({"jobs": jobs, **benchmark.extra_info}, indent=1))
