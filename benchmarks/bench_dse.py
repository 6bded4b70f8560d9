"""DSE sweep benchmark: trials on MobileNetV2 (../shared/models) against one Vela compile.

Run: pytest benchmarks/bench_dse.py --benchmark-only -s
DSE_BENCH_TRIALS sets the trial count (default 100), DSE_BENCH_SEED seeds the sampler (`dse
sweep --seed`; default unseeded, as a user's sweep is). The sweep runs in this process, scored
with the flow's Vela-model estimate; one Vela 5.2 compile (its default core, default
settings) of the same model, the first in the process, is timed in the same run, and the
extra info holds seconds per trial, the cache hit rates, their ratio and the mean seconds of
each kind of trial.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import time
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from cascader.ethosu.vela_baseline import run_vela
from cascader.testing.shared import shared_dir
from dse.cli import main
from dse.refine import STEP_OF

SHARED = shared_dir()
MODEL = SHARED / "models" / "mobilenet_v2_100_224.tflite" if SHARED else None
TRIALS = int(os.environ.get("DSE_BENCH_TRIALS", "100"))
SEED = os.environ.get("DSE_BENCH_SEED")

pytestmark = pytest.mark.skipif(
    MODEL is None or not MODEL.is_file(), reason="shared/models/mobilenet_v2_100_224 missing"
)


def _sweep(out: Path) -> dict:
    argv = ["sweep", "--model", str(MODEL), "--trials", str(TRIALS), "--out", str(out)]
    argv += ["--sram-min", "64KiB", "--sram-max", "4MiB", "--json", "--producers", "cascader"]
    argv += ["--seed", SEED] if SEED is not None else []
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(argv) == 0
    return json.loads(buf.getvalue())


def _seconds_by_kind(out: Path) -> dict[str, dict[str, float]]:
    """Count and mean seconds of the study's seed trials, steps along the front (dse.refine)
    and sampled trials, from Optuna's start and end times (the sweep's wall time also holds
    the seed probes and the front half)."""
    storage = f"sqlite:///{out / 'study.db'}"
    (summary,) = optuna.get_all_study_summaries(storage)
    study = optuna.load_study(study_name=summary.study_name, storage=storage)
    kinds: dict[str, list[float]] = {"seed": [], "step": [], "sampled": []}
    for t in study.get_trials(states=(TrialState.COMPLETE,)):
        kind = "step" if STEP_OF in t.system_attrs else (
            "seed" if t.system_attrs.get("fixed_params") else "sampled")  # fmt: skip
        kinds[kind].append((t.datetime_complete - t.datetime_start).total_seconds())
    return {
        k: {"trials": len(v), "mean_s": round(sum(v) / len(v), 3) if v else 0.0}
        for k, v in kinds.items()
    }


def test_sweep_trials_vs_one_vela_compile(benchmark, tmp_path: Path) -> None:
    benchmark.group = "dse"
    assert MODEL is not None
    start = time.perf_counter()
    run_vela(MODEL, "ethos-u55-256", "Ethos_U55_High_End_Embedded", "Shared_Sram")
    vela_seconds = time.perf_counter() - start

    result = benchmark.pedantic(_sweep, args=(tmp_path,), rounds=1, iterations=1)
    seconds = benchmark.stats.stats.max
    per_trial = seconds / result["trials"]
    rates = {
        name: c["hits"] / (c["hits"] + c["misses"])
        for name, c in result["cache"].items()
        if c["hits"] + c["misses"]
    }
    benchmark.extra_info.update(
        {
            "trials": result["trials"],
            "seed": SEED,
            "sweep_seconds": round(seconds, 2),
            "seconds_per_trial": round(per_trial, 3),
            "vela_compile_seconds": round(vela_seconds, 3),
            "trial_over_vela_compile": round(per_trial / vela_seconds, 2),
            "cache_hit_rate": {k: round(v, 3) for k, v in rates.items()},
            "front_points": len(result["front"]),
            "trial_seconds_by_kind": _seconds_by_kind(tmp_path),
        }
    )
    print(json.dumps(benchmark.extra_info, indent=2))
    assert result["trials"] == TRIALS
