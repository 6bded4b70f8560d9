"""How far below Vela 5.2's `--optimise Size` SRAM a default sweep's front reaches, and at what
price, beside the model's SRAM lower bound (`cascader.schedule.lower_bound`).

Run: python benchmarks/deeper_floors.py [--trials 60] [--models unet,...] [--devices u55,u65]
                                        [-o FILE.md] [--partial FILE.jsonl]
     python benchmarks/deeper_floors.py --table FILE.jsonl

For each architecture of `cascader.testing.architectures` on ethos-u55-256 and ethos-u65-256,
both Shared_Sram (the arena in SRAM), a default `dse sweep` (both producers: the cascader
and Vela's own compiler, whose seeds include `--optimise Size` at the largest pool). Per
front: the lower bound, the floor, the smallest SRAM within 1.5x and 2x of the front's
fastest cycles, Vela's Size point (its trial in the same study), the widest SRAM step
between front points from the floor up to Vela's Size SRAM, and the deeper-floors issue's
checks: within 1.5x at least 25% below Vela's Size SRAM or within 1.25x of the bound; within
2x at least 40% below or within 1.1x. "Widest buying step" counts only steps whose upper
point is more than 1% faster (a flat stretch of the front is no budget a user loses).
"Allocation" is the worst address peak over bytes live at once among the smallest
schedules of a sweep's seed kinds (`dse.timeline`): what the allocator loses to gaps where
a front starts. Each case's row is appended to `--partial` as it finishes, so a long run
keeps what it measured; a row keeps its front's points and the trial options of each
(`front_params`), so a point can be scheduled again.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import itertools
import json
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import optuna
from optuna.trial import TrialState

from cascader.estimate import Device
from cascader.pipeline import Session
from cascader.testing.architectures import ARCHITECTURES, build_cached
from dse.cli import main as dse_main
from dse.defaults import SRAM_MAX
from dse.front import pareto_front
from dse.sizes import format_size
from dse.space import SearchSpace
from dse.timeline import memory_timeline

DEVICES = {
    "u55": ("ethos-u55-256", "Ethos_U55_High_End_Embedded", "Shared_Sram"),
    "u65": ("ethos-u65-256", "Ethos_U65_High_End", "Shared_Sram"),
}
# The thresholds: (cycles factor, largest share of Vela's Size SRAM, or of the bound).
CHECKS = ((1.5, 0.75, 1.25), (2.0, 0.60, 1.10))
GAP = 1.25
BUYS = 0.99  # a step "buys" speed when its upper point takes under 99% of the cycles
TINY_POOL = 256  # under every schedule's need: each seed kind gives its smallest schedule


def measure(model: str, device: str, trials: int, seed: int | None = None) -> dict:
    """One default sweep of `model` on `device` and the figures of its front."""
    accelerator, system, mode = DEVICES[device]
    path = build_cached(model)
    with tempfile.TemporaryDirectory() as out:
        argv = ["sweep", "--model", str(path), "--accelerator-config", accelerator,
                "--system-config", system, "--memory-mode", mode, "--trials", str(trials),
                "--out", out, "--study", "s", "--json"]  # fmt: skip
        if seed is not None:
            argv += ["--seed", str(seed)]
        start = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            assert dse_main(argv) == 0, f"sweep of {model} on {device} failed"
        seconds = time.perf_counter() - start
        study = optuna.load_study(study_name="s", storage=f"sqlite:///{out}/study.db")
        trials_done = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        front = [(t.values[1], t.values[0], t) for t in pareto_front(None, trials_done)]
    front.sort(key=lambda row: row[0])  # (SRAM, cycles), smallest SRAM first
    size = [
        t.user_attrs["metrics"]
        for t in trials_done
        if t.user_attrs["config"].get("producer") == "vela"
        and t.user_attrs["config"].get("vela_optimise") == "Size"
        and t.user_attrs["metrics"]["sram_used_bytes"] is not None
    ]
    bound = next(
        (
            t.user_attrs["metrics"]["sram_lower_bound_bytes"]
            for t in trials_done
            if t.user_attrs["metrics"].get("sram_lower_bound_bytes") is not None
        ),
        None,
    )
    return {
        "model": model,
        "device": device,
        "trials": len(trials_done),
        "seconds": round(seconds, 1),
        "bound": bound,
        "front": [[sram, cycles] for sram, cycles, _ in front],
        "front_params": [t.params for _, _, t in front],  # which options made each point
        "vela_size": min((m["sram_used_bytes"] for m in size), default=None),
        "vela_size_cycles": min((m["total_cycles"] for m in size), default=None),
        "allocation": allocation(path, DEVICES[device]),
    }


def figures(row: dict) -> dict:
    """What the table shows of a measured row: the floor, the fastest cycles, the smallest
    SRAM within each check's cycles, and the widest steps."""
    front = row["front"]
    fastest = min(cycles for _, cycles in front)
    found = {"floor": front[0][0], "floor_cycles": front[0][1], "fastest": fastest}
    for factor, _, _ in CHECKS:
        found[factor] = min(sram for sram, cycles in front if cycles <= factor * fastest)
    found["widest"] = _widest_step(front, row["vela_size"], buying=False)
    found["buying"] = _widest_step(front, row["vela_size"], buying=True)
    return found


def _widest_step(front: list[list], up_to: int | None, buying: bool) -> float:
    """The largest SRAM ratio between neighbouring front points from the floor to `up_to`
    (and to the first point past it); with `buying`, only of steps to a point that is more
    than 1% faster."""
    points = [(sram, cycles) for sram, cycles in front]
    if up_to is not None:
        past = next((i for i, (s, _) in enumerate(points) if s >= up_to), len(points) - 1)
        points = points[: past + 1]
    steps = [
        b[0] / a[0]
        for a, b in itertools.pairwise(points)
        if a[0] > 0 and (not buying or b[1] < BUYS * a[1])
    ]
    return max(steps, default=1.0)


def allocation(path: Path, device: tuple[str, str, str]) -> float:
    """The worst address peak over live peak among the seed kinds' smallest schedules."""
    session = Session(path, Device(*device))
    worst = 1.0
    for kind in SearchSpace(TINY_POOL, TINY_POOL, cascader_optional=True).seed_kinds():
        config = replace(kind, sram_pool_bytes=TINY_POOL).config(SRAM_MAX)
        with contextlib.redirect_stdout(io.StringIO()):
            schedule = session.schedule(config).schedule
        timeline = memory_timeline(schedule, str)
        if timeline.live_peak:
            worst = max(worst, timeline.peak / timeline.live_peak)
    return round(worst, 4)


def verdicts(row: dict) -> list[bool]:
    """Per check of CHECKS, whether the row meets it; then whether no step that buys speed
    is wider than GAP."""
    found, met = figures(row), []
    for factor, share, of_bound in CHECKS:
        below = row["vela_size"] is not None and found[factor] <= share * row["vela_size"]
        near = row["bound"] is not None and found[factor] <= of_bound * max(row["bound"], 1)
        met.append(below or near)
    met.append(found["buying"] <= GAP)
    return met


def table(rows: list[dict]) -> str:
    head = (
        "| model | device | lower bound | floor (cycles) | fastest | SRAM at 1.5x | SRAM at 2x "
        "| Vela Size (cycles) | 1.5x vs Size | 2x vs Size | widest step (buying) "
        "| allocation | checks |\n"
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
    )
    lines = [head]
    for r in rows:
        f, size = figures(r), r["vela_size"]
        checks = "".join("y" if ok else "n" for ok in verdicts(r))
        vela = f"{format_size(size)} ({r['vela_size_cycles'] / 1e6:.2f} M)" if size else "-"
        allocation = f"{r['allocation']:.3f}" if "allocation" in r else "-"
        lines.append(
            f"| {r['model']} | {r['device']} | {format_size(r['bound'] or 0)} "
            f"| {format_size(f['floor'])} ({f['floor_cycles'] / 1e6:.2f} M) "
            f"| {f['fastest'] / 1e6:.2f} M | {format_size(f[1.5])} | {format_size(f[2.0])} "
            f"| {vela} | {_versus(f[1.5], size)} | {_versus(f[2.0], size)} "
            f"| {f['widest']:.2f} ({f['buying']:.2f}) | {allocation} | {checks} |"
        )
    return "\n".join(lines)


def _versus(sram: int, size: int | None) -> str:
    return f"{(sram / size - 1) * 100:+.0f}%" if size else "-"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=60)
    parser.add_argument("--models", default=",".join(ARCHITECTURES))
    parser.add_argument("--devices", default=",".join(DEVICES))
    parser.add_argument("--seed", type=int, help="seed each sweep's sampler (unseeded: a user's)")
    parser.add_argument("-o", "--output", type=Path)
    parser.add_argument("--partial", type=Path, help="append each case's row here (JSON lines)")
    parser.add_argument("--table", type=Path, help="only print the table of a --partial file")
    args = parser.parse_args()
    if args.table is not None:
        print(table([json.loads(line) for line in args.table.read_text().splitlines()]))
        return 0
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    rows = []
    for model in args.models.split(","):
        for device in args.devices.split(","):
            row = measure(model, device, args.trials, args.seed)
            rows.append(row)
            print(table([row]).splitlines()[-1], file=sys.stderr, flush=True)
            if args.partial is not None:
                with args.partial.open("a") as f:
                    f.write(json.dumps(row) + "\n")
    text = table(rows)
    print(text)
    if args.output is not None:
        args.output.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
