"""Our front against Vela 5.2's own points at the same budgets (../shared/baselines).

Run: python benchmarks/quality_vs_vela.py [--trials 60] [--models kws_dscnn,...] [-o FILE]
     python benchmarks/quality_vs_vela.py --architectures [--models unet,...] [-o FILE]

For every model in ../shared/models and each of ethos-u55-256 Shared_Sram and ethos-u65-256
Dedicated_Sram, a `dse sweep` (256 B..4 MiB pools, as Vela's smallest points use 256 B to
15.6 KiB; the default sampler) gives a front of (SRAM used, cycles) scored with Vela's
performance model. A Vela point of the same configuration (vela_5.2.0.csv, both cores)
counts as matched when some front point uses no more SRAM and no more cycles. The Markdown
table goes to stdout and, with -o, to a file.

Vela's legacy core costs an op it runs in a cascade as one whole op, where our evaluator costs
each stripe as the hardware runs it, and it takes off a cascaded op's cycles the part of a
weight copy hidden under the op before while never counting the copy itself. So each legacy
point left unmatched is compiled again by Vela in process, and the list of misses says
whether our front beats its own schedule scored by our evaluator (`vela_scheduled_ops` +
`perf.evaluate`), and Vela's figure with those uncounted cycles put back.

With --architectures, the models are the project's own builds of architectures users bring
(`cascader.testing.architectures`: U-Net, EfficientNet-B0-like, ResNet-50-like, MobileNetV1,
DS-CNN), swept at default flags (16 KiB..4 MiB) against Vela's dense sweeps of them
(benchmarks/vela_architectures_5.2.0.csv, written by benchmarks/vela_baselines.py). The table
counts each core's distinct points, puts floors and fastest points side by side, and gives
the trials that did not fit their pool and a trial's cost in Vela compiles (the median of
three regor compiles of the model timed around its sweep, one before and two after).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import optuna

from cascader.ethosu.perf import evaluate
from cascader.ethosu.vela_baseline import run_vela
from cascader.ethosu.vela_schedule import vela_scheduled_ops
from cascader.testing.architectures import ARCHITECTURES, build_cached
from cascader.testing.shared import shared_dir
from dse.cli import main as dse_main
from dse.sizes import format_size

CONFIGS = (
    ("ethos-u55-256", "Ethos_U55_High_End_Embedded", "Shared_Sram"),
    ("ethos-u65-256", "Ethos_U65_High_End", "Dedicated_Sram"),
)
FLOOR_MODEL = "mobilenet_v2_100_224"
# The pools start at Vela's smallest point: a pool above a schedule's real need lets the
# cascader choose a faster, larger proposal, so a pool floor above 768 B hides
# ad_autoencoder's 768 B schedules (U55) that beat Vela's.
SRAM_MIN = "256B"
ARCHITECTURE_BASELINES = Path(__file__).resolve().parent / "vela_architectures_5.2.0.csv"


def vela_rows(csv_path: Path, model: str, config: tuple[str, str, str]) -> list[dict]:
    """Vela's successful runs of `model` in `config`: core, optimise, arena, SRAM, cycles."""
    accelerator, system_config, memory_mode = config
    rows = []
    with csv_path.open(newline="") as f:
        for r in csv.DictReader(f):
            if (r["model"], r["accelerator"], r["system_config"], r["memory_mode"]) != (
                model,
                accelerator,
                system_config,
                memory_mode,
            ) or r["status"] != "ok":
                continue
            rows.append(
                {
                    "core": r["core"],
                    "optimise": r["optimise"],
                    "arena": r["arena_cache_size_bytes"],
                    "sram": round(float(r["sram_used_kib"]) * 1024),
                    "cycles": float(r["cycles_total"]),
                }
            )
    return rows


def sweep_front(
    model: Path, config: tuple[str, str, str], trials: int, pool_flags: tuple[str, ...]
) -> tuple[list, float, int]:
    """The front of a fresh sweep as (SRAM used, cycles) pairs, the sweep's seconds and how
    many of its trials did not fit their pool. `pool_flags`: the sweep's pool range flags
    (none: the defaults, 16 KiB..4 MiB)."""
    accelerator, system_config, memory_mode = config
    with tempfile.TemporaryDirectory(prefix="dse-quality-") as out:
        argv = ["sweep", "--model", str(model), "--accelerator-config", accelerator]
        argv += ["--system-config", system_config, "--memory-mode", memory_mode]
        argv += [*pool_flags, "--trials", str(trials), "--out", out, "--json"]
        argv += ["--producers", "cascader"]  # our front against Vela's, not their union
        buf = io.StringIO()
        start = time.perf_counter()
        with contextlib.redirect_stdout(buf):
            code = dse_main(argv)
        seconds = time.perf_counter() - start
        if code != 0:
            raise SystemExit(f"dse sweep failed on {model.name} {config} (exit {code})")
        result = json.loads(buf.getvalue())
        study = optuna.load_study(study_name=result["study"], storage=result["storage"])
        misfits = sum(
            not t.user_attrs.get("metrics", {}).get("fits", False)
            for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
        )
    front = [(p["sram_used_bytes"], p["total_cycles"]) for p in result["front"]]
    return front, seconds, misfits


def vela_seconds(model: Path, config: tuple[str, str, str]) -> float:
    """Wall-clock of one in-process Vela compile (C++ core, --optimise Performance) of the
    model, as benchmarks/bench_dse.py times it, in this run so that it and the sweep share
    the machine's load."""
    start = time.perf_counter()
    run_vela(model, *config)
    return time.perf_counter() - start


def bracketed_sweep(
    model: Path, config: tuple[str, str, str], trials: int, pool_flags: tuple[str, ...]
) -> tuple[list, float, int, float]:
    """`sweep_front` with the median of three Vela compiles around it (one before, two
    after): this machine's speed drifts within minutes, so one compile beside a sweep of a
    minute or two can be a third off either way."""
    before = vela_seconds(model, config)
    front, seconds, misfits = sweep_front(model, config, trials, pool_flags)
    compiles = sorted([before, vela_seconds(model, config), vela_seconds(model, config)])
    return front, seconds, misfits, compiles[1]


def matched(front: list[tuple[int, float]], row: dict) -> bool:
    return any(s <= row["sram"] and c <= row["cycles"] for s, c in front)


def table(results: list[dict]) -> str:
    lines = [
        "| model | accelerator, memory mode | front | Vela regor matched | Vela legacy matched "
        "| our smallest SRAM (cycles) | Vela smallest SRAM (cycles) | sweep s |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        share = {}
        for core in ("regor", "legacy-python"):
            rows = [v for v in r["vela"] if v["core"] == core]
            hits = sum(matched(r["front"], v) for v in rows)
            share[core] = f"{hits}/{len(rows)}" if rows else "-"
        ours = min(r["front"], default=None)
        theirs = min(((v["sram"], v["cycles"]) for v in r["vela"]), default=None)
        lines.append(
            f"| {r['model']} | {r['config'][0]}, {r['config'][2]} | {len(r['front'])} | "
            f"{share['regor']} | {share['legacy-python']} | "
            f"{_point(ours)} | {_point(theirs)} | {r['seconds']:.0f} |"
        )
    return "\n".join(lines)


def _point(p: tuple[int, float] | None) -> str:
    return f"{format_size(p[0])} ({p[1] / 1e6:.2f} M)" if p else "none fits"


def legacy_misses(results: list[dict], models: dict[str, Path]) -> str:
    """Each unmatched legacy-core point: Vela's own schedule of it scored by our evaluator,
    Vela's figure with the cycles it takes off for weight copies it never counted put back
    (`VelaOpEstimate.dma_credit`), and whether our front beats each; then the legacy points
    matched once those cycles are put back (putting them back only raises Vela's figures)."""
    legacy = [(r, v) for r in results for v in r["vela"] if v["core"] == "legacy-python"]
    lines = []
    recounted = 0
    for r, v in legacy:
        if matched(r["front"], v):
            recounted += 1
            continue
        arena = int(float(v["arena"])) if v["arena"] else None
        replay = vela_scheduled_ops(models[r["model"]], *r["config"], arena, v["optimise"])
        ours = evaluate(replay.ops, replay.memory).total_cycles
        counted = v["cycles"] + sum(e.dma_credit for e in replay.estimates)
        recounted += matched(r["front"], {"sram": v["sram"], "cycles": counted})
        best = min((p for p in r["front"] if p[0] <= v["sram"]), key=lambda p: p[1],
                   default=None)  # fmt: skip
        budget = format_size(arena) if arena else "default"
        lines.append(
            f"- {r['model']} {r['config'][0]}, --optimise {v['optimise']}, arena {budget}: "
            f"Vela {_exact((v['sram'], v['cycles']))}; our best within its SRAM "
            f"{_exact(best)}. Vela's schedule under our evaluator: {ours:,.0f} cycles "
            f"({_beats(r['front'], v['sram'], ours)}). Vela's figure with the "
            f"{counted - v['cycles']:,.0f} cycles it takes off for weight copies it never "
            f"counted put back: {counted:,.0f} ({_beats(r['front'], v['sram'], counted)})."
        )
    if not lines:
        return "Every legacy-core point is matched."
    return (
        "Legacy-core points not matched:\n"
        + "\n".join(lines)
        + f"\n\nWith Vela's uncounted weight-copy cycles put back: {recounted}/{len(legacy)} "
        "legacy-core points matched."
    )


def _beats(front: list[tuple[int, float]], sram: int, cycles: float) -> str:
    hit = matched(front, {"sram": sram, "cycles": cycles})
    return "our front beats it" if hit else "our front does not beat it"


def _exact(p: tuple[int, float] | None) -> str:
    return f"{p[0]:,} B at {p[1]:,.0f} cycles" if p else "none"


def floor_note(results: list[dict]) -> str:
    """MobileNetV2 on U55 Shared_Sram: our floor beside Vela's `--optimise Size` point."""
    for r in results:
        if r["model"] == FLOOR_MODEL and r["config"] == CONFIGS[0]:
            size = [v for v in r["vela"] if v["core"] == "regor" and v["optimise"] == "Size"]
            ours = min(r["front"], default=None)
            vela = min(((v["sram"], v["cycles"]) for v in size), default=None)
            return (
                f"{FLOOR_MODEL}, ethos-u55-256 Shared_Sram: our smallest SRAM that fits is "
                f"{_point(ours)}; Vela's --optimise Size point is {_point(vela)}."
            )
    return ""


def distinct_points(rows: list[dict], core: str) -> list[tuple[int, float]]:
    """A core's distinct (SRAM, cycles) points: many arena sizes give one schedule."""
    return sorted({(v["sram"], v["cycles"]) for v in rows if v["core"] == core})


def architecture_table(results: list[dict]) -> str:
    """Per architecture and configuration: each core's distinct points matched, the floors
    and fastest points side by side, misfit trials, and a trial's cost in Vela compiles."""
    lines = [
        "| model | accelerator, memory mode | front | regor matched | legacy matched "
        "| our floor (cycles) | Vela floor (cycles) | our fastest | Vela fastest "
        "| misfit trials | s per trial | Vela compile s | trial / compile |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        share = {}
        for core in ("regor", "legacy-python"):
            points = distinct_points(r["vela"], core)
            hits = sum(matched(r["front"], {"sram": s, "cycles": c}) for s, c in points)
            share[core] = f"{hits}/{len(points)}" if points else "-"
        vela = [(v["sram"], v["cycles"]) for v in r["vela"]]
        per_trial = r["seconds"] / r["trials"]
        floors = _point(min(r["front"], default=None)), _point(min(vela, default=None))
        lines.append(
            f"| {r['model']} | {r['config'][0]}, {r['config'][2]} | {len(r['front'])} | "
            f"{share['regor']} | {share['legacy-python']} | {floors[0]} | {floors[1]} | "
            f"{_fastest(r['front'])} | {_fastest(vela)} | "
            f"{r['misfits']}/{r['trials']} | {per_trial:.2f} | {r['vela_s']:.2f} | "
            f"{per_trial / r['vela_s']:.2f} |"
        )
    return "\n".join(lines)


def _fastest(points: list[tuple[int, float]]) -> str:
    best = min(points, key=lambda p: (p[1], p[0]), default=None)
    return f"{best[1] / 1e6:.2f} M ({format_size(best[0])})" if best else "none fits"


def architecture_misses(results: list[dict]) -> str:
    """Every distinct Vela point our front does not match, beside our best point within its
    SRAM (what benchmarks/README.md explains)."""
    lines = []
    for r in results:
        for core in ("regor", "legacy-python"):
            for sram, cycles in distinct_points(r["vela"], core):
                if matched(r["front"], {"sram": sram, "cycles": cycles}):
                    continue
                best = min((p for p in r["front"] if p[0] <= sram), key=lambda p: p[1],
                           default=None)  # fmt: skip
                lines.append(
                    f"- {r['model']} {r['config'][0]} {core}: Vela {_exact((sram, cycles))}; "
                    f"our best within its SRAM {_exact(best)}"
                )
    return "\n".join(lines) if lines else "Every distinct Vela point is matched."


def _shared_sweep(model: Path, config: tuple, trials: int) -> dict:
    """A shared model's sweep over the baselines' pool range."""
    flags = ("--sram-min", SRAM_MIN, "--sram-max", "4MiB")
    front, seconds, misfits = sweep_front(model, config, trials, flags)
    return {"front": front, "seconds": seconds, "misfits": misfits}


def _architecture_sweep(model: Path, config: tuple, trials: int) -> dict:
    """An architecture's sweep at default flags, with the Vela compiles timed around it."""
    front, seconds, misfits, vela_s = bracketed_sweep(model, config, trials, ())
    return {"front": front, "seconds": seconds, "misfits": misfits, "vela_s": vela_s}


def _sweeps(
    models: dict[str, Path], baselines: Path, trials: int, sweep: Callable[..., dict]
) -> list:
    results = []
    for name, model in models.items():
        for config in CONFIGS:
            result = {"model": name, "config": config, **sweep(model, config, trials),
                      "trials": trials, "vela": vela_rows(baselines, name, config)}  # fmt: skip
            results.append(result)
            print(f"{name} {config[0]}: {len(result['front'])} front points", file=sys.stderr)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=60)
    parser.add_argument("--models", default=None, help="comma-separated model stems")
    parser.add_argument(
        "--architectures",
        action="store_true",
        help="the project's own architectures (cascader.testing.architectures) at default "
        "flags against benchmarks/vela_architectures_5.2.0.csv, instead of ../shared/models",
    )
    parser.add_argument("-o", "--output", default=None, help="also write the Markdown here")
    args = parser.parse_args(argv)
    wanted = set(args.models.split(",")) if args.models else None
    if args.architectures:
        names = [n for n in ARCHITECTURES if wanted is None or n in wanted]
        results = _sweeps({n: build_cached(n) for n in names}, ARCHITECTURE_BASELINES,
                          args.trials, _architecture_sweep)  # fmt: skip
        text = (
            f"Our front ({args.trials}-trial sweeps at default flags, Vela-model estimate) "
            "against Vela 5.2's dense arena sweeps (benchmarks/vela_architectures_5.2.0.csv): "
            "a distinct Vela point is matched when a front point uses no more SRAM and no "
            "more cycles.\n\n" + architecture_table(results) + "\n\n"
            + architecture_misses(results) + "\n"
        )  # fmt: skip
    else:
        shared = shared_dir()
        if shared is None:
            print("../shared not found", file=sys.stderr)
            return 2
        models = sorted((shared / "models").glob("*.tflite"))
        models = [m for m in models if wanted is None or m.stem in wanted]
        results = _sweeps({m.stem: m for m in models}, shared / "baselines" / "vela_5.2.0.csv",
                          args.trials, _shared_sweep)  # fmt: skip
        text = (
            f"Our front ({args.trials} trials per sweep, Vela-model estimate) against Vela "
            "5.2's points of the same configuration: a Vela point is matched when a front "
            "point uses no more SRAM and no more cycles.\n\n"
            + table(results)
            + "\n\n"
            + floor_note(results)
            + "\n\n"
            + legacy_misses(results, {m.stem: m for m in models})
            + "\n"
        )
    print(text)
    if args.output:
        Path(args.output).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
