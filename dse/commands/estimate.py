"""`dse estimate`: score one design point with Vela's performance model and print it (the
DESIGN.md estimate object with `--json`, else a per-op table). `--graph` scores a cascader
graph JSON with the cascader's own cost instead (no model, no Vela)."""

from __future__ import annotations

import argparse
import contextlib
import io
import itertools
import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TypeVar

from cascader.core.errors import GraphFormatError
from cascader.core.options import CascaderOptions
from cascader.estimate import Device, Estimate, PointConfig
from cascader.ethosu.defaults import POINT_OPTIONS, system_defaults
from cascader.ethosu.errors import DeviceConfigError
from cascader.ethosu.vela_arch import check_vela_accelerator
from cascader.frontend.errors import ModelError
from cascader.frontend.legalize import LegalizeError
from cascader.ir.errors import ScheduleError
from cascader.pipeline import Session
from dse.defaults import SRAM_MAX
from dse.errors import BadInput, NothingFits
from dse.inputs import check_graph
from dse.mean_rows import has_row_sum_mean
from dse.sizes import format_size
from dse.space import DesignPoint, SearchSpace

DEFAULT_SRAM_POOL = 1 << 20
T = TypeVar("T")


def cascader_options(args: argparse.Namespace) -> CascaderOptions | None:
    """The point's cascader options from the flags; None when `--no-cascade`."""
    if args.no_weight_buffering and not args.no_cascade:
        raise BadInput("--no-weight-buffering is for the layer-by-layer schedule; add --no-cascade")
    if args.no_cascade:
        return None
    given = {
        "stripe_factors": args.stripe_factors,
        "max_plan_size": args.max_plan_size,
        "max_proposals": args.max_proposals,
        "always_copy_size": args.always_copy_size,
        "cost_model": args.cost_model,
    }
    return replace(
        POINT_OPTIONS,
        enable_striping=not args.no_striping,
        enable_multi_dimensional_striping=args.multi_dimensional_striping,
        **{k: v for k, v in given.items() if v is not None},
    )


def nothing_fits(result: Estimate) -> NothingFits:
    """When no schedule fits, the point was scored with the smallest one, so its SRAM use is
    the least any schedule needs."""
    bound = result.sram_lower_bound_bytes
    limit = f" (and none of any kind could need less than {bound})" if bound is not None else ""
    return NothingFits(
        f"nothing fits in {result.sram_pool_bytes} bytes; the smallest schedule needs "
        f"{result.sram_used_bytes} bytes{limit}"
    )


_OPTION_FLAGS = ("stripe_factors", "max_plan_size", "max_proposals", "always_copy_size",
                 "cost_model")  # fmt: skip


def options_given(args: argparse.Namespace) -> bool:
    """Whether any flag pins the cascader's options (an exported config pins them all)."""
    switches = (args.no_cascade, args.no_striping, args.multi_dimensional_striping,
                args.no_weight_buffering, args.narrow_nhwc, args.row_sum_mean)  # fmt: skip
    return any(switches) or any(getattr(args, name) is not None for name in _OPTION_FLAGS)


def best_seed_kind(
    session: Session, sram: int, region: int | None, row_sum_mean: bool = False
) -> PointConfig:
    """The point a sweep's seed kinds (cascader off, its defaults, the `vela` cost model,
    copying everything or nothing, the smallest schedules; with `row_sum_mean`, a sweep's of a
    model offered that option, `dse.mean_rows`) make fastest within `sram`:
    never slower than the cascader off, and fitting wherever any kind fits. Without a given
    region, each kind's proposals are made for the pool and, as a sweep makes them, for its
    default largest pool (its smaller proposals can be smaller than any made for the pool
    alone). When none fits, the one needing the least SRAM (so the refusal names the least
    any of them needs)."""
    regions = [region] if region is not None else [None] + ([SRAM_MAX] if sram < SRAM_MAX else [])
    space = SearchSpace(sram, sram, cascader_optional=True, row_sum_mean=row_sum_mean)
    kinds = space.seed_kinds()
    scored = []
    for order, (kind, region_bytes) in enumerate(itertools.product(kinds, regions)):
        config = replace(kind, sram_pool_bytes=sram).config(region_bytes)
        try:
            result = session.score(config)
        except ScheduleError:
            continue
        scored.append((result, order, config))
    if not scored:
        raise BadInput(f"no seed kind of schedule can be built for {format_size(sram)}")
    fitting = [s for s in scored if s[0].fits]
    if fitting:
        return min(fitting, key=lambda s: (s[0].total_cycles, s[0].sram_used_bytes, s[1]))[2]
    return min(scored, key=lambda s: (s[0].sram_used_bytes, s[1]))[2]


def scored_point(
    args: argparse.Namespace, sram: int, run: Callable[[Session, PointConfig], T]
) -> T:
    """`run(session, config)` for the flags' point, library errors turned into BadInput.
    With no option flags, the point is the best of a sweep's seed kinds (`best_seed_kind`)."""
    device = Device(args.accelerator_config, args.system_config, args.memory_mode,
                    args.vela_config)  # fmt: skip
    try:
        device.memory(sram)  # names checked before the model is imported
        session = Session(args.model, device)
        if options_given(args):
            config = PointConfig(sram, cascader_options(args), args.proposal_region,
                                 not args.no_weight_buffering, args.narrow_nhwc,
                                 args.row_sum_mean)  # fmt: skip
        else:
            with contextlib.redirect_stdout(io.StringIO()):  # Vela's allocator warnings
                rows = has_row_sum_mean(str(args.model), session.prepared.sha256)
                config = best_seed_kind(session, sram, args.proposal_region, rows)
        return run(session, config)
    except (ModelError, DeviceConfigError, ScheduleError) as error:
        raise BadInput(str(error)) from None
    except LegalizeError as error:
        raise BadInput(f"{args.model}: {error}") from None


def _graph_estimate(args: argparse.Namespace, sram: int) -> Estimate:
    from dse.graph_evaluator import graph_evaluator
    from dse.space import DesignPoint

    options = cascader_options(args)
    if options is None:
        raise BadInput("--graph scores the cascader's proposals; --no-cascade needs --model")
    if args.narrow_nhwc:
        raise BadInput("--narrow-nhwc lays out a model's feature maps; a graph has none")
    if args.row_sum_mean:
        raise BadInput("--row-sum-mean rewrites a model's means; a graph has none")
    check_graph(args.graph)
    try:
        evaluator = graph_evaluator(args.graph)
    except (GraphFormatError, OSError) as error:
        raise BadInput(f"{args.graph}: {error}") from None
    point = DesignPoint(
        sram_pool_bytes=sram,
        enable_striping=options.enable_striping,
        enable_multi_dimensional_striping=options.enable_multi_dimensional_striping,
        stripe_factors=options.stripe_factors,
        max_plan_size=options.max_plan_size,
        max_proposals=options.max_proposals,
        always_copy_size=options.always_copy_size,
        cost_model=options.cost_model,
    )
    return evaluator(point)


def _vela_estimate(args: argparse.Namespace, sram: int) -> Estimate:
    """Vela's own compiler at `sram` as its arena size limit (the one producer on U85)."""
    from dse.study import StudySettings, model_sha256
    from dse.vela_evaluator import VelaEvaluator

    if options_given(args):
        raise BadInput("the cascader's option flags are not Vela's: drop them for --producer vela")
    accelerator = args.accelerator_config
    try:
        check_vela_accelerator(accelerator)
    except DeviceConfigError as error:
        raise BadInput(str(error)) from None
    system, mode = system_defaults(accelerator, args.system_config, args.memory_mode)
    path = Path(args.model)
    settings = StudySettings("model", str(path.resolve()), model_sha256(path), accelerator,
                             system, mode, args.vela_config, sram, sram, ("cycles", "sram"),
                             "default", ("vela",))  # fmt: skip
    try:
        evaluate = VelaEvaluator(settings, path)
    except (DeviceConfigError, ModelError) as error:
        raise BadInput(str(error)) from None
    result = evaluate(DesignPoint(sram, producer="vela"))
    if result.unscheduled is not None:
        raise BadInput(f"{path}: {result.unscheduled}")
    return replace(result, fits=result.sram_used_bytes <= sram)


def _table(result: Estimate) -> str:
    data = result.to_json()
    vela = result.producer == "vela"
    made = "Vela's own schedule" if vela else f"cascader {'on' if result.options else 'off'}"
    total = (
        f"total {data['total_cycles']:.0f} cycles ({data['inference_time_s'] * 1e3:.3f} ms), "
        f"SRAM used {format_size(data['sram_used_bytes'])}"
    )
    lines = [
        f"{data['model']} on {data['accelerator']} ({data['system_config']}, "
        f"{data['memory_mode']}), SRAM pool {format_size(data['sram_pool_bytes'])}, {made}"
    ]
    if vela:
        return "\n".join([*lines, f"{total} (Vela's performance report)"])
    lines.append(f"{'op':<40} {'kind':<12} {'stripes':>7} {'cycles':>12} {'MACs':>12}")
    for op in data["ops"]:
        lines.append(
            f"{op['name'][:40]:<40} {op['kind']:<12} {op['stripes']:>7} "
            f"{op['cycles']:>12.0f} {op['macs']:>12}"
        )
    lines.append(
        f"{total}, {data['npu_ops']} NPU ops, host ops: {', '.join(data['host_ops']) or 'none'}"
    )
    if result.sram_lower_bound_bytes is not None:
        lines.append(lower_bound_line(result))
    return "\n".join(lines)


def lower_bound_line(result: Estimate) -> str:
    """The SRAM lower bound beside what the point uses, and how the bound is reached."""
    return (
        f"SRAM lower bound {format_size(result.sram_lower_bound_bytes or 0)} (no schedule of "
        f"this model needs less on {result.memory_mode}): {result.sram_lower_bound_derivation}"
    )


def run(args: argparse.Namespace) -> int:
    sram = args.sram or DEFAULT_SRAM_POOL
    if (args.model is None) == (args.graph is None):
        raise BadInput("give exactly one of --model M.tflite or --graph G.json")
    if args.graph is not None:
        print(json.dumps(_graph_estimate(args, sram).to_json(), indent=None if args.json else 1))
        return 0
    producer = args.producer or (
        "vela" if args.accelerator_config.startswith("ethos-u85") else "cascader"
    )
    if producer == "vela":
        result = _vela_estimate(args, sram)
        if not result.fits:  # a soft limit in Shared_Sram: Vela's schedule is real, but larger
            raise NothingFits(
                f"Vela's own schedule with an arena size limit of {format_size(sram)} uses "
                f"{format_size(result.sram_used_bytes)} of SRAM; give --sram "
                f"{format_size(result.sram_used_bytes)} or more"
            )
    else:
        result = scored_point(args, sram, Session.score)
    if not result.fits:
        raise nothing_fits(result)
    print(json.dumps(result.to_json()) if args.json else _table(result))
    return 0
