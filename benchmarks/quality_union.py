"""The union front of a two-producer study against Vela 5.2's own dense arena sweeps.

Run: python benchmarks/quality_union.py [--trials 50] [--seeds 1] [--models a,b] [-o FILE]

For every model in ../shared/models, on ethos-u55-256 Shared_Sram and ethos-u65-256
Dedicated_Sram, a `dse sweep --producers cascader,vela` (default pool range and sampler) is
run per seed; each of Vela's dense-sweep points (../shared/baselines, regor) counts as matched
when a front point uses no more SRAM and no more cycles: by the union front, and by the front
of the cascader's points alone (the union must not hide a regression of the cascader). A row
is written to the Markdown table (and -o FILE) as each sweep ends.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import json
import tempfile
import time
from pathlib import Path

import optuna
from optuna.trial import TrialState

from cascader.testing.shared import shared_dir
from dse.cli import main
from dse.front import pareto_front

CONFIGS = (("ethos-u55-256", "Ethos_U55_High_End_Embedded", "Shared_Sram"),
           ("ethos-u65-256", "Ethos_U65_High_End", "Dedicated_Sram"))  # fmt: skip


def vela_dense_sweep() -> dict[tuple[str, str, str], list[tuple[float, float]]]:
    """Vela 5.2's own dense arena sweeps (../shared/baselines): (SRAM used, cycles) by (model,
    accelerator, memory mode)."""
    rows: dict[tuple[str, str, str], list[tuple[float, float]]] = {}
    with (shared_dir() / "baselines" / "vela_5.2.0.csv").open(newline="") as f:
        for r in csv.DictReader(f):
            if r["suite"] == "dense_sweep" and r["core"] == "regor" and r["status"] == "ok":
                key = (r["model"], r["accelerator"], r["memory_mode"])
                rows.setdefault(key, []).append(
                    (float(r["sram_used_kib"]) * 1024, float(r["cycles_total"]))
                )
    return rows


def matched(front: list[dict], points: list[tuple[float, float]]) -> int:
    """How many of Vela's points some front point matches (no more SRAM, no more cycles; the
    CSV gives SRAM in KiB to a few decimals)."""
    return sum(
        any(p["sram_used_bytes"] <= s + 0.5 and p["total_cycles"] <= c for p in front)
        for s, c in points
    )


def fronts(study: optuna.Study) -> tuple[list[dict], list[dict]]:
    """The union front and the front of the cascader's points alone, as metrics."""
    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    ours = [t for t in complete if t.user_attrs["metrics"].get("producer") == "cascader"]
    return ([t.user_attrs["metrics"] for t in pareto_front(study, complete)],
            [t.user_attrs["metrics"] for t in pareto_front(study, ours)])  # fmt: skip


def row(model: Path, config: tuple[str, str, str], trials: int, seed: int, dense) -> str:
    with tempfile.TemporaryDirectory(prefix="dse-union-") as out:
        argv = ["sweep", "--model", str(model), "--accelerator-config", config[0],
                "--system-config", config[1], "--memory-mode", config[2], "--producers",
                "cascader,vela", "--trials", str(trials), "--seed", str(seed), "--out", out,
                "--json"]  # fmt: skip
        start = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()) as buf:
            assert main(argv) == 0
        seconds = time.perf_counter() - start
        result = json.loads(buf.getvalue())
        study = optuna.load_study(study_name=result["study"], storage=result["storage"])
        union, ours = fronts(study)
    points = dense[(model.stem, config[0], config[2])]
    return (f"| {model.stem} | {config[0]}, {config[2]} | {seed} | {len(union)} | "
            f"{matched(union, points)}/{len(points)} | {matched(ours, points)}/{len(points)} | "
            f"{seconds:.0f} |")  # fmt: skip


def run(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=50)
    parser.add_argument("--seeds", default="1", help="comma-separated sampler seeds")
    parser.add_argument("--models", default=None, help="comma-separated model stems")
    parser.add_argument("-o", "--output", type=Path, default=None)
    args = parser.parse_args(argv)
    dense = vela_dense_sweep()
    models = sorted((shared_dir() / "models").glob("*.tflite"))
    if args.models:
        models = [m for m in models if m.stem in args.models.split(",")]
    head = "| model | accelerator, memory mode | seed | union front | union matched | "
    lines = [head + "cascader alone matched | sweep s |", "|---|---|---:|---:|---:|---:|---:|"]
    for seed in map(int, args.seeds.split(",")):
        for model in models:
            for config in CONFIGS:
                lines.append(row(model, config, args.trials, seed, dense))
                print(lines[-1], flush=True)
                if args.output:
                    args.output.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    run()
