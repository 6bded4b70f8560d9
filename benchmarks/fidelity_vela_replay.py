"""Fidelity of our evaluator on Vela's own schedules: compile each shared model with Vela's legacy
core, replay its command stream through `cascader.ethosu.perf.evaluate`, and compare with the
cycles Vela reports. Prints Markdown.

Run: python benchmarks/fidelity_vela_replay.py [--models kws_dscnn ...] [--top N]
         [--arena-cache-size BYTES]

Per network and configuration: ours / Vela total cycles, and how many conv2d/depthwise layers
are within 25% of Vela's per-op estimate. A second table splits the difference (as % of Vela's
total) by the kind of op it comes from, since the evaluator and Vela agree on cost rules but
not on granularity:
- cascaded: ops in a Vela cascade (run in stripes interleaved with their neighbours'). Vela
  costs them whole; we cost each stripe as the hardware runs it;
- sliced: other ops Vela emits as several stripes (OFM-depth slices of streamed weights).
  Both cost the compute of such an op whole, as Vela's estimate does (one IFM read, though
  the hardware re-reads it per slice), and charge each slice's weight DMA; how much of the
  copies hides depends on the previous op's cycles, as for dma;
- dma: single-stripe ops whose weights or lookup table are DMA-copied; how much of a copy
  hides under the previous op depends on that op's cycles, which Vela takes from its
  scheduler's estimate and we take from the evaluated schedule;
- other: every other op (the same cost rules on the same inputs: should be 0).
"""

from __future__ import annotations

import argparse
import sys

from shared_models import add_model_arguments, model_paths

from cascader.ethosu.perf import PerfReport, evaluate
from cascader.ethosu.vela_baseline import VelaError
from cascader.ethosu.vela_schedule import VelaSchedule, vela_scheduled_ops

CONFIGS = {
    "u55-128 Shared_Sram": ("ethos-u55-128", "Ethos_U55_High_End_Embedded", "Shared_Sram"),
    "u55-256 Shared_Sram": ("ethos-u55-256", "Ethos_U55_High_End_Embedded", "Shared_Sram"),
    "u65-256 Dedicated_Sram": ("ethos-u65-256", "Ethos_U65_High_End", "Dedicated_Sram"),
}
LAYER_KINDS = ("conv2d", "depthwise")
LAYER_TOLERANCE = 0.25
CATEGORIES = ("cascaded", "sliced", "dma", "other")


def _category(schedule: VelaSchedule, index: int) -> str:
    op = schedule.ops[index]
    if schedule.estimates[index].cascade:
        return "cascaded"
    if len(op.stripes) > 1:
        return "sliced"
    if op.weight_source_area is not None or op.lut_bytes:
        return "dma"
    return "other"


def _compare(schedule: VelaSchedule, report: PerfReport) -> dict:
    vela_total = schedule.vela.cycles_total
    delta = dict.fromkeys(CATEGORIES, 0.0)
    layers = within = 0
    for index, (ours, vela) in enumerate(zip(report.ops, schedule.estimates, strict=True)):
        delta[_category(schedule, index)] += ours.total_cycles - vela.total_cycles
        if ours.kind in LAYER_KINDS:
            layers += 1
            within += abs(ours.total_cycles - vela.total_cycles) <= (
                LAYER_TOLERANCE * vela.total_cycles
            )
    return {
        "ratio": report.total_cycles / vela_total,
        "layers": layers,
        "within": within,
        "delta_pct": {c: 100.0 * d / vela_total for c, d in delta.items()},
    }


def _top_ops(schedule: VelaSchedule, report: PerfReport, count: int) -> list[str]:
    rows = sorted(
        zip(schedule.ops, report.ops, schedule.estimates, strict=True),
        key=lambda row: -abs(row[1].total_cycles - row[2].total_cycles),
    )
    lines = []
    for op, ours, vela in rows[:count]:
        delta = ours.total_cycles - vela.total_cycles
        lines.append(
            f"  - {op.name[-60:]} ({ours.kind}, {ours.stripes} stripes): "
            f"{ours.total_cycles:.0f} vs {vela.total_cycles:.0f} cycles ({delta:+.0f}); "
            f"NPU {ours.npu_cycles:.0f} vs {vela.npu_cycles:.0f}, "
            f"bound by {_bound(ours.npu_cycles, ours.access_cycles)} vs "
            f"{_bound(vela.npu_cycles, vela.access_cycles)}"
        )
    return lines


def _bound(npu: float, access: dict[str, float]) -> str:
    area, cycles = max(access.items(), key=lambda item: item[1])
    return "npu" if npu >= cycles else area


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_model_arguments(parser)
    parser.add_argument("--top", type=int, default=0,
                        help="also list the N ops with the largest cycle difference")  # fmt: skip
    parser.add_argument("--arena-cache-size", type=int, default=None,
                        help="Vela's arena cache size in bytes (default: its own)")  # fmt: skip
    args = parser.parse_args(argv)
    paths = model_paths(args)
    if paths is None:
        return 2

    results: dict[tuple[str, str], dict] = {}
    details: list[str] = []
    for path in paths:
        for label, config in CONFIGS.items():
            try:
                schedule = vela_scheduled_ops(path, *config, args.arena_cache_size)
            except VelaError as exc:
                results[path.stem, label] = {"failed": str(exc)}
                continue
            report = evaluate(schedule.ops, schedule.memory)
            results[path.stem, label] = _compare(schedule, report)
            if args.top:
                details.append(f"- {path.stem}, {label}:")
                details += _top_ops(schedule, report, args.top)

    labels = list(CONFIGS)
    arena = f", arena cache {args.arena_cache_size} B" if args.arena_cache_size else ""
    print(f"Ours / Vela legacy total cycles{arena} (conv2d+depthwise layers within "
          f"{LAYER_TOLERANCE:.0%} of Vela's per-op estimate)\n")  # fmt: skip
    print("| model | " + " | ".join(labels) + " |")
    print("|---|" + "---|" * len(labels))
    for path in paths:
        cells = [
            f"{r['ratio']:.3f} ({r['within']}/{r['layers']})" if "ratio" in r else "vela failed"
            for r in (results[path.stem, label] for label in labels)
        ]
        print(f"| {path.stem} | " + " | ".join(cells) + " |")
    print(f"\nDifference by op category, % of Vela's total cycles ({' / '.join(CATEGORIES)})\n")
    print("| model | " + " | ".join(labels) + " |")
    print("|---|" + "---|" * len(labels))
    for path in paths:
        cells = [
            " / ".join(f"{r['delta_pct'][c]:+.1f}" for c in CATEGORIES) if "ratio" in r else "-"
            for r in (results[path.stem, label] for label in labels)
        ]
        print(f"| {path.stem} | " + " | ".join(cells) + " |")
    if details:
        print("\nLargest per-op differences (ours vs Vela):\n")
        print("\n".join(details))
    return 0


if __name__ == "__main__":
    sys.exit(main())
