"""The `dse` command line: one argparse tree, each subcommand run by its module's `run`
(`dse.commands`, imported when the command runs: most of them load TVM)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Sequence

from cascader.core.errors import GraphFormatError
from cascader.core.options import COST_MODELS
from cascader.ethosu.defaults import (
    DEFAULT_ACCELERATOR,
    POINT_OPTIONS,
    U55_MEMORY_MODE,
    U55_SYSTEM_CONFIG,
    U65_MEMORY_MODE,
    U65_SYSTEM_CONFIG,
    U85_MEMORY_MODE,
    U85_SYSTEM_CONFIG,
)
from cascader.ethosu.errors import DeviceConfigError
from cascader.frontend.errors import ModelError
from dse.config_schema import MAX_SEED, OPTION_RANGES
from dse.defaults import DEFAULT_OBJECTIVES, SRAM_MAX, SRAM_MIN
from dse.errors import EXIT_BAD_INPUT, DseError
from dse.gc_policy import before_exit
from dse.sizes import format_size, parse_size

# Library errors that describe the user's input (a model, graph or device name): exit 2.
_INPUT_ERRORS = (ModelError, DeviceConfigError, GraphFormatError)
MAX_TRIALS = 10_000  # one request is queued in one transaction, at ~3 ms a ticket on SQLite
MAX_SAMPLES = 1000
DEFAULT_SAMPLES = 8  # enough for an output that varies with its input to show that it does


class _Parser(argparse.ArgumentParser):
    """Prints usage errors as one line (no usage dump) and exits 2, like every other bad input."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def _size(text: str) -> int:
    try:
        return parse_size(text)
    except DseError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _copy_size(text: str) -> int:
    """An argparse type: a size as the other size flags take it, or 0, within the option's
    range."""
    low, high = OPTION_RANGES["always_copy_size"]
    value = 0 if text.strip() == "0" else _size(text)
    if not low <= value <= high:
        raise argparse.ArgumentTypeError(f"{text!r} must be {low} to {high} bytes")
    return value


def _file(text: str) -> str:
    """An argparse type: a file name that is not empty (`Path("")` is the current folder)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("the file name is empty; give a file")
    return text


def _whole(low: int, high: int, why: str = "") -> Callable[[str], int]:
    """An argparse type: a whole number from `low` to `high` (`why` says where the upper
    bound comes from)."""

    def parse(text: str) -> int:
        shown = repr(text) if len(text) <= 24 else repr(text[:21] + "...")
        try:
            value = int(text, 10)
        except ValueError:  # also for thousands of digits
            raise argparse.ArgumentTypeError(f"{shown} is not a whole number") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{shown} must be {low} to {high}{why}")
        return value

    return parse


_TRIALS = _whole(1, MAX_TRIALS)
_JOBS = _whole(1, os.cpu_count() or 1, " (one process per CPU of this machine)")
_SEED = _whole(0, MAX_SEED, " (a sampler seed is 32 bits)")
_SAMPLES = _whole(1, MAX_SAMPLES)
_TRIAL_NUMBER = _whole(0, (1 << 31) - 1)
_CYCLES = _whole(1, (1 << 63) - 1)


_MODEL = "the int8 TFLite model"
_SRAM = "the SRAM pool"
_OPTION_HELP = {
    "stripe_factors": "stripe sizes tried per axis ({low}-{high}; default {default})",
    "max_plan_size": "most parts in one plan ({low}-{high}; default {default})",
    "max_proposals": "proposals kept per region ({low}-{high}; default {default})",
}


def _add_json(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")


def _add_device_options(p: argparse.ArgumentParser, vela_ini_flag: str, kept: str = "") -> None:
    """The device flags; `kept` ends each help text of a command whose continued study keeps
    its own device (the accelerator's default is then filled in by the command)."""
    g = p.add_argument_group("device (names as in Vela)")
    g.add_argument(
        "--accelerator-config",
        default=None if kept else DEFAULT_ACCELERATOR,
        metavar="NAME",
        help="Ethos-U variant, e.g. ethos-u55-128, ethos-u65-256, ethos-u85-256 "
        f"(default {DEFAULT_ACCELERATOR}){kept}"
        + ("; a workload takes a comma-separated list or 'all'" if kept else ""),
    )
    g.add_argument(
        "--system-config",
        default=None,
        metavar="NAME",
        help=f"vela.ini system config (default {U55_SYSTEM_CONFIG}, {U65_SYSTEM_CONFIG} for "
        f"U65, {U85_SYSTEM_CONFIG} for U85){kept}",
    )
    g.add_argument(
        "--memory-mode",
        default=None,
        metavar="NAME",
        help=f"vela.ini memory mode (default {U55_MEMORY_MODE}, {U65_MEMORY_MODE} for U65, "
        f"{U85_MEMORY_MODE} for U85){kept}",
    )
    g.add_argument(
        vela_ini_flag,
        dest="vela_config",
        default=None,
        metavar="VELA_INI",
        help=f"a vela.ini with more system configs / memory modes (default: the one Vela "
        f"ships){kept}",
    )


def _add_cascader_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("cascader options")
    g.add_argument(
        "--no-cascade", action="store_true", help="disable the cascader (copy-constants scheduler)"
    )
    g.add_argument(
        "--no-weight-buffering",
        action="store_true",
        help="with --no-cascade: read every weight in place instead of copying some into SRAM "
        "first (the smallest layer-by-layer schedule)",
    )
    g.add_argument(
        "--narrow-nhwc",
        action="store_true",
        help="store feature maps whose channel count is not a multiple of 16 NHWC, not in "
        "16-channel bricks (which pad them): less SRAM at about the same cycles",
    )
    g.add_argument(
        "--row-sum-mean",
        action="store_true",
        help="sum a mean over H and W row by row first, so its input runs in row stripes with "
        "the layers before it instead of being held whole (one more small op)",
    )
    g.add_argument("--no-striping", action="store_true", help="cascade without striping")
    g.add_argument(
        "--multi-dimensional-striping",
        action="store_true",
        help="stripe along more than one axis at a time",
    )
    for flag, name in (
        ("--stripe-factors", "stripe_factors"),
        ("--max-plan-size", "max_plan_size"),
        ("--max-proposals", "max_proposals"),
    ):
        low, high = OPTION_RANGES[name]
        help_text = _OPTION_HELP[name].format(low=low, high=high,
                                              default=getattr(POINT_OPTIONS, name))  # fmt: skip
        g.add_argument(flag, type=_whole(low, high), default=None, metavar="N", help=help_text)
    g.add_argument(
        "--always-copy-size",
        type=_copy_size,
        default=None,
        metavar="SIZE",
        help="constants up to this size are copied into SRAM (0 copies none; 1KiB, 1MiB, ...)",
    )
    g.add_argument(
        "--cost-model",
        choices=COST_MODELS,
        default=None,
        help="how the cascader costs plans: tvm (the original's model, default) or vela "
        "(follows Vela's performance model)",
    )
    g.add_argument(
        "--proposal-region",
        type=_size,
        default=None,
        metavar="SIZE",
        help="generate proposals for a cascade region of SIZE and choose for the pool, as a "
        "sweep does at its largest pool (default: the pool)",
    )


def _add_study_choice(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--storage",
        default=None,
        metavar="URL",
        help="the study's Optuna storage (default: dse-out/study.db, a default `dse sweep`'s)",
    )


def _add_point_options(p: argparse.ArgumentParser, vela_ini_flag: str = "--config") -> None:
    _add_device_options(p, vela_ini_flag)
    _add_cascader_options(p)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="dse",
        description="Design-space exploration of SRAM size and cascader options for Arm "
        "Ethos-U NPUs, scored with Vela's performance model.",
    )
    parser.add_argument("--version", action="store_true", help="print versions and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    p = sub.add_parser("sweep", help="explore SRAM sizes and cascader options; show the front")
    p.add_argument(
        "--model",
        type=_file,
        action="append",
        metavar="M.tflite",
        help="int8 TFLite model; several make a workload (one study per model and NPU "
        "configuration)",
    )
    p.add_argument(
        "--workload",
        type=_file,
        metavar="W.toml",
        help="a workload file: models with latency budgets (and weights), NPU configurations",
    )
    p.add_argument(
        "--budget-ms",
        type=float,
        default=None,
        metavar="MS",
        help="a workload's latency budget for every --model (a --workload file gives each its own)",
    )
    p.add_argument(
        "--max-sram",
        type=_size,
        default=None,
        metavar="SIZE",
        help="a workload's SRAM limit: name the configuration with the fewest MACs meeting every "
        "budget within it",
    )
    p.add_argument(
        "--graph", type=_file, metavar="G.json", help="a cascader graph (cascader cost only)"
    )
    kept = "; a continued study keeps its own"
    _add_device_options(p, "--config", kept)
    for flag, default in (("--sram-min", SRAM_MIN), ("--sram-max", SRAM_MAX)):
        help_text = f"pool range (default {format_size(default)}){kept}"
        p.add_argument(flag, type=_size, default=None, metavar="SIZE", help=help_text)
    p.add_argument("--trials", type=_TRIALS, default=50, metavar="N",
                   help="trials to run (per study of a workload; default 50); a new study with "
                   "Vela's producer also compiles with Vela at up to 18 arena sizes of its "
                   "dense sweeps, on top")  # fmt: skip
    p.add_argument(
        "--jobs",
        type=_JOBS,
        default=1,
        metavar="N",
        help="score points in N processes (this one samples every trial; default 1)",
    )
    p.add_argument("--storage", default=None, metavar="URL", help="Optuna storage URL")
    p.add_argument("--study", default=None, metavar="NAME",
                   help="the study's name (default <model>-<accelerator>; a workload's name "
                   "for a workload)")  # fmt: skip
    p.add_argument(
        "--producers",
        default=None,
        metavar="LIST",
        help="who makes the schedules: cascader, vela (Vela's own compiler) or cascader,vela "
        f"(the front is then their union; default cascader,vela, vela alone on Ethos-U85, "
        f"cascader for --graph){kept}",
    )
    p.add_argument(
        "--sampler",
        choices=("default", "nsga2", "tpe", "grid"),
        default=None,
        help="a new study's sampler (default: Optuna's); a continued study keeps its own "
        "unless this names another, which then replaces it",
    )
    p.add_argument(
        "--seed",
        type=_SEED,
        default=None,
        metavar="N",
        help="seed the sampler: the same seed, study and trials give the same trials "
        "(with --jobs 1; with more, points finish in varying order and the sampler sees them so)",
    )
    p.add_argument(
        "--objectives",
        default=None,
        metavar="LIST",
        help=f"cycles,sram or cycles,sram,offchip (default {DEFAULT_OBJECTIVES}){kept}",
    )
    p.add_argument("--baseline", choices=("vela",), default=None,
                   help="also compile with Vela at the front's budgets and compare")  # fmt: skip
    p.add_argument("--out", default="dse-out", metavar="DIR",
                   help="the database's folder when no --storage (default dse-out)")  # fmt: skip
    _add_json(p)

    p = sub.add_parser("worker", help="join a shared study (or workload) and run its trials")
    p.add_argument("--storage", required=True, metavar="URL", help="the shared Optuna storage")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--study", metavar="NAME", help="the study to run trials of")
    which.add_argument("--workload", metavar="NAME", help="every study of the workload")
    p.add_argument(
        "--trials",
        type=_TRIALS,
        default=None,
        metavar="N",
        help="issue N more trials (per study of a workload) and run them with the others "
        "(default: run the trials already issued)",
    )

    p = sub.add_parser("report", help="HTML report, plots and Markdown summary of a study")
    _add_study_choice(p)
    which = p.add_mutually_exclusive_group()
    which.add_argument("--study", metavar="NAME", help="default: the storage's only study")
    which.add_argument(
        "--workload", metavar="NAME", help="the answer of a workload's studies (`dse sweep`)"
    )
    p.add_argument(
        "--out",
        default=None,
        metavar="DIR",
        help="default dse-out/report-<study or workload>",
    )
    p.add_argument(
        "--max-sram",
        type=_size,
        default=None,
        metavar="SIZE",
        help="a workload's SRAM limit for the configuration with the fewest MACs",
    )
    p.add_argument(
        "--trial",
        type=_TRIAL_NUMBER,
        default=None,
        metavar="N",
        help="the point whose memory, cascades and layers are drawn (default: the fastest "
        "on the front within the SRAM budget)",
    )
    p.add_argument("--budget-sram", type=_size, action="append", default=[], metavar="SIZE",
                   help="an SRAM budget, drawn on the front (repeatable)")  # fmt: skip
    p.add_argument("--budget-cycles", type=_CYCLES, action="append", default=[], metavar="N",
                   help="a latency budget in cycles, drawn on the front (repeatable)")  # fmt: skip

    p = sub.add_parser("export", help="write the chosen point as a versioned config JSON")
    _add_study_choice(p)
    which = p.add_mutually_exclusive_group()
    which.add_argument("--study", metavar="NAME", help="default: the storage's only study")
    which.add_argument(
        "--workload",
        metavar="NAME",
        help="one config per model of a workload, at its answer's SRAM (-o is then a folder)",
    )
    pick = p.add_mutually_exclusive_group()
    pick.add_argument("--trial", type=_TRIAL_NUMBER, metavar="N", help="this trial")
    pick.add_argument(
        "--max-sram",
        type=_size,
        metavar="SIZE",
        help="fastest point that fits; for a workload, the configuration with the fewest MACs "
        "meeting every budget within SIZE",
    )
    pick.add_argument("--max-cycles", type=_CYCLES, metavar="N", help="least SRAM meeting N")
    p.add_argument(
        "--accelerator-config",
        default=None,
        metavar="NAME",
        help="a workload's NPU configuration to export (default: the fewest MACs meeting "
        "every budget)",
    )
    p.add_argument("-o", "--output", required=True, metavar="cfg.json or DIR",
                   help="the config file (a folder for a workload)")  # fmt: skip

    p = sub.add_parser("compile", help="rebuild a schedule and write the NPU command stream")
    p.add_argument("--model", type=_file, required=True, metavar="M.tflite", help=_MODEL)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--config", dest="config", metavar="cfg.json", help="from `dse export`")
    src.add_argument("--sram", type=_size, metavar="SIZE", help=_SRAM)
    _add_point_options(p, "--vela-config")
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="the build folder")

    p = sub.add_parser("estimate", help="score one point with Vela's performance model")
    p.add_argument("--model", type=_file, metavar="M.tflite", help=_MODEL)
    p.add_argument(
        "--graph", type=_file, metavar="G.json", help="a cascader graph instead of a model"
    )
    p.add_argument("--sram", type=_size, default=None, metavar="SIZE", help=_SRAM + " (1 MiB)")
    p.add_argument(
        "--producer",
        choices=("cascader", "vela"),
        default=None,
        help="whose schedule: the cascader's, or Vela's own compiler's with --sram as its "
        "arena size limit (default cascader; vela on Ethos-U85)",
    )
    _add_point_options(p)
    _add_json(p)

    p = sub.add_parser("graph", help="write a model's cascader graph as JSON")
    p.add_argument("--model", type=_file, required=True, metavar="M.tflite", help=_MODEL)
    p.add_argument("--sram", type=_size, default=None, metavar="SIZE", help="pool (1 MiB)")
    _add_device_options(p, "--config")
    p.add_argument("-o", "--output", required=True, metavar="G.json", help="the graph file")

    p = sub.add_parser("propose", help="run the cascader core on a graph JSON")
    p.add_argument("--graph", type=_file, required=True, metavar="G.json",
                   help="a cascader graph (`dse graph`)")  # fmt: skip
    p.add_argument("--sram", type=_size, default=None, metavar="SIZE", help=_SRAM + " (1 MiB)")
    p.add_argument(
        "--option", action="append", default=[], metavar="K=V", help="override an option"
    )
    _add_json(p)

    p = sub.add_parser("verify", help="check a schedule's numbers against a reference")
    p.add_argument("--model", type=_file, required=True, metavar="M.tflite", help=_MODEL)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--config", dest="config", metavar="cfg.json", help="from `dse export`")
    src.add_argument("--sram", type=_size, metavar="SIZE", help=_SRAM)
    _add_point_options(p, "--vela-config")
    _add_samples(p)
    _add_json(p)

    p = sub.add_parser(
        "simulate", help="run a Vela-format .tflite on the Ethos-U simulator against LiteRT"
    )
    p.add_argument(
        "--model", type=_file, required=True, metavar="X.tflite", help="dse's or Vela's output"
    )
    p.add_argument(
        "--reference", type=_file, required=True, metavar="M.tflite", help="the original model"
    )
    g = p.add_argument_group("timed cycles (the accelerator is the one the file names)")
    g.add_argument(
        "--system-config",
        default=None,
        metavar="NAME",
        help=f"vela.ini system config to time the streams on (default {U55_SYSTEM_CONFIG}, "
        f"{U65_SYSTEM_CONFIG} for U65)",
    )
    g.add_argument(
        "--memory-mode",
        default=None,
        metavar="NAME",
        help=f"vela.ini memory mode (default {U55_MEMORY_MODE}, {U65_MEMORY_MODE} for U65)",
    )
    g.add_argument(
        "--vela-config",
        default=None,
        metavar="VELA_INI",
        help="a vela.ini with more system configs / memory modes (default: the one Vela ships)",
    )
    _add_samples(p)
    _add_json(p)

    p = sub.add_parser(
        "cut", help="cut a model where its outputs vary with its input, for verify and simulate"
    )
    p.add_argument("--model", type=_file, required=True, metavar="M.tflite", help=_MODEL)
    _add_samples(p)
    p.add_argument("-o", "--output", required=True, metavar="CUT.tflite", help="the cut model")
    return parser


def _add_samples(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--samples",
        type=_SAMPLES,
        default=DEFAULT_SAMPLES,
        metavar="N",
        help=f"random inputs to run (default {DEFAULT_SAMPLES})",
    )


def _versions() -> str:
    from importlib.metadata import PackageNotFoundError, version

    lines = []
    for dist in ("cascader-dse", "apache-tvm", "ethos-u-vela", "optuna", "numpy"):
        try:
            lines.append(f"{dist} {version(dist)}")
        except PackageNotFoundError:
            lines.append(f"{dist} (not installed)")
    return "\n".join(lines)


def _command(name: str) -> Callable[[argparse.Namespace], int]:
    """The `run` of subcommand `name`, imported now."""
    if name == "sweep":
        from dse.commands.sweep import run
    elif name == "worker":
        from dse.commands.worker import run
    elif name == "report":
        from dse.commands.report import run
    elif name == "export":
        from dse.commands.export import run
    elif name == "compile":
        from dse.commands.compile import run
    elif name == "estimate":
        from dse.commands.estimate import run
    elif name == "graph":
        from dse.commands.graph import run
    elif name == "propose":
        from dse.commands.propose import run
    elif name == "verify":
        from dse.commands.verify import run
    elif name == "simulate":
        from dse.commands.simulate import run
    elif name == "cut":
        from dse.commands.cut import run
    else:
        raise ValueError(f"no command {name!r}")
    return run


def main(argv: Sequence[str] | None = None) -> int:
    # SQLAlchemy logs the cleanup failures it recovers from (a cursor that will not close
    # after Ctrl-C landed in a query) with their tracebacks; unconfigured, Python prints
    # them on stderr before the command's one line. A failure that matters reaches the
    # command as an exception and is said there.
    sqlalchemy_log = logging.getLogger("sqlalchemy")
    if not sqlalchemy_log.handlers:
        sqlalchemy_log.addHandler(logging.NullHandler())
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.version:
        print(_versions())
        return 0
    if args.command is None:
        parser.print_help()
        return EXIT_BAD_INPUT
    try:
        return int(_command(args.command)(args))
    except DseError as err:
        _refuse(args.command, err)
        return err.exit_code
    except _INPUT_ERRORS as err:
        _refuse(args.command, err)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print(f"dse {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`dse ... | head`): stop quietly, as Unix tools do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except OSError as err:
        if err.filename is None:
            raise
        # A file the command line named (or one beside it) that the OS refuses.
        _refuse(args.command, f"{err.filename}: {err.strerror}; check the path")
        return EXIT_BAD_INPUT
    except Exception as err:
        failure = _storage_failure(err)
        if failure is None:
            raise
        _refuse(args.command, failure)
        return failure.exit_code


def _refuse(command: str, err: Exception | str) -> None:
    """The refusal, on one line of stderr whatever the message holds."""
    print(f"dse {command}: error: {' '.join(str(err).split())}", file=sys.stderr)


def _storage_failure(err: Exception) -> DseError | None:
    """A database error raised while the command ran, as its one-line refusal (only a
    process that opened a storage has imported dse.study)."""
    study = sys.modules.get("dse.study")
    return study.storage_failure(err) if study is not None else None


def script() -> int:
    """The `dse` command: `main`, then a quick way out (`dse.gc_policy.before_exit`)."""
    code = main()
    before_exit()
    return code


if __name__ == "__main__":
    sys.exit(script())
