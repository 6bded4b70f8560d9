"""Timed cycles (`cascader.timing`) against Vela 5.2's own estimate, on Vela's own output.

Every shared model (../shared/models) and every builder model of
`cascader.testing.networks.CATALOGUE` is compiled by the `vela` command for Ethos-U55-256
(Ethos_U55_High_End_Embedded, Shared_Sram) and Ethos-U65-256 (Ethos_U65_High_End,
Dedicated_Sram), with its default C++ core and with `--debug-force-legacy-core`. Vela's
estimate is its summary csv's `cycles_total`; the timed cycles run the command streams of the
file it wrote. The table gives both, their ratio, and the timed run's split: the kernel
engine's busy cycles, the DMA engine's, and the cycles the kernel engine is idle (DMA the
stream's waits expose).

With `--ours`, the same for this project's own `_dse.tflite` at a few SRAM pools (the
design point's default options): our estimate (`Session.compile`'s) against the timed cycles
of the file `dse compile` would write.

`--jobs` prints, per case, every kernel operation and DMA of the timed run on stderr (start,
cycles, and for a kernel its description, compute and access cycles, what bounds it): what
the README's explanations of the outliers are read from.

Usage:
    python benchmarks/timed_cycles.py [--quick] [--ours] [--jobs] [--models-dir DIR]
        [--models STEM ...]
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from shared_models import add_model_arguments, model_paths

from cascader.artifact.firmware_tflite import model_for_firmware
from cascader.estimate import Device, PointConfig
from cascader.ethosu.defaults import POINT_OPTIONS
from cascader.ethosu.vela_arch import DEFAULT_VELA_INI
from cascader.pipeline import Session
from cascader.testing.networks import CATALOGUE, COMPOSITIONS
from cascader.timing import TimedStream, time_model

VELA = Path(sys.executable).parent / "vela"
SYSTEMS = {
    "ethos-u55-256": ("Ethos_U55_High_End_Embedded", "Shared_Sram"),
    "ethos-u65-256": ("Ethos_U65_High_End", "Dedicated_Sram"),
}
CORES = {"C++": (), "legacy": ("--debug-force-legacy-core",)}
POOLS = (64 << 10, 256 << 10, 1 << 20)


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


def measure(model: Path, name: str, accelerator: str, core: str) -> tuple[Row, TimedStream]:
    config, mode = SYSTEMS[accelerator]
    with tempfile.TemporaryDirectory() as tmp:
        estimate, compiled = vela_estimate_and_file(model, accelerator, core, Path(tmp))
    timed = time_model(compiled, config, mode)
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_model_arguments(parser)
    parser.add_argument("--quick", action="store_true", help="builder compositions only")
    parser.add_argument("--ours", action="store_true", help="our _dse.tflite, not Vela's")
    parser.add_argument("--jobs", action="store_true", help="every timed job, on stderr")
    args = parser.parse_args()
    shared = [(p.stem, p) for p in (model_paths(args) or [])]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        names = [*COMPOSITIONS, "mobilenet_like"] if args.quick else list(CATALOGUE)
        for name, path in shared + builder_models(names, Path(tmp)):
            for row, timed in cases(path, name, args.ours):
                if row.estimate == 0:  # Vela moved no data on the NPU (e.g. a RESHAPE)
                    print(f"{name} {row.accelerator} {row.core}: no NPU cycles", file=sys.stderr)
                    continue
                rows.append(row)
                if args.jobs:
                    print(job_lines(row, timed), file=sys.stderr)
    print(table(rows))
    print()
    print(summary(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
