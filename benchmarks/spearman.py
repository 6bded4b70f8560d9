"""How well the cascader's own cost ranks its proposals: Spearman's rho between each
proposal's cascader cycles and Vela's performance estimate (the flow's evaluator) of the
scheduled proposal, per shared model and Ethos-U system, under a chosen cost model. Prints
Markdown; `--dump` writes every (cascader, evaluator) pair as JSON for a closer look.

Run: python benchmarks/spearman.py [--cost-model tvm|vela] [--models kws_dscnn ...]
         [--configs u55-256 ...] [--samples N] [--dump pairs.json] [--choices]

Proposals: the distinct proposals (by memory and cycles) of cascader runs at 64 KiB .. 2 MiB
pools, striping on and off, at most `--samples` of them evenly spread in cascader cycles, each
scheduled and scored with the 2 MiB pool's memory system. `--choices` also prints, for each
pool of `CHOICE_POOLS`, the evaluator's cycles of the proposal the cascader chooses.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from scipy.stats import spearmanr
from shared_models import add_model_arguments, model_paths

from cascader.core.options import COST_MODELS, CascaderOptions
from cascader.core.proposal import Proposal
from cascader.ethosu.codegen import generate
from cascader.ethosu.memory import SystemMemory, system_memory
from cascader.ethosu.perf import evaluate
from cascader.ethosu.weights import encoded_size
from cascader.frontend.tflite_import import load_tflite
from cascader.ir.errors import ScheduleError
from cascader.pipeline import PreparedModel, prepare_model
from cascader.schedule.policies import proposal_schedule

CONFIGS = {
    "u55-128": ("ethos-u55-128", "Ethos_U55_High_End_Embedded", "Shared_Sram"),
    "u55-256": ("ethos-u55-256", "Ethos_U55_High_End_Embedded", "Shared_Sram"),
    "u65-256": ("ethos-u65-256", "Ethos_U65_High_End", "Dedicated_Sram"),
}
POOLS = (64 << 10, 128 << 10, 256 << 10, 512 << 10, 1 << 20, 2 << 20)
CHOICE_POOLS = (128 << 10, 256 << 10, 512 << 10, 1 << 20)


@dataclass(frozen=True)
class Pairs:
    """Cascader and evaluator cycles of the sampled proposals, in ascending cascader cycles."""

    cascader: list[int]
    evaluator: list[float]

    @property
    def rho(self) -> float:
        if len(self.cascader) < 3:
            return float("nan")
        return float(spearmanr(self.cascader, self.evaluator).statistic)

    def __str__(self) -> str:
        def spread(values) -> float:
            return max(values) / min(values) - 1 if values and min(values) > 0 else float("nan")

        return (f"{self.rho:.2f} (n={len(self.cascader)}; {spread(self.cascader):.0%} / "
                f"{spread(self.evaluator):.0%})")  # fmt: skip


def _memory(config: tuple[str, str, str], pool: int) -> SystemMemory:
    return system_memory(*config, pool)


def _options(memory: SystemMemory, striping: bool, cost_model: str) -> CascaderOptions:
    return CascaderOptions(
        cascade_region=memory.cascade_area, enable_striping=striping, cost_model=cost_model
    )


def evaluated_cycles(prepared: PreparedModel, proposal: Proposal, memory: SystemMemory) -> float:
    """The evaluator's total cycles of a proposal's stripe schedule."""
    accelerator = memory.accelerator
    schedule = proposal_schedule(
        prepared.network,
        proposal,
        memory,
        encoded_size(accelerator, prepared.network.ops),
        check=False,
    )
    compiled = generate(schedule, accelerator, command_streams=False)
    return evaluate(compiled.scheduled_ops, memory).total_cycles


def proposal_pairs(
    prepared: PreparedModel, config: tuple[str, str, str], cost_model: str, samples: int
) -> Pairs:
    """(cascader, evaluator) cycles over the sampled distinct proposals of every pool."""
    found: dict[tuple[int, int], Proposal] = {}
    for pool in POOLS:
        memory = _memory(config, pool)
        for striping in (True, False):
            try:
                options = _options(memory, striping, cost_model)
                result = prepared.scheduler.proposals(memory, options, pool)
            except ScheduleError:
                continue
            for proposal in result.proposals:
                found.setdefault((proposal.memory_usage, proposal.cycles), proposal)
    ranked = [found[k] for k in sorted(found, key=lambda k: (k[1], k[0]))]
    if len(ranked) > samples:
        ranked = [ranked[round(i * (len(ranked) - 1) / (samples - 1))] for i in range(samples)]
    memory = _memory(config, POOLS[-1])
    return Pairs(
        [p.cycles for p in ranked], [evaluated_cycles(prepared, p, memory) for p in ranked]
    )


def chosen_cycles(
    prepared: PreparedModel, config: tuple[str, str, str], cost_model: str
) -> list[str]:
    """Per pool of CHOICE_POOLS (striping on): the evaluator's cycles of the chosen
    proposal's schedule and the SRAM it uses ("over" when that exceeds the pool), or "-"
    when no schedule was made."""
    cells = []
    for pool in CHOICE_POOLS:
        memory = _memory(config, pool)
        try:
            point = prepared.scheduler.schedule_point(memory, _options(memory, True, cost_model))
        except ScheduleError:
            cells.append("-")
            continue
        compiled = generate(point.schedule, memory.accelerator, command_streams=False)
        cycles = evaluate(compiled.scheduled_ops, memory).total_cycles
        fits = "" if point.fits else " over"
        cells.append(f"{cycles / 1e3:.0f}k ({point.schedule.sram_bytes / 1024:.0f} KiB{fits})")
    return cells


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_model_arguments(parser)
    parser.add_argument("--configs", nargs="*", choices=list(CONFIGS), default=list(CONFIGS))
    parser.add_argument("--cost-model", choices=COST_MODELS, default="tvm")
    parser.add_argument("--samples", type=int, default=40)
    parser.add_argument("--dump", type=Path, help="write the pairs as JSON here")
    parser.add_argument("--choices", action="store_true",
                        help="also score the chosen proposal at each of CHOICE_POOLS")  # fmt: skip
    args = parser.parse_args(argv)
    paths = model_paths(args)
    if paths is None:
        return 2
    cells: dict[tuple[str, str], str] = {}
    choices: list[str] = []
    dump: dict[str, dict] = {}
    for path in paths:
        model = load_tflite(path)
        for label in args.configs:
            config = CONFIGS[label]
            start = time.perf_counter()
            prepared = prepare_model(model, config[0])
            pairs = proposal_pairs(prepared, config, args.cost_model, args.samples)
            cells[path.stem, label] = str(pairs)
            dump[f"{path.stem} {label}"] = {"cascader": pairs.cascader,
                                            "evaluator": pairs.evaluator}  # fmt: skip
            if args.choices:
                row = chosen_cycles(prepared, config, args.cost_model)
                choices.append(f"| {path.stem} | {label} | " + " | ".join(row) + " |")
            print(f"{path.stem} {label}: {pairs} [{time.perf_counter() - start:.0f} s]",
                  file=sys.stderr)  # fmt: skip
    print(f"Spearman's rho, cascader ({args.cost_model} cost model) vs evaluator cycles "
          "(n proposals; spread of cycles, cascader / evaluator)\n")  # fmt: skip
    print("| model | " + " | ".join(args.configs) + " |")
    print("|---|" + "---|" * len(args.configs))
    for path in paths:
        print(f"| {path.stem} | " + " | ".join(cells.get((path.stem, c), "-")
                                               for c in args.configs) + " |")  # fmt: skip
    if choices:
        print("\nEvaluator cycles (SRAM used) of the chosen proposal, striping on, per pool\n")
        print("| model | config | " + " | ".join(f"{p >> 10} KiB" for p in CHOICE_POOLS) + " |")
        print("|---|---|" + "---|" * len(CHOICE_POOLS))
        print("\n".join(choices))
    if args.dump:
        args.dump.write_text(json.dumps(dump, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
