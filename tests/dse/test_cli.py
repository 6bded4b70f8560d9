"""The command line's shape: every subcommand has --help, sizes parse, bad input is one line."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dse.cli import build_parser, main
from dse.errors import BadInput
from dse.sizes import format_size, parse_size

SUBCOMMANDS = (
    "sweep",
    "worker",
    "report",
    "export",
    "compile",
    "estimate",
    "graph",
    "propose",
    "verify",
    "simulate",
    "cut",
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("262144", 262144),
        ("256KiB", 262144),
        ("256kib", 262144),
        ("0.25MiB", 262144),
        ("4MiB", 4 * 1024 * 1024),
        ("1.5 MiB", 1572864),
        ("64KB", 65536),
    ],
)
def test_parse_size_accepts_bytes_and_binary_suffixes(text: str, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "12Q", "-5", "0", "1.5", "0.1KiB", "KiB", "1e3"])
def test_parse_size_rejects_bad_sizes(text: str) -> None:
    with pytest.raises(BadInput, match="bad size"):
        parse_size(text)


def test_format_size() -> None:
    assert format_size(512) == "512 B"
    assert format_size(362496) == "354.0 KiB"
    assert format_size(1572864) == "1.50 MiB"


@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_every_subcommand_has_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main([command, "--help"])
    assert exited.value.code == 0
    assert f"dse {command}" in capsys.readouterr().out


def test_point_options_match_design() -> None:
    """The flags DESIGN.md promises for a point exist on compile/estimate/verify."""
    parser = build_parser()
    args = parser.parse_args(
        [
            "estimate",
            "--model",
            "m.tflite",
            "--sram",
            "256KiB",
            "--accelerator-config",
            "ethos-u55-128",
            "--system-config",
            "S",
            "--memory-mode",
            "M",
            "--no-striping",
            "--multi-dimensional-striping",
            "--stripe-factors",
            "3",
            "--max-plan-size",
            "4",
            "--max-proposals",
            "8",
            "--always-copy-size",
            "0",
            "--json",
        ]
    )
    assert args.sram == 262144
    assert args.accelerator_config == "ethos-u55-128"
    assert (args.no_striping, args.multi_dimensional_striping) == (True, True)
    assert (args.stripe_factors, args.max_plan_size, args.max_proposals) == (3, 4, 8)
    assert args.always_copy_size == 0


def test_bad_size_is_one_line_exit_2() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "dse", "sweep", "--model", "m.tflite", "--sram-max", "12Q"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "bad size '12Q'" in lines[0]
    assert "Traceback" not in proc.stderr


def test_unknown_flag_is_one_line_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["propose", "--graph", "g.json", "--frobnicate"])
    assert exited.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--frobnicate" in err[0]


def test_version_lists_pinned_dependencies(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    out = capsys.readouterr().out
    assert "apache-tvm 0.27" in out and "ethos-u-vela 5.2" in out


def test_a_closed_pipe_stops_quietly(tmp_path) -> None:
    """`dse propose --json | head`: no BrokenPipeError traceback when the reader goes away."""
    example = Path(__file__).resolve().parents[2] / "examples" / "mobilenet_like_96.tflite"
    graph = tmp_path / "g.json"
    assert main(["graph", "--model", str(example), "-o", str(graph)]) == 0
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before anything is written
    proc = subprocess.run(
        [sys.executable, "-m", "dse", "propose", "--graph", str(graph), "--json"],
        stdout=write_end,
        stderr=subprocess.PIPE,
        text=True,
        check=False,
    )
    os.close(write_end)
    assert proc.returncode == 141
    assert proc.stderr == ""


@pytest.mark.parametrize(("text", "expected"), [("0", 0), ("1KiB", 1024), ("1024", 1024)])
def test_always_copy_size_takes_sizes_as_the_other_size_flags(text: str, expected: int) -> None:
    args = build_parser().parse_args(
        ["estimate", "--model", "m.tflite", "--always-copy-size", text]
    )
    assert args.always_copy_size == expected


def test_every_flag_of_every_command_says_what_it_is() -> None:
    """`dse COMMAND --help` describes each flag (the option flags with range and default)."""
    parser = build_parser()
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    silent = {
        (name, action.option_strings[-1])
        for name, sub in commands.choices.items()
        for action in sub._actions
        if action.option_strings and action.help is None
    }
    assert not silent
    estimate = commands.choices["estimate"].format_help()
    assert "stripe sizes tried per axis (1-64; default 5)" in " ".join(estimate.split())
