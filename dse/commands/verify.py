"""`dse verify`: run random inputs through litert on the model, the unscheduled integer
reference and the point's stripe schedule, and report the largest differences per output.
Exit 0 when the schedule equals the reference and the reference is within one step of litert,
1 otherwise (the JSON or table is printed either way) or when the schedule cannot run."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from cascader.core.options import CascaderOptions
from cascader.ethosu.errors import DeviceConfigError
from cascader.ethosu.memory import system_memory
from cascader.flow.errors import ModelError
from cascader.flow.frontend import load_tflite
from cascader.flow.legalize import LegalizeError
from cascader.flow.schedule import ScheduleError
from cascader.reference.run import ReferenceError
from cascader.reference.striped import StripeError
from cascader.verify import Verification, verify_model
from dse.commands.estimate import cascader_options
from dse.defaults import system_defaults
from dse.errors import BadInput, NothingFits
from dse.sizes import format_size

LITERT_TOLERANCE = 1  # steps of the output quantisation where Vela rounds unlike TFLite
# accelerator, system config, memory mode, SRAM pool bytes, cascader options, vela.ini
PointSpec = tuple[str, str, str, int, CascaderOptions | None, str | None]


def _point_from_flags(args: argparse.Namespace) -> PointSpec:
    system_config, memory_mode = system_defaults(
        args.accelerator_config, args.system_config, args.memory_mode
    )
    return (
        args.accelerator_config,
        system_config,
        memory_mode,
        args.sram,
        cascader_options(args),
        args.vela_config,
    )


def _point_from_config(args: argparse.Namespace) -> PointSpec:
    """The point an exported config describes (checked against the model's sha256)."""
    try:
        from dse.config import load_config
    except ImportError:
        raise BadInput(
            "--config needs `dse export`'s config loader, which this dse lacks; give --sram SIZE"
        ) from None
    config = load_config(args.config, args.model)
    cascader = config["cascader"]
    options = CascaderOptions(**cascader["options"]) if cascader["enabled"] else None
    return (
        config["accelerator"],
        config["system_config"],
        config["memory_mode"],
        int(config["sram_pool_bytes"]),
        options,
        config.get("vela_config"),
    )


def _table(model: str, result: Verification) -> str:
    data = result.to_json()
    schedule = data["schedule"]
    lines = [
        f"{model}: {data['samples']} random sample(s), "
        f"{'cascaded' if schedule['cascaded'] else 'copy-constants'} schedule of "
        f"{schedule['stripes']} stripes, SRAM used {format_size(schedule['sram_used_bytes'])}",
        f"{'output':<8} {'shape':<20} {'schedule vs reference':>22} {'reference vs litert':>20} "
        f"{'exact':>7}",
    ]
    for out in data["outputs"]:
        ours, theirs = out["schedule_vs_reference"], out["reference_vs_litert"]
        lines.append(
            f"{out['index']:<8} {tuple(out['shape'])!s:<20} {ours['max_abs_diff']:>22} "
            f"{theirs['max_abs_diff']:>20} {theirs['exact']:>7.1%}"
        )
    seconds = data["seconds"]
    lines.append("seconds: " + ", ".join(f"{k} {v:.2f}" for k, v in seconds.items()))
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    point = _point_from_config(args) if args.config is not None else _point_from_flags(args)
    accelerator, system_config, memory_mode, sram, options, vela_config = point
    try:
        model = load_tflite(args.model)
        memory = system_memory(accelerator, system_config, memory_mode, sram, vela_config)
        result = verify_model(model, memory, options, args.samples, name=Path(args.model).name)
    except (ModelError, DeviceConfigError, ScheduleError) as error:
        raise BadInput(str(error)) from None
    except (LegalizeError, ReferenceError) as error:
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
    worst = result.max_abs_diff()
    agree = worst["schedule_vs_reference"] == 0
    return 0 if agree and worst["reference_vs_litert"] <= LITERT_TOLERANCE else 1
