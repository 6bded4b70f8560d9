"""The long kill run (issue 21): on SQLite and on PostgreSQL, a study of a one-convolution
model, then `dse sweep` and `dse worker` processes (one or both at a time) SIGKILLed at
random moments up to 8 s after they start: while they import, queue tickets, claim them,
evaluate or store. After every kill the study must load with dse's checks and its requested
and queued counts must agree; after every tenth, and at the end, a later `dse worker` must
run the queue to the end. Prints a Markdown table for benchmarks/README.md; exits 1 on any
problem. PostgreSQL needs a server (`--postgres URL`, or DSE_TEST_POSTGRES_URL as .ci/run
sets it; copy its recipe for a throwaway one).

    python benchmarks/kills.py [--kills 20] [--seed 1] [--postgres URL]
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "fuzz"))

from kills import finish, kill_round, new_study, open_tickets, problems  # noqa: E402

from cascader.testing.networks import single_op_model  # noqa: E402

LATER_EVERY = 10


def run_backend(name: str, storage: str, kills: int, rng: random.Random, model: Path) -> dict:
    """`kills` rounds on a new study at `storage`; the figures of the run."""
    study = f"kills-{os.getpid()}-{time.time_ns()}"
    new_study(model, storage, study)
    found, rounds, later = [], [], []
    for index in range(1, kills + 1):
        rounds.append(kill_round(rng, model, storage, study))
        found += [f"after kill {index}: {p}" for p in problems(storage, study)]
        if index % LATER_EVERY == 0 or index == kills:
            code, seconds, err = finish(storage, study)
            later.append(seconds)
            if code != 0:
                found.append(f"later run after kill {index} exited {code}: {err.strip()}")
            elif open_tickets(storage, study):
                found.append(f"later run after kill {index} left tickets open")
        print(f"{name}: kill {index}/{kills}, {len(found)} problems", flush=True)
    return {"name": name, "rounds": rounds, "later": later, "problems": found}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=20, help="per backend")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--postgres", default=os.environ.get("DSE_TEST_POSTGRES_URL"))
    args = parser.parse_args()
    rng = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="kills-"))
    model = work / "conv.tflite"
    model.write_bytes(single_op_model("CONV_2D", stride=2, padding="VALID"))
    backends = {"SQLite": f"sqlite:///{work / 'study.db'}"}
    if args.postgres:
        backends["PostgreSQL"] = args.postgres
    results = [run_backend(n, url, args.kills, rng, model) for n, url in backends.items()]
    print("| backend | kills | of sweeps | of workers | killed after s | trials completed "
          "| later runs (max s) | problems |")  # fmt: skip
    print("|---|---:|---:|---:|---|---:|---|---:|")
    for result in results:
        rounds = result["rounds"]
        sweeps = sum(1 for r in rounds if r.command == "sweep")
        times = [r.after for r in rounds]
        print(
            f"| {result['name']} | {len(rounds)} | {sweeps} | {len(rounds) - sweeps} "
            f"| {min(times):.1f}-{max(times):.1f} | {rounds[-1].completed_after} "
            f"| {len(result['later'])} ({max(result['later']):.1f}) | {len(result['problems'])} |"
        )
    for result in results:
        for problem in result["problems"]:
            print(f"- {result['name']}: {problem}")
    return 1 if any(r["problems"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
