"""`dse report`: HTML page, PNG/SVG plots and a Markdown summary of a study."""

from __future__ import annotations

import argparse
from pathlib import Path

from dse.report import write_report
from dse.study import load_study, open_storage


def run(args: argparse.Namespace) -> int:
    study = load_study(open_storage(args.storage, heartbeat=False), args.study)
    out = Path(args.out)
    files = write_report(study, out, args.trial)
    print(f"report of {args.study}: {out / 'report.html'} ({len(files)} files in {out})")
    return 0
