"""Fidelity of the whole flow against Vela: our layer-by-layer schedule of each shared model
(cascader off, every activation in SRAM) scored by the evaluator, against Vela's legacy-core
compile of the same model and system; and, over all proposals the cascader makes for a model,
the rank correlation between the cascader's own cycle estimate and the evaluator's cycles for
the scheduled proposal. Prints Markdown.

Run: python benchmarks/fidelity_flow.py [--models kws_dscnn ...] [--top N] [--samples N]

Per network and configuration: ours / Vela total cycles, and how many conv2d/depthwise layers
are within 25% of Vela's per-op estimate (layers matched in order by kind and MAC count; Vela
ops it fused or split have no match and are not counted). Spearman's rho per model and
configuration is over the proposals of cascader runs at 64 KiB .. 2 MiB pools, striping on
and off.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass

from scipy.stats import spearmanr
from shared_models import add_model_arguments, model_paths

from cascader.core.options import CascaderOptions
from cascader.ethosu.codegen import generate
from cascader.ethosu.memory import system_memory
from cascader.ethosu.npu_op import NpuOpDescription
from cascader.ethosu.perf import PerfReport, evaluate
from cascader.ethosu.vela_baseline import VelaError
from cascader.ethosu.vela_schedule import VelaSchedule, vela_scheduled_ops
from cascader.ethosu.weights import encoded_size
from cascader.frontend.tflite_import import load_tflite
from cascader.ir.errors import ScheduleError
from cascader.pipeline import PreparedModel, prepare_model
from cascader.schedule.policies import layer_by_layer_schedule, proposal_schedule

CONFIGS = {
    "u55-128 Shared_Sram": ("ethos-u55-128", "Ethos_U55_High_End_Embedded", "Shared_Sram"),
    "u55-256 Shared_Sram": ("ethos-u55-256", "Ethos_U55_High_End_Embedded", "Shared_Sram"),
    "u65-256 Dedicated_Sram": ("ethos-u65-256", "Ethos_U65_High_End", "Dedicated_Sram"),
}
LAYER_KINDS = ("conv2d", "depthwise")
LAYER_TOLERANCE = 0.25
ALL_IN_SRAM = 16 << 20  # a pool every shared model's layer-by-layer schedule fits
POOLS = (64 << 10, 128 << 10, 256 << 10, 512 << 10, 1 << 20, 2 << 20)


def layer_by_layer(prepared: PreparedModel, accelerator: str, system: str, mode: str) -> PerfReport:
    """Our copy-constants schedule with every intermediate feature map in SRAM (graph inputs
    and outputs stay in the arena, in DRAM on a Dedicated_Sram system, as Vela keeps them)."""
    memory = system_memory(accelerator, system, mode, ALL_IN_SRAM)
    schedule = layer_by_layer_schedule(
        prepared.network,
        memory,
        encoded_size(accelerator, prepared.network.ops),
        feature_maps="cascade",
    )
    return evaluate(generate(schedule, accelerator, command_streams=False).scheduled_ops, memory)


def _vela_kinds(schedule: VelaSchedule) -> list[str]:
    return [NpuOpDescription.from_npu_op(op.stripes[0]).kind for op in schedule.ops]


def layer_matches(schedule: VelaSchedule, report: PerfReport) -> list[tuple[str, float, float]]:
    """(kind, our cycles, Vela cycles) of conv2d/depthwise layers, paired in order by kind and
    MAC count."""
    ours = [op for op in report.ops if op.kind in LAYER_KINDS]
    pairs = []
    start = 0
    for kind, vela in zip(_vela_kinds(schedule), schedule.estimates, strict=True):
        if kind not in LAYER_KINDS:
            continue
        for index in range(start, len(ours)):
            if ours[index].kind == kind and ours[index].macs == vela.macs:
                pairs.append((kind, ours[index].total_cycles, vela.total_cycles))
                start = index + 1
                break
    return pairs


@dataclass(frozen=True)
class Correlation:
    """Spearman's rho over `count` proposals, and how far apart the proposals are for each
    side (largest / smallest cycles - 1): a rho over near-ties (a spread of a few percent)
    ranks noise, not schedules."""

    rho: float
    count: int
    cascader_spread: float
    evaluator_spread: float

    def __str__(self) -> str:
        return (f"{self.rho:.3f} (n={self.count}; spread {self.cascader_spread:.0%} / "
                f"{self.evaluator_spread:.0%})")  # fmt: skip


def _spread(values: list[float]) -> float:
    return max(values) / min(values) - 1 if values and min(values) > 0 else float("nan")


def proposal_correlation(prepared: PreparedModel, accelerator: str, system: str, mode: str,
                         samples: int) -> Correlation:  # fmt: skip
    """Spearman's rho between the cascader's cycles and the evaluator's for the scheduled
    proposal, over the distinct proposals of cascader runs at several pool sizes, striping on
    and off (one run only keeps a Pareto front, often a handful), at most `samples` of them
    evenly spread in cascader cycles."""
    found: dict[tuple[int, int], object] = {}
    for pool in POOLS:
        memory = system_memory(accelerator, system, mode, pool)
        for striping in (True, False):
            try:
                options = CascaderOptions(enable_striping=striping)
                point = prepared.scheduler.schedule_point(memory, options)
            except ScheduleError:
                continue
            for proposal in point.cascade.proposals:
                found.setdefault((proposal.memory_usage, proposal.cycles), proposal)
    ranked = [found[k] for k in sorted(found, key=lambda k: (k[1], k[0]))]
    if len(ranked) > samples:
        ranked = [ranked[round(i * (len(ranked) - 1) / (samples - 1))] for i in range(samples)]
    memory = system_memory(accelerator, system, mode, POOLS[-1])
    sizer = encoded_size(accelerator, prepared.network.ops)
    ours, theirs = [], []
    for proposal in ranked:
        schedule = proposal_schedule(prepared.network, proposal, memory, sizer, check=False)
        compiled = generate(schedule, accelerator, command_streams=False)
        ours.append(evaluate(compiled.scheduled_ops, memory).total_cycles)
        theirs.append(proposal.cycles)
    rho = float(spearmanr(theirs, ours).statistic) if len(ours) >= 3 else float("nan")
    return Correlation(rho, len(ours), _spread(theirs), _spread(ours))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_model_arguments(parser)
    parser.add_argument("--top", type=int, default=0, help="list the N worst layers per run")
    parser.add_argument("--samples", type=int, default=40,
                        help="proposals scheduled per model for the correlation")  # fmt: skip
    args = parser.parse_args(argv)
    paths = model_paths(args)
    if paths is None:
        return 2
    totals: dict[tuple[str, str], str] = {}
    rhos: dict[tuple[str, str], str] = {}
    details: list[str] = []
    for path in paths:
        model = load_tflite(path)
        for label, config in CONFIGS.items():
            start = time.perf_counter()
            prepared = prepare_model(model, config[0])
            report = layer_by_layer(prepared, *config)
            try:
                vela = vela_scheduled_ops(path, *config)
            except VelaError as exc:
                totals[path.stem, label] = f"vela failed: {exc}"
                continue
            pairs = layer_matches(vela, report)
            within = sum(abs(o - v) <= LAYER_TOLERANCE * v for _, o, v in pairs)
            ratio = report.total_cycles / vela.vela.cycles_total
            totals[path.stem, label] = (
                f"{ratio:.3f} ({report.total_cycles / 1e3:.0f}k / "
                f"{vela.vela.cycles_total / 1e3:.0f}k; {within}/{len(pairs)})"
            )
            rhos[path.stem, label] = str(proposal_correlation(prepared, *config, args.samples))
            print(f"{path.stem} {label}: {totals[path.stem, label]}, rho {rhos[path.stem, label]}"
                  f" [{time.perf_counter() - start:.0f} s]", file=sys.stderr)  # fmt: skip
            if args.top:
                worst = sorted(pairs, key=lambda p: -abs(p[1] - p[2]) / p[2])[: args.top]
                details.append(f"- {path.stem}, {label}: " + "; ".join(
                    f"{k} {o:.0f} vs {v:.0f}" for k, o, v in worst))  # fmt: skip
    labels = list(CONFIGS)
    print(
        "Ours (layer by layer, activations in SRAM) / Vela legacy total cycles (conv2d and "
        f"depthwise layers within {LAYER_TOLERANCE:.0%} of Vela's per-op estimate)\n"
    )
    print("| model | " + " | ".join(labels) + " |")
    print("|---|" + "---|" * len(labels))
    for path in paths:
        print(f"| {path.stem} | " + " | ".join(totals.get((path.stem, lb), "-") for lb in labels)
              + " |")  # fmt: skip
    print("\nSpearman's rho, cascader cycles vs evaluator cycles over the proposals of "
          "cascader runs at 64 KiB..2 MiB pools, striping on and off (spread: largest / "
          "smallest cycles - 1, cascader / evaluator)\n")  # fmt: skip
    print("| model | " + " | ".join(labels) + " |")
    print("|---|" + "---|" * len(labels))
    for path in paths:
        print(f"| {path.stem} | " + " | ".join(rhos.get((path.stem, lb), "-") for lb in labels)
              + " |")  # fmt: skip
    if details:
        print("\nLargest per-layer differences (ours vs Vela cycles):\n")
        print("\n".join(details))
    return 0


if __name__ == "__main__":
    sys.exit(main())
