"""Digests of everything a refactor must leave unchanged: the core's proposals on the golden
graphs, each shared model's estimate and built files (command streams, payloads, constants,
`_dse.tflite`, manifest) on U55 and U65 under three option sets, and one seeded sweep's trials
per device. Two runs, before and after a change, must print the same digests.

    python benchmarks/digests.py -o /tmp/before.json      # with the old tree installed
    python benchmarks/digests.py -o /tmp/after.json
    python benchmarks/digests.py compare /tmp/before.json /tmp/after.json

`--only TEXT` runs the cases whose name contains TEXT. The sweeps run `dse sweep` in a
subprocess with `--jobs 1` and a fixed seed, and digest every finished trial's parameters
and values (not its timings).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from cascader.core.options import CascaderOptions
from cascader.testing.shared import shared_dir

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "mobilenet_like_96.tflite"
DEVICES = ("ethos-u55-256", "ethos-u65-256")
# fmt: off
OPTION_SETS = {
    "tvm": CascaderOptions(enable_striping=True),
    "vela": CascaderOptions(cost_model="vela", enable_striping=True, stripe_factors=4),
    "vela-md": CascaderOptions(
        cost_model="vela", enable_striping=True, enable_multi_dimensional_striping=True,
        max_plan_size=6, always_copy_size=4096,
    ),
}
# fmt: on
POOL = 256 * 1024
SWEEP_TRIALS = 24


def _sha(data: bytes | str) -> str:
    raw = data.encode() if isinstance(data, str) else data
    return hashlib.sha256(raw).hexdigest()[:16]


def _golden_cases() -> Iterator[tuple[str, Callable[[], dict]]]:
    from cascader.core import cascade
    from cascader.ethosu.graph_json import load_graph

    shared = shared_dir()
    for path in sorted((shared / "golden").glob("*.json")) if shared else []:

        def run(path: Path = path) -> dict:
            document = load_graph(path)
            result = cascade(document.graph, document.regions, document.home_map,
                             document.options)  # fmt: skip
            data = result.to_json()
            data.pop("seconds", None)  # the run's wall time
            return {"proposals": _sha(json.dumps(data, sort_keys=True))}

        yield f"golden/{path.stem}", run


def _model_cases() -> Iterator[tuple[str, Callable[[], dict]]]:
    from cascader.artifact.build import build_files
    from cascader.estimate import Device, PointConfig
    from cascader.pipeline import Session

    shared = shared_dir()
    models = sorted((shared / "models").glob("*.tflite")) if shared else []
    for model in [EXAMPLE, *models]:
        for accelerator in DEVICES:
            sessions: dict[str, Session] = {}
            for name, options in OPTION_SETS.items():

                def run(model=model, accelerator=accelerator, options=options,
                        sessions=sessions) -> dict:  # fmt: skip
                    if not sessions:
                        sessions["s"] = Session(model, Device(accelerator))
                    session = sessions["s"]
                    config = PointConfig(POOL, options)
                    estimate = session.score(config)
                    if estimate.total_cycles is None:
                        return {"estimate": _sha(json.dumps(estimate.to_json(), sort_keys=True))}
                    estimate, point, compiled = session.compile(config)
                    files = build_files(session.model_bytes, model.stem, estimate, point,
                                        compiled)  # fmt: skip
                    digests = {name: _sha(data) for name, data in sorted(files.items())}
                    return {"cycles": estimate.total_cycles,
                            "sram": estimate.sram_used_bytes, "files": digests}  # fmt: skip

                yield f"model/{model.stem}/{accelerator}/{name}", run


def _sweep_cases() -> Iterator[tuple[str, Callable[[], dict]]]:
    for accelerator in DEVICES:

        def run(accelerator: str = accelerator) -> dict:
            import optuna

            with tempfile.TemporaryDirectory() as folder:
                storage = f"sqlite:///{folder}/study.db"
                subprocess.run(
                    [sys.executable, "-m", "dse", "sweep", "--model", str(EXAMPLE),
                     "--accelerator-config", accelerator, "--trials", str(SWEEP_TRIALS),
                     "--seed", "3", "--jobs", "1", "--storage", storage, "--producers", "cascader",
                     "--out", folder, "--study", "digest"],
                    check=True, capture_output=True,
                )  # fmt: skip
                optuna.logging.set_verbosity(optuna.logging.WARNING)
                study = optuna.load_study(study_name="digest", storage=storage)
                rows = sorted(
                    (json.dumps(t.params, sort_keys=True), t.values)
                    for t in study.trials
                    if t.values is not None
                )
            return {"trials": len(rows), "digest": _sha(json.dumps(rows))}

        yield f"sweep/{accelerator}", run


def measure(only: str | None) -> dict[str, dict]:
    results = {}
    for source in (_golden_cases, _model_cases, _sweep_cases):
        for name, run in source():
            if only and only not in name:
                continue
            results[name] = run()
            print(name, json.dumps(results[name], sort_keys=True), flush=True)
    return results


def compare(before: Path, after: Path) -> int:
    """Compare the cases both files hold (a run with `--only` holds a subset)."""
    old, new = json.loads(before.read_text()), json.loads(after.read_text())
    both = sorted(old.keys() & new.keys())
    changed = [name for name in both if old[name] != new[name]]
    for name in changed:
        print(f"{name}:\n  before {old[name]}\n  after  {new[name]}")
    alone = len(old.keys() ^ new.keys())
    print(f"{len(both) - len(changed)} cases identical, {len(changed)} differ"
          f", {alone} in one file only")  # fmt: skip
    return 1 if changed or not both else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", nargs="?", default="run", choices=("run", "compare"))
    parser.add_argument("files", nargs="*", type=Path, help="compare: before.json after.json")
    parser.add_argument("-o", "--out", type=Path, help="run: write the digests here")
    parser.add_argument("--only", help="run: only the cases whose name contains this")
    args = parser.parse_args()
    if args.command == "compare":
        return compare(*args.files)
    results = measure(args.only)
    if args.out:
        args.out.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
