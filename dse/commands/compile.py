"""`dse compile`: rebuild one design point's schedule and write the model as the firmware runs
it (`<model>_dse.tflite`, Vela's layout), its NPU command streams, driver payloads, encoded
constants and a manifest (regions, scratch size, I/O addresses, estimate)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from cascader.artifact.build import write_build
from cascader.pipeline import Session
from cascader.point import PointConfig
from dse.commands.estimate import nothing_fits, scored_point
from dse.config import load_config, point_args
from dse.output import check_folder, staged_folder
from dse.sizes import format_size

MARKER = "manifest.json"  # what a folder `dse compile` wrote holds
# Every name `write_build` gives a file (any model's): the only things a rebuild replaces.
OWNED = re.compile(r".+_dse\.tflite|npu[0-9]+\.(cs|payload)|constants\.bin|manifest\.json")


def run(args: argparse.Namespace) -> int:
    if args.config is not None:
        args = point_args(args, load_config(args.config, args.model))
    out = Path(args.output)
    check_folder(out, MARKER, OWNED)  # before the work: a folder it may not replace costs nothing

    def run_compile(session: Session, config: PointConfig):
        return session, *session.compile(config)

    session, result, point, compiled = scored_point(args, args.sram, run_compile)
    if not result.fits:
        raise nothing_fits(result)
    # Built beside `out` and swapped in whole: a failure leaves the previous build as it was.
    with staged_folder(out, MARKER, OWNED) as staging:
        written = write_build(staging, session.model_bytes, Path(args.model).stem, result,
                              point, compiled)  # fmt: skip
    shipped = out / written.name
    schedule = point.schedule
    copies = sum(stream.dma_copies for stream in compiled.functions)
    stripes = sum(stream.stripes for stream in compiled.functions)
    print(
        f"wrote {out}: {len(result.ops)} layers as {stripes} stripes and {copies} DMA copies "
        f"in {len(compiled.functions)} command stream(s), scratch "
        f"{format_size(schedule.scratch_bytes)}, SRAM used "
        f"{format_size(result.sram_used_bytes)}, {result.total_cycles:.0f} cycles; "
        f"firmware model {shipped.name}"
    )
    return 0
