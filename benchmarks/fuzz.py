"""The long fuzz run (issue 21): the seeded cases of `tests/fuzz` (mutated TFLite files under
`estimate` and `sweep`, special files under every file flag, mutated configs under `compile`
and `verify`, hostile flag values, damaged study databases under all four study commands),
compiled files with changed command streams and constants under `simulate`, graph JSON with
extreme numbers and cycles, things this tool did not write in the way of every output), more
of them than CI runs. Cases run in batches, each batch in a fresh process whose peak
resident memory is reported, each case bounded at 60 s (and each batch, as a backstop for a
hang no signal reaches, at 60 s per case). Prints a Markdown table for benchmarks/README.md
and exits 1 when any case broke the promise (a traceback, a hang, an exit code other than
0/2/3, a refusal that is not one line).

    python benchmarks/fuzz.py [--seed 1] [--scale 1.0] [--batch 100] [--json out.json]
        [--categories compiled-stream,graph-json,output-path]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
FUZZ = HERE.parent / "tests" / "fuzz"
sys.path.insert(0, str(FUZZ))

from fuzz_cases import Study, cases, make_study  # noqa: E402
from fuzz_run import CASE_SECONDS, execute, run_case  # noqa: E402

# Cases per category at --scale 1: 2,308 in all; every special file under every file flag,
# every kind of thing in the way of every output (5 x 5) five times over.
COUNTS = {
    "model-estimate": 500,
    "model-sweep": 60,
    "special-file": 153,
    "config": 300,
    "flags": 150,
    "study-db": 120,
    "compiled-stream": 500,
    "graph-json": 400,
    "output-path": 125,
}


def _study(folder: Path) -> Study:
    return Study(folder, folder / "conv.tflite", folder / "cfg.json")


def _counts(scale: float, only: str) -> dict[str, int]:
    chosen = only.split(",") if only else list(COUNTS)
    unknown = sorted(set(chosen) - set(COUNTS))
    if unknown:
        raise SystemExit(f"unknown categories {unknown}; known: {', '.join(COUNTS)}")
    return {name: max(1, round(COUNTS[name] * scale)) for name in chosen}


def run_batch(seed: int, scale: float, only: str, start: int, stop: int, study: Path) -> None:
    """Run cases [start, stop) and print one JSON line per case, then the peak memory."""
    root = Path(tempfile.mkdtemp(prefix="fuzz-batch-"))
    for case in cases(_counts(scale, only), seed, _study(study))[start:stop]:
        outcome = execute(case, root)
        row = {
            "category": case.category,
            "seed": case.seed,
            "what": case.what,
            "code": outcome.code,
            "seconds": round(outcome.seconds, 3),
            "problems": outcome.problems(case.allowed),
        }
        print(json.dumps(row), flush=True)
    print(json.dumps({"peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss << 10}))


def _child(argv: list[str], seconds: float) -> tuple[list[dict], int, bool]:
    """The rows a batch printed, its peak memory, and whether it had to be killed."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        out, _ = proc.communicate(timeout=seconds)
        killed = False
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        killed = True
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    peak = next((r["peak_rss_bytes"] for r in rows if "peak_rss_bytes" in r), 0)
    return [r for r in rows if "category" in r], peak, killed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--scale", type=float, default=1.0, help="cases per category x SCALE")
    parser.add_argument("--batch", type=int, default=100, help="cases per process")
    parser.add_argument("--categories", default="", help="comma-separated (default: all)")
    parser.add_argument("--json", type=Path, help="write every case's outcome here")
    parser.add_argument("--run-batch", nargs=3, metavar=("START", "STOP", "STUDY"))
    parser.add_argument("--make-study", type=Path, metavar="DIR")
    args = parser.parse_args()
    if args.make_study is not None:
        make_study(args.make_study, lambda argv: run_case(argv).code)
        return 0
    if args.run_batch is not None:
        start, stop, study = args.run_batch
        run_batch(args.seed, args.scale, args.categories, int(start), int(stop), Path(study))
        return 0

    began = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="fuzz-run-"))
    me = [sys.executable, str(Path(__file__).resolve()), "--seed", str(args.seed)]
    me += ["--scale", str(args.scale), "--categories", args.categories]
    subprocess.run([*me, "--make-study", str(work / "study")], check=True)
    total = sum(_counts(args.scale, args.categories).values())
    rows: list[dict] = []
    peak, killed_batches = 0, 0
    for start in range(0, total, args.batch):
        stop = min(total, start + args.batch)
        argv = [*me, "--run-batch", str(start), str(stop), str(work / "study")]
        found, batch_peak, killed = _child(argv, CASE_SECONDS * (stop - start) + 120)
        rows += found
        peak = max(peak, batch_peak)
        killed_batches += killed
        print(f"cases {start}-{stop}: {len(found)} ran, peak {batch_peak >> 20} MiB", flush=True)
    missing = total - len(rows)
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=1))
    print(_table(rows, missing, peak, time.monotonic() - began))
    for row in rows:
        if row["problems"]:
            print(f"- {row['category']} seed {row['seed']} ({row['what']}): {row['problems']}")
    return 1 if missing or killed_batches or any(r["problems"] for r in rows) else 0


def _table(rows: list[dict], missing: int, peak: int, seconds: float) -> str:
    by: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        by[row["category"]].append(row)
    lines = [
        "| category | cases | exit 0 | exit 1 | exit 2 | exit 3 | broken | slowest s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name in by:
        found = by[name]
        codes = [r["code"] for r in found]
        broken = sum(1 for r in found if r["problems"])
        slowest = max((r["seconds"] for r in found), default=0.0)
        lines.append(
            f"| {name} | {len(found)} | {codes.count(0)} | {codes.count(1)} | {codes.count(2)} "
            f"| {codes.count(3)} | {broken} | {slowest:.1f} |"
        )
    broken = sum(1 for r in rows if r["problems"])
    lines.append(
        f"\n{len(rows)} cases in {seconds:.0f} s, {broken} broken, {missing} not run; peak "
        f"memory of a batch process {peak / (1 << 30):.2f} GiB"
    )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
