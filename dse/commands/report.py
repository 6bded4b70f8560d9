"""`dse report`: HTML page, PNG/SVG plots and a Markdown summary of a study."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from dse.output import staged_folder
from dse.plots.front import Budgets
from dse.report import write_report
from dse.study import load_study, open_storage

MARKER = "report.html"
OWNED = re.compile(r"[^/]+\.(html|md|png|svg)")  # the page, the summary and the plots


def run(args: argparse.Namespace) -> int:
    study = load_study(open_storage(args.storage, heartbeat=False), args.study)
    out = Path(args.out)
    budgets = Budgets(tuple(args.budget_sram), tuple(args.budget_cycles))
    # Written beside `out` and swapped in whole (`dse.output.staged_folder`).
    with staged_folder(out, MARKER, OWNED, "--out") as staging:
        files = write_report(study, staging, args.trial, budgets)
    print(f"report of {args.study}: {out / 'report.html'} ({len(files)} files in {out})")
    return 0
