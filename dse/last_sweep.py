"""What `dse report` and `dse export` take when `--storage` or `--study` is left out: the
default sweep's folder (`dse sweep`'s `--out`, dse-out) and its only study or workload, so
the commands a sweep prints work without typing its database URL."""

from __future__ import annotations

import argparse
from pathlib import Path

import optuna

from dse.errors import BadInput
from dse.study import default_storage
from dse.workload import WORKLOAD_ATTR

DEFAULT_OUT = Path("dse-out")


def storage_of(args: argparse.Namespace) -> str:
    """`--storage`, else the default sweep folder's study.db when there is one."""
    if args.storage is not None:
        return args.storage
    if not (DEFAULT_OUT / "study.db").is_file():
        raise BadInput(
            f"no {DEFAULT_OUT}/study.db here: give --storage URL (the one `dse sweep` printed)"
        )
    return default_storage(DEFAULT_OUT)


def pick_study(args: argparse.Namespace, storage) -> None:
    """Fill in `args.study` or `args.workload` when neither is given: the storage's only
    workload, else its only study."""
    if args.study is not None or args.workload is not None:
        return
    summaries = optuna.get_all_study_summaries(storage, include_best_trial=False)
    workloads = sorted(
        {s.user_attrs[WORKLOAD_ATTR]["name"] for s in summaries if WORKLOAD_ATTR in s.user_attrs}
    )
    alone = sorted(s.study_name for s in summaries if WORKLOAD_ATTR not in s.user_attrs)
    if len(workloads) + len(alone) == 1:
        args.workload, args.study = (workloads[0], None) if workloads else (None, alone[0])
        return
    names = [*(f"--workload {w}" for w in workloads), *(f"--study {s}" for s in alone)]
    listed = ", ".join(names[:6]) + (", ..." if len(names) > 6 else "")
    raise BadInput(
        f"the storage holds {len(names)} studies and workloads; name one: {listed}"
        if names
        else "the storage holds no study yet; run `dse sweep` first"
    )
