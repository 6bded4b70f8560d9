"""`dse export`: one trial of a study as a versioned config JSON for `dse compile` and builds."""

from __future__ import annotations

import argparse
from pathlib import Path

from dse.config import build_config, pool_within, select_trial, write_config
from dse.sizes import format_size
from dse.study import load_study, open_storage


def run(args: argparse.Namespace) -> int:
    study = load_study(open_storage(args.storage, heartbeat=False, create=False), args.study)
    trial = select_trial(study, args.trial, args.max_sram, args.max_cycles)
    pool = pool_within(study, trial, args.max_sram) if args.max_sram is not None else None
    config = build_config(study, trial, args.storage, pool)
    write_config(config, Path(args.output))
    predicted = config["predicted"]
    print(
        f"trial {trial.number}: pool {format_size(config['sram_pool_bytes'])}, SRAM used "
        f"{format_size(predicted['sram_used_bytes'])}, {predicted['total_cycles']:,} cycles "
        f"-> {args.output}"
    )
    return 0
