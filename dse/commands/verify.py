"""`dse verify`: run random inputs through litert on the model, the unscheduled integer
reference, the point's stripe schedule and the point's command streams on the simulator (as
`<model>_dse.tflite`; operators left on the host run through litert in all of them), and
report the largest differences per output. Exit 0 when the schedule and the command streams
equal the reference, the simulator finds nothing and the reference is within one step of
litert; 1 otherwise, with one line on stderr saying which output and by how much (the JSON
or table is printed either way), or when the schedule cannot run. A config of Vela's own point
is verified as `dse simulate` checks a file: Vela's `_vela.tflite` on the simulator against
litert."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from cascader.artifact.run import firmware_runner
from cascader.estimate import PointConfig
from cascader.ethosu.vela_compiler import VelaError, compile_model
from cascader.frontend.tflite_import import load_tflite
from cascader.pipeline import Session
from cascader.reference.run import ReferenceError
from cascader.reference.striped import StripeError
from cascader.verify.point_check import Verification, verify_point
from dse.commands.estimate import scored_point
from dse.commands.simulate import check_and_report
from dse.config import exported_vela_options, load_config, point_args
from dse.constant_outputs import warn_constant
from dse.errors import BadInput, NothingFits
from dse.sizes import format_size


def _table(model: str, result: Verification) -> str:
    data = result.to_json()
    schedule = data["schedule"]
    host = data["host_ops"]
    lines = [
        f"{model}: {data['samples']} random sample(s), "
        f"{'cascaded' if schedule['cascaded'] else 'copy-constants'} schedule "
        + f"of {schedule['stripes']} stripes"
        + f", SRAM used {format_size(schedule['sram_used_bytes'])}",
        f"{data['npu_functions']} NPU function(s); host ops on litert: "
        f"{', '.join(host) if host else 'none'}; litert kernels: {data['litert_kernels']} "
        f"(tolerance {data['litert_tolerance']})",
    ]
    lines.append(
        f"{'output':<8} {'shape':<20} {'schedule vs reference':>22} "
        f"{'command stream vs ref':>22} {'reference vs litert':>20} {'exact':>7} "
        f"{'distinct':>9}"
    )
    for out in data["outputs"]:
        ours, theirs = out["schedule_vs_reference"], out["reference_vs_litert"]
        streamed = out.get("command_stream_vs_reference", {}).get("max_abs_diff", "-")
        lines.append(
            f"{out['index']:<8} {tuple(out['shape'])!s:<20} {ours['max_abs_diff']:>22} "
            f"{streamed:>22} {theirs['max_abs_diff']:>20} {theirs['exact']:>7.1%} "
            f"{ours['distinct']:>9}"
        )
    if data["findings"]:
        lines.append("simulator findings: " + "; ".join(data["findings"]))
    seconds = data["seconds"]
    lines.append("seconds: " + ", ".join(f"{k} {v:.2f}" for k, v in seconds.items()))
    return "\n".join(lines)


def _verify_vela(args: argparse.Namespace, config: dict) -> int:
    """A `vela` point: Vela's compiler builds its `_vela.tflite` (as `dse compile` does) and
    the simulator runs it against LiteRT, as `dse simulate` would; there is no schedule of
    ours to check against the reference."""
    model = Path(args.model)
    try:
        compiled = compile_model(model, exported_vela_options(config))
    except VelaError as error:
        raise BadInput(f"{model}: {error}") from None
    system = {key: config.get(key) for key in ("system_config", "memory_mode", "vela_config")}
    return check_and_report("dse verify", f"{model.stem}_vela.tflite (Vela's own schedule)",
                            compiled.tflite, args.model, load_tflite(model),
                            argparse.Namespace(**{**vars(args), **system}))  # fmt: skip


def run(args: argparse.Namespace) -> int:
    if args.config is not None:  # the exported point, checked against the model's sha256
        config = load_config(args.config, args.model)
        if config.get("producer") == "vela":
            return _verify_vela(args, config)
        args = point_args(args, config)

    def run_verify(session: Session, config: PointConfig) -> Verification:
        compiled = firmware_runner(session, config)
        return verify_point(session, config, args.samples, compiled=compiled)

    sram = args.sram
    try:
        result = scored_point(args, sram, run_verify)
    except ReferenceError as error:
        raise BadInput(f"{args.model}: {error}") from None
    except StripeError as error:  # a bug in the schedule or the propagators, not the input
        print(f"dse verify: {args.model}: the schedule cannot run as written: {error}",
              file=sys.stderr)  # fmt: skip
        return 1
    if not result.point.fits:
        raise NothingFits(
            f"nothing fits in {sram} bytes; the smallest schedule needs "
            f"{result.point.schedule.sram_bytes} bytes"
        )
    print(json.dumps(result.to_json()) if args.json else _table(args.model, result))
    checked = [out.schedule_vs_reference for out in result.outputs]
    warn_constant("dse verify", args.model, checked, result.samples)
    problem = _problem(result)
    if problem:
        print(f"dse verify: {args.model}: {problem}", file=sys.stderr)
        return 1
    return 0


def _problem(result: Verification) -> str:
    """The first thing that fails the check, in one line ('' when it passes): the schedule
    or the command streams computing other values than the reference, a simulator finding,
    or the reference further than one step from LiteRT."""
    for out in result.outputs:
        for what, stats, limit in (
            ("the schedule", out.schedule_vs_reference, 0),
            ("the command streams", out.command_stream_vs_reference, 0),
        ):
            if stats is not None and stats.max_abs_diff > limit:
                return (
                    f"output {out.index}: {what} differ from the reference by up to "
                    f"{stats.max_abs_diff} ({stats.exact:.1%} of elements equal)"
                )
    if result.findings:
        return f"the simulator found: {result.findings[0]}"
    for out in result.outputs:
        stats = out.reference_vs_litert
        if stats.max_abs_diff > result.litert_tolerance:
            return (
                f"output {out.index}: the reference is {stats.max_abs_diff} steps from LiteRT "
                f"({result.litert_kernels} kernels, tolerance {result.litert_tolerance}; "
                f"{stats.off_by_one:.1%} off by one, "
                f"{stats.more:.1%} by more)"
            )
    return ""
