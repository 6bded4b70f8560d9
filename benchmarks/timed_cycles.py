"""Timed cycles (`cascader.timing`) against Vela 5.2's own estimate, on Vela's own output.

Every shared model (../shared/models) and every builder model of
`cascader.testing.networks.CATALOGUE` is compiled by the `vela` command for Ethos-U55-256
(Ethos_U55_High_End_Embedded, Shared_Sram) and Ethos-U65-256 (Ethos_U65_High_End,
Dedicated_Sram), with its default C++ core and with `--debug-force-legacy-core`. Vela's
estimate is its summary csv's `cycles_total`; the timed cycles run the command streams of the
file it wrote. The table gives both, their ratio, and the timed run's split: the kernel
engine's busy cycles, the DMA engine's, and the cycles the kernel engine is idle (DMA the
stream's waits expose).

Each core's rows cost the kernel commands with that core's own per-operation numbers: the
legacy core's with the legacy formulas (`cascader.timing.op_cost`), the C++ core's with
regor's per-layer report (`cascader.timing.regor_layers`), from the same compile run in
process (`compile_model`, whose file must be the `vela` command's byte for byte). Where
regor's layers do not map onto the file, the row takes the legacy formulas, is marked
"C++ (legacy formulas)" and says why on stderr.

With `--ours`, the same for this project's own `_dse.tflite` at a few SRAM pools (the
design point's default options): our estimate (`Session.compile`'s) against the timed cycles
of the file `dse compile` would write.

With `--ours --fronts`, the shared models only, on each device's front instead of fixed pools:
a `dse sweep` (cascader producer, 256 B..4 MiB pools, `--trials`) gives the front; its floor
(least SRAM), its 1.5x point (the least SRAM within 1.5x of the fastest point's cycles) and
its fastest point are timed. Then every Vela 5.2 point of the shared baselines
(../shared/baselines/vela_5.2.0.csv, both cores) that a front point matches (no more SRAM,
no more estimated cycles) is checked again under timed cycles: does some front point within
its SRAM still take fewer timed cycles than Vela's estimate (Vela's own streams time within
4.3% of it on these models)?

`--jobs` prints, per case, every kernel operation and DMA of the timed run on stderr (start,
cycles, and for a kernel its description, compute and access cycles, what bounds it): what
the README's explanations of the outliers are read from.

Usage:
    python benchmarks/timed_cycles.py [--quick] [--ours [--fronts [--trials N]]] [--jobs]
        [--models-dir DIR] [--models STEM ...]
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import json
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from quality_vs_vela import SRAM_MIN, vela_rows
from shared_models import add_model_arguments, model_paths

from cascader.artifact.firmware_tflite import model_for_firmware
from cascader.estimate import Device, PointConfig
from cascader.ethosu.defaults import POINT_OPTIONS
from cascader.ethosu.vela_arch import DEFAULT_VELA_INI
from cascader.ethosu.vela_compiler import VelaOptions, compile_model
from cascader.pipeline import Session
from cascader.testing.networks import CATALOGUE, COMPOSITIONS
from cascader.testing.shared import shared_dir
from cascader.timing import LayerCycles, TimedStream, time_model
from dse.cli import main as dse_main
from dse.space import DesignPoint

VELA = Path(sys.executable).parent / "vela"
SYSTEMS = {
    "ethos-u55-256": ("Ethos_U55_High_End_Embedded", "Shared_Sram"),
    "ethos-u65-256": ("Ethos_U65_High_End", "Dedicated_Sram"),
}
CORES = {"C++": (), "legacy": ("--debug-force-legacy-core",)}
POOLS = (64 << 10, 256 << 10, 1 << 20)
SRAM_MAX = 4 << 20  # the sweeps' largest pool: their proposals' generation region


@dataclass(frozen=True)
class Row:
    model: str
    accelerator: str
    core: str
    estimate: float
    timed: float
    kernels: float
    dmas: float

    @property
    def ratio(self) -> float:
        return self.timed / self.estimate

    @property
    def exposed(self) -> float:
        """Timed cycles the kernel engine is idle."""
        return self.timed - self.kernels


def vela_estimate_and_file(model: Path, accelerator: str, core: str, out: Path) -> tuple:
    """Compile with the `vela` command; its estimate (cycles_total) and output file."""
    config, mode = SYSTEMS[accelerator]
    argv = [str(VELA), str(model), "--output-dir", str(out), "--accelerator-config",
            accelerator, "--config", str(DEFAULT_VELA_INI), "--system-config", config,
            "--memory-mode", mode, *CORES[core]]  # fmt: skip
    subprocess.run(argv, check=True, capture_output=True)
    summary = out / f"{model.stem}_summary_{config}.csv"
    with summary.open() as f:
        estimate = float(next(csv.DictReader(f))["cycles_total"])
    return estimate, (out / f"{model.stem}_vela.tflite").read_bytes()


def regor_layers(model: Path, accelerator: str, compiled: bytes) -> LayerCycles | str:
    """regor's per-layer report of the `vela` command's C++ compile, from the same compile
    run in process; or why not (its file is not the command's)."""
    found = compile_model(model, VelaOptions(accelerator, *SYSTEMS[accelerator]))
    if found.tflite != compiled:
        return "the in-process compile wrote other bytes than the vela command"
    return LayerCycles.of(found)


def measure(model: Path, name: str, accelerator: str, core: str) -> tuple[Row, TimedStream]:
    config, mode = SYSTEMS[accelerator]
    with tempfile.TemporaryDirectory() as tmp:
        estimate, compiled = vela_estimate_and_file(model, accelerator, core, Path(tmp))
    layers = regor_layers(model, accelerator, compiled) if core == "C++" else None
    timed = time_model(compiled, config, mode, layers=None if isinstance(layers, str) else layers)
    refusal = layers if isinstance(layers, str) else timed.refusal
    if refusal is not None:
        print(f"{name} {accelerator} {core}: legacy formulas, {refusal}", file=sys.stderr)
        core = f"{core} (legacy formulas)"
    row = Row(name, accelerator, core, estimate, timed.cycles, timed.busy(True),
              timed.busy(False))  # fmt: skip
    return row, timed


def job_lines(row: Row, timed: TimedStream) -> str:
    """Every job of one case's timed run, in stream order."""
    lines = [f"# {row.model} {row.accelerator} {row.core}: estimate {row.estimate:,.0f}, "
             f"timed {row.timed:,.0f}"]  # fmt: skip
    for job in timed.jobs:
        cycles = job.end - job.start
        line = f"{job.offset:#07x} {job.name:<20} start {job.start:>11,.0f} {cycles:>10,.0f}"
        cost = job.cost
        if cost is not None:
            d = cost.description
            access = " ".join(f"{a} {c:,.0f}" for a, c in cost.access.items())
            line += (f"  {d.kind} {d.sub_op} ifm {d.ifm_shape} ofm {d.ofm_shape} k {d.kernel} "
                     f"| compute {cost.compute:,.0f} {access} -> {cost.bound}")  # fmt: skip
        lines.append(line)
    return "\n".join(lines)


def ours(model: Path, name: str) -> list[tuple[Row, TimedStream]]:
    """Our estimate against our file's timed cycles, per device and pool that fits."""
    rows = []
    for accelerator, (config, mode) in SYSTEMS.items():
        session = Session(model.read_bytes(), Device(accelerator, config, mode))
        for pool in POOLS:
            with contextlib.redirect_stdout(io.StringIO()):
                estimate, point, compiled = session.compile(PointConfig(pool, POINT_OPTIONS))
            if not estimate.fits or estimate.total_cycles is None:
                continue
            data = model_for_firmware(session.model_bytes, compiled, point.schedule)
            timed = time_model(data, config, mode)
            row = Row(name, accelerator, f"ours {pool >> 10} KiB", estimate.total_cycles,
                      timed.cycles, timed.busy(True), timed.busy(False))  # fmt: skip
            rows.append((row, timed))
    return rows


def builder_models(names: list[str], folder: Path) -> list[tuple[str, Path]]:
    paths = []
    for name in names:
        path = folder / f"{name}.tflite"
        path.write_bytes(CATALOGUE[name]().build())
        paths.append((name, path))
    return paths


def table(rows: list[Row]) -> str:
    lines = [
        "| model | device | compiler | estimate | timed | timed/estimate | kernel busy | DMA busy "
        "| kernel idle |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r.model} | {r.accelerator} | {r.core} | {r.estimate:,.0f} | {r.timed:,.0f} | "
            f"{r.ratio:.3f} | {r.kernels:,.0f} | {r.dmas:,.0f} | {r.exposed:,.0f} |"
        )
    return "\n".join(lines)


def cases(path: Path, name: str, our_files: bool) -> list[tuple[Row, TimedStream]]:
    """The model's cases: ours at each pool, or Vela's per device and core; a case Vela,
    our front half or the timing refuses is said on stderr and left out."""
    if our_files:
        try:
            return ours(path, name)
        except Exception as error:  # a model our front half refuses: say it
            print(f"{name}: {error}", file=sys.stderr)
            return []
    found = []
    for accelerator in SYSTEMS:
        for core in CORES:
            try:
                found.append(measure(path, name, accelerator, core))
            except Exception as error:  # one model Vela or the timing refuses: say it
                print(f"{name} {accelerator} {core}: {error}", file=sys.stderr)
    return found


def summary(rows: list[Row]) -> str:
    """Per compiler and device: cases, how many within 10% of the estimate, the ratios."""
    lines = [
        "| compiler | device | cases | within 10% | median timed/estimate | min | max |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    groups: dict[tuple[str, str], list[float]] = {}
    for r in rows:
        groups.setdefault((r.core.split(" ")[0], r.accelerator), []).append(r.ratio)
    for (core, accelerator), ratios in groups.items():
        near = sum(abs(x - 1) <= 0.10 for x in ratios)
        lines.append(
            f"| {core} | {accelerator} | {len(ratios)} | {near} | {statistics.median(ratios):.3f} "
            f"| {min(ratios):.3f} | {max(ratios):.3f} |"
        )
    return "\n".join(lines)


def sweep_rows(model: Path, accelerator: str, trials: int) -> list[dict]:
    """The front of a fresh cascader sweep of the model: one estimate object per point, with
    its design point (`config`)."""
    config, mode = SYSTEMS[accelerator]
    with tempfile.TemporaryDirectory(prefix="dse-timed-") as out:
        argv = ["sweep", "--model", str(model), "--accelerator-config", accelerator,
                "--system-config", config, "--memory-mode", mode, "--sram-min", SRAM_MIN,
                "--sram-max", "4MiB", "--trials", str(trials), "--producers", "cascader",
                "--out", out, "--json"]  # fmt: skip
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            if dse_main(argv) != 0:
                raise SystemExit(f"dse sweep failed on {model.name} {accelerator}")
    return json.loads(buf.getvalue())["front"]


def picked(front: list[dict]) -> dict[str, dict]:
    """The front's floor, 1.5x point and fastest point (a point may be more than one)."""
    floor = min(front, key=lambda r: (r["sram_used_bytes"], r["total_cycles"]))
    fastest = min(front, key=lambda r: (r["total_cycles"], r["sram_used_bytes"]))
    near = [r for r in front if r["total_cycles"] <= 1.5 * fastest["total_cycles"]]
    middle = min(near, key=lambda r: (r["sram_used_bytes"], r["total_cycles"]))
    return {"floor": floor, "1.5x": middle, "fastest": fastest}


class FrontTimer:
    """Compiles and times a model's front points on one device, each once."""

    def __init__(self, model: Path, accelerator: str) -> None:
        self.accelerator = accelerator
        self.session = Session(model.read_bytes(), Device(accelerator, *SYSTEMS[accelerator]))
        self.timed: dict[int, tuple[float, float, float, float]] = {}

    def __call__(self, row: dict) -> tuple[float, float, float, float]:
        """(our estimate, timed cycles, kernel busy, DMA busy) of a front point, rebuilt from
        its design point."""
        found = self.timed.get(row["trial"])
        if found is None:
            point_config = DesignPoint(**row["config"]).config(SRAM_MAX)
            with contextlib.redirect_stdout(io.StringIO()):
                estimate, point, compiled = self.session.compile(point_config)
            data = model_for_firmware(self.session.model_bytes, compiled, point.schedule)
            timed = time_model(data, *SYSTEMS[self.accelerator])
            found = (estimate.total_cycles, timed.cycles, timed.busy(True), timed.busy(False))
            self.timed[row["trial"]] = found
        return found


def vela_check(front: list[dict], vela: list[dict], timer: FrontTimer) -> tuple[int, int, list]:
    """Of Vela's distinct points a front point matches on the estimate: how many, how many a
    front point within its SRAM still beats under timed cycles, and the ones none does
    (Vela's point, our best timed point within its SRAM)."""
    points = sorted({(r["sram"], r["cycles"], r["core"]) for r in vela})
    matched = beaten = 0
    misses = []
    for sram, cycles, core in points:
        within = [r for r in front if r["sram_used_bytes"] <= sram]
        if not any(r["total_cycles"] <= cycles for r in within):
            continue
        matched += 1
        best = min(((timer(r)[1], r) for r in within), key=lambda x: x[0])
        if best[0] <= cycles:
            beaten += 1
        else:
            misses.append((core, sram, cycles, best[1]["sram_used_bytes"], best[0],
                           best[1]["total_cycles"]))  # fmt: skip
    return matched, beaten, misses


def fronts(paths: list[Path], trials: int) -> int:
    """`--ours --fronts`: the timed table at each front's three points, and Vela's points
    rechecked under timed cycles."""
    shared = shared_dir()
    baselines = shared / "baselines" / "vela_5.2.0.csv" if shared else None
    rows, checks = [], []
    print(table([]), flush=True)
    for path in paths:
        for accelerator, (config, mode) in SYSTEMS.items():
            front = sweep_rows(path, accelerator, trials)
            timer = FrontTimer(path, accelerator)
            for label, point in picked(front).items():
                row = Row(path.stem, accelerator, f"ours {label}", *timer(point))
                rows.append(row)
                print(table([row]).splitlines()[-1], flush=True)
            if baselines is not None:
                vela = vela_rows(baselines, path.stem, (accelerator, config, mode))
                checks.append((path.stem, accelerator, len(front), *vela_check(front, vela, timer)))
    print()
    print(summary(rows))
    print()
    print("| model | device | front | Vela points matched (estimate) | still beaten (timed) |")
    print("|---|---|---:|---:|---:|")
    for model, accelerator, size, matched, beaten, _ in checks:
        print(f"| {model} | {accelerator} | {size} | {matched} | {beaten} |")
    for model, accelerator, _, _, _, misses in checks:
        for core, sram, cycles, ours_sram, ours_timed, ours_estimate in misses:
            print(f"- {model} {accelerator} {core}: Vela {sram:,} B, {cycles:,.0f} cycles; our "
                  f"best within it {ours_sram:,} B, timed {ours_timed:,.0f} (estimate "
                  f"{ours_estimate:,.0f})")  # fmt: skip
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_model_arguments(parser)
    parser.add_argument("--quick", action="store_true", help="builder compositions only")
    parser.add_argument("--ours", action="store_true", help="our _dse.tflite, not Vela's")
    parser.add_argument("--jobs", action="store_true", help="every timed job, on stderr")
    parser.add_argument("--fronts", action="store_true",
                        help="with --ours: the shared models' fronts, not fixed pools")  # fmt: skip
    parser.add_argument("--trials", type=int, default=40, help="trials of each --fronts sweep")
    args = parser.parse_args()
    if args.fronts:
        return fronts(model_paths(args) or [], args.trials)
    shared = [(p.stem, p) for p in (model_paths(args) or [])]
    rows = []
    print(table([]), flush=True)  # rows follow as they are measured: a long run shows progress
    with tempfile.TemporaryDirectory() as tmp:
        names = [*COMPOSITIONS, "mobilenet_like"] if args.quick else list(CATALOGUE)
        for name, path in shared + builder_models(names, Path(tmp)):
            for row, timed in cases(path, name, args.ours):
                if row.estimate == 0:  # Vela moved no data on the NPU (e.g. a RESHAPE)
                    print(f"{name} {row.accelerator} {row.core}: no NPU cycles", file=sys.stderr)
                    continue
                rows.append(row)
                print(table([row]).splitlines()[-1], flush=True)
                if args.jobs:
                    print(job_lines(row, timed), file=sys.stderr)
    print()
    print(summary(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
