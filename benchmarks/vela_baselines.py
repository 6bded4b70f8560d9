"""Vela 5.2's own results on the project's real architectures (`cascader.testing.architectures`),
in the form of `../shared/baselines/vela_5.2.0.csv` (same header, one row per `vela` run).

For every architecture, both configurations (ethos-u55-256 / Ethos_U55_High_End_Embedded /
Shared_Sram and ethos-u65-256 / Ethos_U65_High_End / Dedicated_Sram) and each core (`regor`, Vela's
default, and `legacy-python`, the same run with `--debug-force-legacy-core`), the `vela` CLI is run
as a subprocess with the `Arm/vela.ini` shipped in the ethos-u-vela wheel:
- suite `required`: `--optimise Performance`, no arena cache size;
- suite `extra`: `--optimise Size`;
- suite `dense_sweep`: `--optimise Performance --arena-cache-size N` for N from 16 KiB to 4 MiB.
Vela's summary CSV and the output .tflite are read back into the shared CSV's columns (the ones
Vela does not give stay empty); `compile_s` is the wall-clock of the subprocess. A compile that
fails, or takes longer than `--timeout` seconds, gets status `error` and a one-line `error`.

The run is resumable: rows already in `--out` are kept, only missing (model, core, accelerator,
optimise, arena) combinations run, and each row is appended as soon as its compile ends. Cores run
in the order given (all models under the first core, then all under the next).

Run (one Vela process at a time; nice it on a shared machine):
    nice -n 10 python benchmarks/vela_baselines.py [--models unet,ds_cnn]
        [--cores regor,legacy-python] [--out benchmarks/vela_architectures_5.2.0.csv]
        [--timeout 900]
    python benchmarks/vela_baselines.py --report   # the sanity table of --out, no runs
"""

from __future__ import annotations

import argparse
import csv
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

import ethosu.vela
from ethosu.vela.tflite.BuiltinOperator import BuiltinOperator
from ethosu.vela.tflite.Model import Model

from cascader.testing.architectures import ARCHITECTURES, build_cached

VELA_VERSION = "5.2.0"
DEFAULT_OUT = Path(__file__).resolve().parent / f"vela_architectures_{VELA_VERSION}.csv"
VELA_INI = Path(ethosu.vela.__file__).resolve().parent.parent / "config_files" / "Arm" / "vela.ini"
MODEL_SET = "architectures"
CORES = ("regor", "legacy-python")
SWEEP_KIB = (16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096)
TIMEOUT_S = 900.0

# The shared baseline CSV's header, in its order.
HEADER = [
    "suite", "model", "model_set", "config", "core", "accelerator", "system_config", "memory_mode",
    "optimise", "arena_cache_size_bytes", "arena_cache_size_effective_kib", "status", "error",
    "sram_used_kib", "offchip_flash_used_kib", "dram_used_kib", "weights_storage_area",
    "feature_map_storage_area", "cycles_total", "cycles_npu", "cycles_sram_access",
    "cycles_offchip_access", "inference_time_ms", "inferences_per_s", "sram_bytes_per_inf",
    "offchip_bytes_per_inf", "sram_mib_per_inf", "offchip_mib_per_inf", "nn_macs", "npu_ops_vela",
    "cpu_ops_vela", "out_ethosu_custom_ops", "out_cpu_ops", "out_cpu_op_types",
    "encoded_weights_bytes", "vela_tflite_bytes", "compile_s",
]  # fmt: skip

# Summary-CSV name of each off-chip storage area Vela may report.
_AREA_KEYS = {"Off-chip Flash": "off_chip_flash", "DRAM": "dram", "On-chip Flash": "on_chip_flash"}
_BUILTIN_NAMES = {v: k for k, v in vars(BuiltinOperator).items() if not k.startswith("_")}


@dataclass(frozen=True)
class Config:
    """One accelerator / system config / memory mode, with the shared CSV's config-name stems."""

    accelerator: str
    system_config: str
    memory_mode: str
    perf_name: str  # --optimise Performance, no arena size
    size_name: str  # --optimise Size
    sweep_name: str  # --optimise Performance --arena-cache-size N (suffix _k<KiB>)


CONFIGS = (
    Config("ethos-u55-256", "Ethos_U55_High_End_Embedded", "Shared_Sram",
           "b_u55_256_perf", "e_u55_256_size", "f_u55_256_perf"),
    Config("ethos-u65-256", "Ethos_U65_High_End", "Dedicated_Sram",
           "c_u65_256_perf_default", "h_u65_256_size", "g_u65_256_perf"),
)  # fmt: skip


@dataclass(frozen=True)
class Job:
    """One `vela` run: a model under a core, configuration, strategy and arena cache size."""

    model: str
    core: str
    config: Config
    suite: str
    name: str
    optimise: str
    arena: int | None  # bytes; None = not given

    @property
    def key(self) -> tuple[str, str, str, str, str]:
        return _key(self.model, self.core, self.config.accelerator, self.optimise, self.arena)


def _key(model: str, core: str, accelerator: str, optimise: str, arena: object) -> tuple:
    """Identity of a run in the CSV (arena as the text the CSV holds)."""
    return model, core, accelerator, optimise, "" if arena in (None, "") else str(int(arena))


def jobs(models: list[str], cores: list[str]) -> Iterator[Job]:
    """Every run, core-major: all models under the first core, then the next."""
    for core in cores:
        prefix = "L_" if core == "legacy-python" else ""
        for model in models:
            for c in CONFIGS:
                yield Job(model, core, c, "required", prefix + c.perf_name, "Performance", None)
                yield Job(model, core, c, "extra", prefix + c.size_name, "Size", None)
                for kib in SWEEP_KIB:
                    name = f"{prefix}{c.sweep_name}_k{kib}"
                    yield Job(model, core, c, "dense_sweep", name, "Performance", kib * 1024)


def vela_command(job: Job, model_path: Path, out_dir: Path) -> list[str]:
    """The `vela` CLI invocation of a job."""
    exe = Path(sys.executable).parent / "vela"
    argv = [str(exe) if exe.is_file() else (shutil.which("vela") or "vela"), str(model_path),
            "--config", str(VELA_INI),
            "--accelerator-config", job.config.accelerator,
            "--system-config", job.config.system_config,
            "--memory-mode", job.config.memory_mode,
            "--optimise", job.optimise,
            "--output-dir", str(out_dir)]  # fmt: skip
    if job.arena is not None:
        argv += ["--arena-cache-size", str(job.arena)]
    if job.core == "legacy-python":
        argv.append("--debug-force-legacy-core")
    return argv


def _one_line(text: str, lines: int = 3) -> str:
    """The last few non-empty lines of Vela's output, joined into one line."""
    tail = [line.strip() for line in text.strip().splitlines() if line.strip()][-lines:]
    return " | ".join(tail) or "no output"


def _count(text: str, label: str) -> str:
    match = re.search(rf"^{label} = (\d+)", text, re.MULTILINE)
    return match.group(1) if match else ""


def _int(value: str) -> int:
    return int(float(value))


def tflite_ops(path: Path) -> tuple[int, int, str]:
    """(ethos-u custom ops, other ops, ';'-joined sorted types of the others) in a .tflite."""
    model = Model.GetRootAsModel(path.read_bytes(), 0)
    codes = []
    for i in range(model.OperatorCodesLength()):
        code = model.OperatorCodes(i)
        builtin = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
        custom = code.CustomCode()
        codes.append(custom.decode() if custom else _BUILTIN_NAMES.get(builtin, str(builtin)))
    npu = cpu = 0
    cpu_types: set[str] = set()
    for s in range(model.SubgraphsLength()):
        graph = model.Subgraphs(s)
        for j in range(graph.OperatorsLength()):
            kind = codes[graph.Operators(j).OpcodeIndex()]
            if kind == "ethos-u":
                npu += 1
            else:
                cpu += 1
                cpu_types.add(kind)
    return npu, cpu, ";".join(sorted(cpu_types))


def summary_columns(summary: dict[str, str], text: str, out_tflite: Path) -> dict[str, object]:
    """The shared CSV's result columns from Vela's summary row, its stdout and its .tflite."""
    weights, fmaps = summary["weights_storage_area"], summary["feature_map_storage_area"]
    offchip = next((_AREA_KEYS[a] for a in (weights, fmaps) if a in _AREA_KEYS), "off_chip_flash")
    sram_bytes = _int(summary["sram_total_bytes"])
    offchip_bytes = _int(summary[f"{offchip}_total_bytes"])
    row: dict[str, object] = {
        "arena_cache_size_effective_kib": summary["arena_cache_size"],
        "sram_used_kib": summary["sram_memory_used"],
        "offchip_flash_used_kib": summary["off_chip_flash_memory_used"],
        "dram_used_kib": summary["dram_memory_used"],
        "weights_storage_area": weights,
        "feature_map_storage_area": fmaps,
        "cycles_total": _int(summary["cycles_total"]),
        "cycles_npu": _int(summary["cycles_npu"]),
        "cycles_sram_access": _int(summary["cycles_sram_access"]),
        "cycles_offchip_access": _int(summary[f"cycles_{offchip}_access"]),
        "inference_time_ms": round(float(summary["inference_time"]) * 1000, 6),
        "inferences_per_s": round(float(summary["inferences_per_second"]), 3),
        "sram_bytes_per_inf": sram_bytes,
        "offchip_bytes_per_inf": offchip_bytes,
        "sram_mib_per_inf": round(sram_bytes / 2**20, 4),
        "offchip_mib_per_inf": round(offchip_bytes / 2**20, 4),
        "nn_macs": _int(summary["nn_macs"]),
        "npu_ops_vela": _count(text, "NPU operators"),
        "cpu_ops_vela": _count(text, "CPU operators"),
        "encoded_weights_bytes": _int(summary["total_npu_encoded_weights"]),
    }
    if out_tflite.is_file():
        npu, cpu, cpu_types = tflite_ops(out_tflite)
        row |= {"out_ethosu_custom_ops": npu, "out_cpu_ops": cpu, "out_cpu_op_types": cpu_types,
                "vela_tflite_bytes": out_tflite.stat().st_size}  # fmt: skip
    return row


def run_job(job: Job, model_path: Path, timeout: float) -> dict[str, object]:
    """Compile one job with the `vela` CLI and return its CSV row."""
    row: dict[str, object] = dict.fromkeys(HEADER, "")
    row |= {
        "suite": job.suite, "model": job.model, "model_set": MODEL_SET, "config": job.name,
        "core": job.core, "accelerator": job.config.accelerator,
        "system_config": job.config.system_config, "memory_mode": job.config.memory_mode,
        "optimise": job.optimise, "arena_cache_size_bytes": "" if job.arena is None else job.arena,
    }  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="vela-arch-") as tmp:
        out_dir = Path(tmp)
        start = time.perf_counter()
        try:
            proc = subprocess.run(vela_command(job, model_path, out_dir), capture_output=True,
                                  text=True, timeout=timeout, check=False)  # fmt: skip
        except subprocess.TimeoutExpired:
            row |= {"status": "error", "error": f"timeout: no result after {timeout:.0f} s",
                    "compile_s": round(time.perf_counter() - start, 3)}  # fmt: skip
            return row
        row["compile_s"] = round(time.perf_counter() - start, 3)
        text = proc.stdout + "\n" + proc.stderr
        summary = out_dir / f"{model_path.stem}_summary_{job.config.system_config}.csv"
        if proc.returncode != 0 or not summary.is_file():
            row |= {"status": "error", "error": f"rc {proc.returncode}: {_one_line(text)}"}
            return row
        try:
            with summary.open(newline="") as f:
                values = next(csv.DictReader(f))
            row |= summary_columns(values, text, out_dir / f"{model_path.stem}_vela.tflite")
        except (KeyError, ValueError, StopIteration) as exc:
            row |= {"status": "error", "error": f"unreadable summary: {exc!r}"}
            return row
    row |= {"status": "ok", "error": ""}
    return row


def done_keys(out: Path) -> set[tuple]:
    """Keys of the rows already in `out` (checking its header is the shared one)."""
    if not out.is_file() or out.stat().st_size == 0:
        return set()
    with out.open(newline="") as f:
        reader = csv.DictReader(f)
        if reader.fieldnames != HEADER:
            raise SystemExit(f"{out}: header differs from the shared baseline CSV's")
        return {
            _key(r["model"], r["core"], r["accelerator"], r["optimise"],
                 r["arena_cache_size_bytes"])
            for r in reader
        }  # fmt: skip


def append_row(out: Path, row: dict[str, object]) -> None:
    """Append one row (writing the header first into a new file), flushed to disk."""
    new = not out.is_file() or out.stat().st_size == 0
    with out.open("a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=HEADER, lineterminator="\n")
        if new:
            writer.writeheader()
        writer.writerow(row)


def _names(value: str, valid: tuple[str, ...] | list[str], what: str) -> list[str]:
    names = [v.strip() for v in value.split(",") if v.strip()]
    unknown = [n for n in names if n not in valid]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown {what} {unknown}; valid: {', '.join(valid)}")
    return names


def _fmt_point(row: dict[str, str] | None) -> str:
    if row is None:
        return "-"
    if row["status"] != "ok":
        return "error"
    return f"{float(row['sram_used_kib']):.0f} KiB / {int(row['cycles_total']) / 1e6:.3f} M"


def report(out: Path) -> None:
    """Print, per model / configuration / core: the Size and default Performance points
    (SRAM KiB / Mcycles), the dense sweep's SRAM and cycle ranges, how often its cycles rise
    as the arena grows (largest rise in %), CPU ops and errors; then compile time per core."""
    with out.open(newline="") as f:
        rows = list(csv.DictReader(f))
    groups: dict[tuple[str, str, str], list[dict[str, str]]] = {}
    for r in rows:
        groups.setdefault((r["model"], r["accelerator"], r["core"]), []).append(r)
    print("| model | accelerator | core | Size | Performance | sweep SRAM KiB | sweep Mcycles "
          "| sweep rises (max %) | cpu ops | errors |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|")
    for (model, accelerator, core), group in groups.items():
        size = next((r for r in group if r["suite"] == "extra"), None)
        perf = next((r for r in group if r["suite"] == "required"), None)
        sweep = sorted((r for r in group if r["suite"] == "dense_sweep" and r["status"] == "ok"),
                       key=lambda r: int(r["arena_cache_size_bytes"]))  # fmt: skip
        sram = [float(r["sram_used_kib"]) for r in sweep]
        cycles = [int(r["cycles_total"]) for r in sweep]
        rises = [(b - a) / a * 100 for a, b in pairwise(cycles) if b > a]
        cpu = sum(int(r["cpu_ops_vela"] or 0) + int(r["out_cpu_ops"] or 0) for r in group)
        errors = sum(r["status"] != "ok" for r in group)
        ranges = (f"{min(sram):.0f}-{max(sram):.0f} | {min(cycles) / 1e6:.3f}-"
                  f"{max(cycles) / 1e6:.3f}") if sweep else "- | -"  # fmt: skip
        rise = f"{len(rises)} ({max(rises):.1f})" if rises else "0"
        print(f"| {model} | {accelerator} | {core} | {_fmt_point(size)} | {_fmt_point(perf)} "
              f"| {ranges} | {rise} | {cpu} | {errors} |")  # fmt: skip
    for core in CORES:
        times = [float(r["compile_s"]) for r in rows if r["core"] == core and r["compile_s"]]
        if times:
            print(f"{core}: {len(times)} compiles, {sum(times) / 60:.1f} min in total, "
                  f"longest {max(times):.1f} s")  # fmt: skip
    for r in rows:
        if r["status"] != "ok":
            print(f"error: {r['model']} {r['config']} {r['core']}: {r['error']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--models",
        type=lambda v: _names(v, list(ARCHITECTURES), "models"),
        default=list(ARCHITECTURES),
        help="comma-separated (default: all)",
    )
    parser.add_argument(
        "--cores",
        type=lambda v: _names(v, CORES, "cores"),
        default=list(CORES),
        help="comma-separated, run in this order (default: regor,legacy-python)",
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--timeout", type=float, default=TIMEOUT_S, help="seconds per compile")
    parser.add_argument("--report", action="store_true", help="print the table of --out; no runs")
    args = parser.parse_args(argv)
    if args.report:
        report(args.out)
        return 0
    if not VELA_INI.is_file():
        print(f"no vela.ini at {VELA_INI}", file=sys.stderr)
        return 1

    done = done_keys(args.out)
    todo = [job for job in jobs(args.models, args.cores) if job.key not in done]
    print(f"{len(done)} rows in {args.out}; {len(todo)} runs to do", flush=True)
    paths: dict[str, Path] = {}
    for i, job in enumerate(todo, 1):
        if job.model not in paths:
            paths[job.model] = build_cached(job.model)
        row = run_job(job, paths[job.model], args.timeout)
        append_row(args.out, row)
        detail = row["error"] if row["status"] != "ok" else f"sram {row['sram_used_kib']} KiB, " \
            f"{row['cycles_total']} cycles"  # fmt: skip
        print(f"[{i}/{len(todo)}] {job.model} {job.name} {row['status']} "
              f"{row['compile_s']} s: {detail}", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
