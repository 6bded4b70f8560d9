"""`dse simulate`: run a Vela-format .tflite (`dse compile`'s `<model>_dse.tflite`, or Vela's
own `<model>_vela.tflite`) as a firmware build would, its `ethos-u` operators' command streams
on the Ethos-U simulator and its other operators on LiteRT, and compare it with LiteRT on the
original model. Exit 0 when every output is within one step of LiteRT and the simulator
finds nothing, 1 otherwise (with one line on stderr), 2 for bad input.

It also times the command streams (`cascader.timing`): the cycles they take when each
command costs what Vela's per-operation formulas say and DMA overlaps compute only where the
stream's waits allow, on the system config and memory mode given (the accelerator is the
file's)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import tflite

from cascader.artifact.run import NotTheSameModel, SimulationCheck, check_against_litert
from cascader.ethosu.errors import DeviceConfigError
from cascader.ethosu.vela_arch import DEFAULT_VELA_INI
from cascader.frontend.errors import ModelError
from cascader.frontend.tflite_check import parse_tflite, read_model
from cascader.frontend.tflite_import import load_tflite
from cascader.simulator import SimulationError
from cascader.timing import TimedStream, TimingError, time_model
from dse.constant_outputs import warn_constant
from dse.errors import BadInput


def _read(path: str) -> bytes:
    try:
        data = read_model(path)
        parse_tflite(data, path)
    except ModelError as error:
        raise BadInput(str(error)) from None
    return data


def _compiled(model: bytes) -> bool:
    """Whether the model has an `ethos-u` operator (a file dse or Vela compiled)."""
    tree = tflite.Model.GetRootAsModel(model, 0)
    codes = (tree.OperatorCodes(i) for i in range(tree.OperatorCodesLength()))
    return any(code.CustomCode() == b"ethos-u" for code in codes)


def _timed(compiled: bytes, args: argparse.Namespace) -> TimedStream | str:
    """The streams' timed cycles on `args`' system config and memory mode, or why a command
    cannot be timed (part of the answer, not an error: stderr keeps its one line for the
    verdict)."""
    config_path = Path(args.vela_config) if args.vela_config else DEFAULT_VELA_INI
    try:
        return time_model(compiled, args.system_config, args.memory_mode, config_path)
    except DeviceConfigError as error:
        raise BadInput(str(error)) from None
    except TimingError as error:
        return str(error)


def _timed_line(timed: TimedStream | str) -> str:
    if isinstance(timed, str):
        return f"timed cycles: not timed ({timed})"
    return (
        f"timed cycles: {timed.cycles:,.0f} (kernel engine busy {timed.busy(True):,.0f}, "
        f"DMA busy {timed.busy(False):,.0f})"
    )


def _table(result: SimulationCheck) -> str:
    lines = [
        f"{result.samples} random sample(s), {result.ethos_u_ops} ethos-u operator(s), "
        f"{result.npu_ops} NPU operations, {result.seconds:.2f} s; LiteRT's "
        f"{result.litert_kernels} kernels, tolerance {result.litert_tolerance}",
        f"{'output':<8} {'simulated vs litert':>20} {'exact':>8} {'off by one':>11} "
        f"{'distinct':>9}",
    ]
    for out in result.outputs:
        lines.append(
            f"{out.output:<8} {out.max_abs_diff:>20} {out.exact:>8.1%} {out.off_by_one:>11.1%} "
            f"{out.distinct:>9}"
        )
    if result.findings:
        lines.append("simulator findings: " + "; ".join(result.findings))
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    compiled = _read(args.model)
    reference = load_tflite(args.reference)
    if _compiled(reference):
        raise BadInput(
            f"--reference {args.reference}: is itself compiled (it has ethos-u operators); give "
            "the model it was compiled from"
        )
    return check_and_report("dse simulate", args.model, compiled, args.reference, reference, args)


def check_and_report(
    command: str, name: str, compiled: bytes, reference_name: str, reference: bytes,
    args: argparse.Namespace,
) -> int:  # fmt: skip
    """Simulate `compiled` (a Vela-format file called `name`) against LiteRT on `reference`
    with `args.samples` inputs, time its streams on `args.system_config`/`memory_mode`/
    `vela_config`, print the result (`args.json`) and give the exit code: 0 within the kernel
    set's tolerance and no finding, else 1 with one line on stderr."""
    try:
        result = check_against_litert(compiled, reference, args.samples)
    except NotTheSameModel as error:
        raise BadInput(
            f"{name} is not a compiled form of {reference_name}: {error}; give the "
            "model it was compiled from"
        ) from None
    except SimulationError as error:
        raise BadInput(f"{name}: {str(error).splitlines()[0]}") from None
    timed = _timed(compiled, args)
    if args.json:
        untimed = isinstance(timed, str)
        print(json.dumps({**result.to_json(), "timed_cycles": None if untimed else timed.cycles,
                          **({"not_timed": timed} if untimed else {})}))  # fmt: skip
    else:
        print(_table(result) + "\n" + _timed_line(timed))
    warn_constant(command, reference_name, result.outputs, result.samples)
    if result.max_abs_diff() > result.litert_tolerance:
        worst = max(result.outputs, key=lambda o: o.max_abs_diff)
        print(
            f"{command}: output {worst.output} differs from LiteRT's {result.litert_kernels} "
            f"kernels by up to {worst.max_abs_diff} (tolerance {result.litert_tolerance})",
            file=sys.stderr,
        )
        return 1
    if result.findings:
        print(f"{command}: the simulator found: {result.findings[0]}", file=sys.stderr)
        return 1
    return 0
