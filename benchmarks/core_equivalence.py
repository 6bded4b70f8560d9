"""Before/after check that a change to the cascader core leaves its results exactly unchanged.

A speed-up of plan or proposal generation must not move any proposal. This script runs the
core on real graphs under the option sets a sweep draws (multi-dimensional striping, several
stripe factors, both cost models, a dual-home U65 system) and writes, per case, every
proposal's memory and cycles, chosen index, and every plan's part group, costs, open and
output configs and all its tensor configs with their full stripe configs. Two such files
must be identical.

    # once, with any tree: build the graphs from the shared models (needs TVM)
    python benchmarks/core_equivalence.py graphs /tmp/eq
    # with the old core first on the path (e.g. a `git worktree` of the previous commit),
    # then with the new one; only cascader.core runs here
    PYTHONPATH=/tmp/old python benchmarks/core_equivalence.py run /tmp/eq -o /tmp/before.json
    python benchmarks/core_equivalence.py run /tmp/eq -o /tmp/after.json
    python benchmarks/core_equivalence.py compare /tmp/before.json /tmp/after.json

`--only TEXT` (graphs, run) limits either step to the cases whose name contains TEXT, e.g.
`--only _vela` for the "vela" cost model's cases.

The graph files hold what graph JSON holds, which is not all the "vela" cost model reads
from a part built by the flow (Vela's full block config list, the weights' encoding): `run
--from-models` (no folder; needs TVM) builds each case's graph through the flow instead,
so the "vela" cases run as a sweep runs them.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from cascader.core import cascade
from cascader.core.graph_json import save_graph
from cascader.core.options import CascaderOptions
from cascader.ethosu.graph_json import load_graph
from cascader.testing.shared import shared_dir

MULTI = {"enable_multi_dimensional_striping": True}
VELA = {"cost_model": "vela"}
U55 = ("ethos-u55-256", "Ethos_U55_High_End_Embedded", "Shared_Sram")
U65 = ("ethos-u65-256", "Ethos_U65_High_End", "Dedicated_Sram")
# name: (model stem, system, cascader options beyond striping on)
CASES: dict[str, tuple[str, tuple[str, str, str], dict]] = {
    "mobilenet_v2_multi_sf5": ("mobilenet_v2_100_224", U55, MULTI),
    "mobilenet_v2_multi_sf2": ("mobilenet_v2_100_224", U55, {**MULTI, "stripe_factors": 2}),
    "mobilenet_v2_multi_sf8": ("mobilenet_v2_100_224", U55, {**MULTI, "stripe_factors": 8}),
    "mobilenet_v2_1d_sf5": ("mobilenet_v2_100_224", U55, {}),
    "mobilenet_v2_multi_sf5_vela": ("mobilenet_v2_100_224", U55, {**MULTI, "cost_model": "vela"}),
    "mobilenet_v2_1d_sf5_vela": ("mobilenet_v2_100_224", U55, {"cost_model": "vela"}),
    "mobilenet_v2_multi_small_plans_no_copy": (
        "mobilenet_v2_100_224",
        U55,
        {**MULTI, "max_plan_size": 4, "always_copy_size": 0},
    ),
    "mobilenet_v2_multi_sf3_no_pareto": (
        "mobilenet_v2_100_224",
        U55,
        {**MULTI, "stripe_factors": 3, "disable_pareto_plans": True},
    ),
    "mobilenet_v2_u65_multi_sf5": ("mobilenet_v2_100_224", U65, MULTI),
    "mobilenet_v2_u65_multi_sf5_vela": ("mobilenet_v2_100_224", U65, {**MULTI, **VELA}),
    "kws_dscnn_multi_sf5": ("kws_dscnn", U55, MULTI),
    "kws_dscnn_multi_sf5_vela": ("kws_dscnn", U55, {**MULTI, **VELA}),
    "kws_dscnn_1d_sf5_vela": ("kws_dscnn", U55, VELA),
    "vww_mobilenet_v1_025_multi_sf5": ("vww_mobilenet_v1_025", U55, MULTI),
    "vww_mobilenet_v1_025_multi_sf5_vela": ("vww_mobilenet_v1_025", U55, {**MULTI, **VELA}),
    "ic_resnet8_multi_sf5": ("ic_resnet8", U55, MULTI),
    "ic_resnet8_multi_sf5_vela": ("ic_resnet8", U55, {**MULTI, "cost_model": "vela"}),
    "ic_resnet8_u65_multi_sf5_vela": ("ic_resnet8", U65, {**MULTI, "cost_model": "vela"}),
    "ad_autoencoder_multi_sf5": ("ad_autoencoder", U55, MULTI),
}
POOL = 1 << 20


def _selected(only: str | None) -> list[str]:
    """The cases whose name contains `only` (all without it)."""
    return [name for name in CASES if only is None or only in name]


def _flow_document(name: str):
    """The case's graph document (graph, regions, homes, options), from the flow."""
    from cascader.ethosu.graph import graph_document
    from cascader.ethosu.memory import system_memory
    from cascader.frontend.tflite_import import load_tflite
    from cascader.pipeline import prepare_model

    model, (accelerator, system, mode), options = CASES[name]
    path = shared_dir() / "models" / f"{model}.tflite"
    prepared = prepare_model(load_tflite(str(path)), accelerator)
    memory = system_memory(accelerator, system, mode, POOL)
    return graph_document(
        prepared.network.graph, memory, CascaderOptions(enable_striping=True, **options)
    )


def build_graphs(folder: Path, only: str | None = None) -> None:
    """One graph document per case, from the flow."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in _selected(only):
        save_graph(_flow_document(name), folder / f"{name}.json")
        print("built", name, flush=True)


def _config(config) -> dict:
    return {**config.to_json(), "stripe_configs": [repr(s) for s in config.stripe_configs]}


def _plan(plan) -> dict:
    return {
        "part_group": plan.part_ids,
        "memory_usage": plan.memory_usage,
        "cycles": plan.cycles,
        "open_configs": [_config(c) for c in plan.open_configs],
        "output_config": _config(plan.output_config),
        "tensor_configs": [_config(c) for c in plan.tensor_configs],
    }


def run_cases(folder: Path | None, only: str | None = None) -> dict:
    """Per case: its seconds and every proposal in full; the graphs from `folder`, or
    from the flow without one."""
    results = {}
    for name in _selected(only):
        path = None if folder is None else folder / f"{name}.json"
        document = _flow_document(name) if path is None else load_graph(path)
        start = time.perf_counter()
        result = cascade(document.graph, document.regions, document.home_map, document.options)
        seconds = time.perf_counter() - start
        results[name] = {
            "seconds": seconds,
            "chosen_index": result.chosen_index,
            "proposals": [
                {
                    "memory_usage": p.memory_usage,
                    "cycles": p.cycles,
                    "plans": [_plan(plan) for plan in p.plans],
                    "input_configs": {str(k): _config(v) for k, v in p.input_configs.items()},
                }
                for p in result.proposals
            ],
        }
        print(f"{name}: {seconds:.3f} s, {len(result.proposals)} proposals", flush=True)
    return results


def compare(before: dict, after: dict) -> int:
    """Number of cases whose proposals differ (seconds aside)."""
    differ = 0
    for name in sorted(set(before) | set(after)):
        old, new = before.get(name), after.get(name)
        same = old is not None and new is not None
        if same:
            same = {k: v for k, v in old.items() if k != "seconds"} == {
                k: v for k, v in new.items() if k != "seconds"
            }
        differ += not same
        times = f"{old['seconds']:.3f} s -> {new['seconds']:.3f} s" if old and new else ""
        print(f"{name}: {'same' if same else 'DIFFERENT'} {times}")
    return differ


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    graphs = commands.add_parser("graphs", help="build the case graphs (needs TVM)")
    graphs.add_argument("folder", type=Path)
    graphs.add_argument("--only", help="just the cases whose name contains this")
    run = commands.add_parser("run", help="run the core on the case graphs")
    run.add_argument("folder", type=Path, nargs="?")
    run.add_argument(
        "--from-models", action="store_true", help="build the graphs through the flow instead"
    )
    run.add_argument("-o", "--output", type=Path, required=True)
    run.add_argument("--only", help="just the cases whose name contains this")
    check = commands.add_parser("compare", help="compare two runs")
    check.add_argument("before", type=Path)
    check.add_argument("after", type=Path)
    args = parser.parse_args()
    if args.command == "graphs":
        build_graphs(args.folder, args.only)
    elif args.command == "run":
        if (args.folder is None) != args.from_models:
            parser.error("run needs a graph folder or --from-models, not both")
        args.output.write_text(json.dumps(run_cases(args.folder, args.only)))
    else:
        before = json.loads(args.before.read_text())
        return 1 if compare(before, json.loads(args.after.read_text())) else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
