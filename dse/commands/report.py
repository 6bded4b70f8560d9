"""`dse report`: HTML page, PNG/SVG plots and a Markdown summary of a study."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from dse.errors import BadInput
from dse.last_sweep import pick_study, storage_of
from dse.output import staged_folder
from dse.plots.front import Budgets
from dse.report import write_report
from dse.study import load_study, open_storage
from dse.workload import workload_studies
from dse.workload_report import write_workload_report

MARKER = "report.html"
OWNED = re.compile(r"[^/]+\.(html|md|png|svg)")  # the page, the summary and the plots


def run(args: argparse.Namespace) -> int:
    storage = open_storage(storage_of(args), heartbeat=False, create=False)
    pick_study(args, storage)
    if args.workload is not None:
        return _workload(args, storage)
    if args.max_sram is not None:
        raise BadInput("--max-sram is for a workload's report (--workload NAME)")
    study = load_study(storage, args.study)
    out = Path(args.out or f"dse-out/report-{args.study}")
    budgets = Budgets(tuple(args.budget_sram), tuple(args.budget_cycles))
    # Written beside `out` and swapped in whole (`dse.output.staged_folder`).
    with staged_folder(out, MARKER, OWNED, "--out") as staging:
        files = write_report(study, staging, args.trial, budgets)
    print(f"report of {args.study}: {out / 'report.html'} ({len(files)} files in {out})")
    return 0


def _workload(args: argparse.Namespace, storage) -> int:
    if args.trial is not None or args.budget_sram or args.budget_cycles:
        raise BadInput(
            "--trial and --budget-* are for one study's report; a workload's budgets are its own"
        )
    studies = workload_studies(storage, args.workload)
    out = Path(args.out or f"dse-out/report-{args.workload}")
    with staged_folder(out, MARKER, OWNED, "--out") as staging:
        files = write_workload_report(args.workload, studies, staging, args.max_sram)
    print(f"report of workload {args.workload}: {out / 'report.html'} ({len(files)} files)")
    return 0
