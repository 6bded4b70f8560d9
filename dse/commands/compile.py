"""`dse compile`: rebuild one design point's schedule and write the model as the firmware runs
it (`<model>_dse.tflite`, Vela's layout), its NPU command streams, driver payloads, encoded
constants and a manifest (regions, scratch size, I/O addresses, estimate)."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from cascader.artifact.build import write_build
from cascader.estimate import PointConfig
from cascader.ethosu.vela_compiler import VelaError, compile_model
from cascader.pipeline import Session
from dse.commands.estimate import nothing_fits, scored_point
from dse.config import exported_vela_options, load_config, point_args
from dse.errors import BadInput
from dse.output import check_folder, staged_folder
from dse.sizes import format_size

MARKER = "manifest.json"  # what a folder `dse compile` wrote holds
# Every name `write_build` or a `vela` point's build gives a file (any model's): the only
# things a rebuild replaces.
OWNED = re.compile(r".+_(dse|vela)\.tflite|npu[0-9]+\.(cs|payload)|constants\.bin|manifest\.json")


def run(args: argparse.Namespace) -> int:
    config = load_config(args.config, args.model) if args.config is not None else None
    out = Path(args.output)
    check_folder(out, MARKER, OWNED)  # before the work: a folder it may not replace costs nothing
    if config is not None and config.get("producer") == "vela":
        return _compile_vela(args, config, out)
    if config is not None:
        args = point_args(args, config)

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


def _compile_vela(args: argparse.Namespace, config: dict, out: Path) -> int:
    """A `vela` point: Vela's own compiler with the exported options writes its own
    `<model>_vela.tflite` (the bytes the exported `vela` command writes), with a manifest
    naming that command and Vela's figures."""
    options = exported_vela_options(config)
    model = Path(args.model)
    try:
        compiled = compile_model(model, options)
    except VelaError as error:
        raise BadInput(f"{model}: {error}") from None
    name = f"{model.stem}_vela.tflite"
    manifest = {
        "producer": "vela",
        "model": name,
        "command_line": options.command_line(model, out),
        "sram_used_bytes": compiled.sram_used_bytes,
        "total_cycles": compiled.total_cycles,
        "npu_ops": compiled.npu_ops,
        "cpu_ops": compiled.cpu_ops,
    }
    with staged_folder(out, MARKER, OWNED) as staging:
        (staging / name).write_bytes(compiled.tflite)
        (staging / MARKER).write_text(json.dumps(manifest, indent=2) + "\n")
    print(
        f"wrote {out}: Vela's own schedule ({compiled.npu_ops} NPU operators), SRAM used "
        f"{format_size(compiled.sram_used_bytes)}, {compiled.total_cycles} cycles; firmware "
        f"model {name}"
    )
    return 0
