"""The fuzz suite's cases, by category, each built from a seed: a `dse` command line over a
hostile input written into a folder of its own. `tests/fuzz/test_fuzz.py` runs a few hundred
of them in CI; `benchmarks/fuzz.py` runs more and reports the figures."""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import random
import shutil
import socket
import sqlite3
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import tflite
from fuzz_models import base_model, mutated_model

from cascader.ethosu.vela_arch import DEFAULT_VELA_INI
from dse.study import close_storages


@dataclass(frozen=True)
class Case:
    """One command line to run (`argv` built in a folder of the case's own by `make`), the
    exit codes it may end with, and environment variables it runs with."""

    category: str
    seed: int
    what: str
    make: Callable[[Path], list[str]]
    env: dict[str, str] = field(default_factory=dict)
    allowed: tuple[int, ...] = (0, 2, 3)  # exit codes it may end with


@dataclass(frozen=True)
class Study:
    """A small finished study every case of a run starts from: its folder (study.db), its
    model and an exported config."""

    folder: Path
    model: Path
    config: Path

    @property
    def url(self) -> str:
        return f"sqlite:///{self.folder / 'study.db'}"


def make_study(folder: Path, run: Callable[[list[str]], int]) -> Study:
    """Sweep a one-convolution model (four trials) and export its fastest point, with `run`
    (the fuzz runner's or a test's way of running `dse`)."""
    folder.mkdir(parents=True, exist_ok=True)
    model = folder / "conv.tflite"
    model.write_bytes(base_model("conv"))
    sweep = ["sweep", "--model", str(model), "--study", "s", "--out", str(folder), "--json"]
    assert (
        run([*sweep, "--trials", "4", "--sram-min", "16KiB", "--sram-max", "256KiB", "--seed", "1"])
        == 0
    )
    config = folder / "cfg.json"
    storage = f"sqlite:///{folder / 'study.db'}"
    assert (
        run(
            [
                "export",
                "--storage",
                storage,
                "--study",
                "s",
                "--max-sram",
                "256KiB",
                "-o",
                str(config),
            ]
        )
        == 0
    )
    close_storages()  # the write-ahead log checkpointed: a copy of study.db is the whole study
    return Study(folder, model, config)


# ----------------------------------------------------------------------- mutated TFLite
SIZES = ("16", "1KiB", "16KiB", "64KiB", "256KiB", "1MiB", "4MiB")


def model_estimate(seed: int) -> Case:
    rng = random.Random(seed)
    data, what = mutated_model(rng)
    flags = ["--no-cascade"] if rng.random() < 0.7 else []
    sram = rng.choice(SIZES)

    def make(folder: Path) -> list[str]:
        (folder / "m.tflite").write_bytes(data)
        return ["estimate", "--model", str(folder / "m.tflite"), "--sram", sram, "--json", *flags]

    return Case("model-estimate", seed, f"{what} --sram {sram} {' '.join(flags)}", make)


def model_sweep(seed: int) -> Case:
    rng = random.Random(seed)
    data, what = mutated_model(rng)

    def make(folder: Path) -> list[str]:
        (folder / "m.tflite").write_bytes(data)
        return [
            "sweep",
            "--model",
            str(folder / "m.tflite"),
            "--out",
            str(folder / "out"),
            "--trials",
            "1",
            "--sram-min",
            "16KiB",
            "--sram-max",
            "256KiB",
            "--json",
        ]

    return Case("model-sweep", seed, what, make)


# ------------------------------------------------------------------------ special files
def _fifo(folder: Path) -> str:
    path = folder / "fifo"
    os.mkfifo(path)
    return str(path)


def _padded(folder: Path) -> str:
    """A valid model followed by 2 GiB of zeros (a sparse file: nothing is written)."""
    path = folder / "padded.tflite"
    path.write_bytes(base_model("conv"))
    os.truncate(path, path.stat().st_size + (2 << 30))
    return str(path)


def _socket(folder: Path) -> str:
    """Bound by a relative name: a socket address holds 107 bytes, pytest's paths may not fit."""
    with contextlib.chdir(folder), socket.socket(socket.AF_UNIX) as server:
        server.bind("sock")
    return str(folder / "sock")


def _loop(folder: Path) -> str:
    (folder / "a").symlink_to(folder / "b")
    (folder / "b").symlink_to(folder / "a")
    return str(folder / "a")


def _written(name: str, data: bytes) -> Callable[[Path], str]:
    def make(folder: Path) -> str:
        (folder / name).write_bytes(data)
        return str(folder / name)

    return make


SPECIAL: dict[str, Callable[[Path], str]] = {
    "fifo": _fifo,
    "dev-zero": lambda _: "/dev/zero",
    "dev-urandom": lambda _: "/dev/urandom",
    "dev-null": lambda _: "/dev/null",
    "proc-file": lambda _: "/proc/self/status",
    "passwd": lambda _: "/etc/passwd",
    "directory": lambda folder: str(folder),
    "missing": lambda folder: str(folder / "missing"),
    "dangling-link": lambda folder: (folder / "l").symlink_to(folder / "x") or str(folder / "l"),
    "link-loop": _loop,
    "socket": _socket,
    "empty": _written("empty", b""),
    "identifier-only": _written("id", b"\0\0\0\0TFL3"),
    "truncated-model": lambda folder: _written("t", base_model("conv")[:100])(folder),
    "model-plus-2GiB": _padded,
    "long-name": lambda folder: str(folder / ("x" * 300)),
    "newline-name": _written("new\nline.tflite", b"not a model"),
}
# The flags that name an input file, with the rest of their command line.
FILE_FLAGS: dict[str, Callable[[str, Study], list[str]]] = {
    "estimate --model": lambda p, s: ["estimate", "--model", p, "--no-cascade", "--json"],
    "estimate --config": lambda p, s: ["estimate", "--model", str(s.model), "--config", p],
    "estimate --graph": lambda p, s: ["estimate", "--graph", p],
    "sweep --model": lambda p, s: ["sweep", "--model", p, "--out", p + ".out", "--trials", "1"],
    "compile --config": lambda p, s: [
        "compile",
        "--model",
        str(s.model),
        "--config",
        p,
        "-o",
        str(s.folder / "never"),
    ],
    "verify --vela-config": lambda p, s: [
        "verify",
        "--model",
        str(s.model),
        "--sram",
        "64KiB",
        "--vela-config",
        p,
    ],
    "propose --graph": lambda p, s: ["propose", "--graph", p],
    "simulate --model": lambda p, s: ["simulate", "--model", p, "--reference", str(s.model)],
    "graph --model": lambda p, s: ["graph", "--model", p, "-o", p + ".json"],
}


def special_file(seed: int, study: Study) -> Case:
    """Every special file under every file flag, in turn (the seed picks the pair)."""
    pairs = [(kind, flag) for kind in SPECIAL for flag in FILE_FLAGS]
    kind, flag = pairs[seed % len(pairs)]

    def make(folder: Path) -> list[str]:
        return FILE_FLAGS[flag](SPECIAL[kind](folder), study)

    return Case("special-file", seed, f"{flag} {kind}", make)


# ---------------------------------------------------------------------- config mutations
_HOSTILE_JSON: tuple = (
    None,
    True,
    False,
    0,
    -1,
    1,
    15,
    16,
    17,
    64,
    65,
    1 << 16,
    (1 << 16) + 1,
    1 << 31,
    1 << 32,
    (1 << 32) + 16,
    1 << 40,
    (1 << 40) + 16,
    1 << 63,
    1 << 64,
    10**30,
    0.5,
    -0.0,
    1e308,
    float("nan"),
    float("inf"),
    "",
    "x" * 5000,
    [],
    {},
    [1, 2],
    {"a": 1},
    "ethos-u65-256",
    "ethos-u55-32",
    "Ethos_U55_High_End_Embedded",
    "Ethos_U65_High_End",
    "Dedicated_Sram",
    "Sram_Only",
    "/dev/zero",
    "/etc/passwd",
    "vela",
    "tvm",
)


def _paths(value, prefix=()) -> list[tuple]:
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found += _paths(item, (*prefix, i))
    return found


def mutated_json(value, rng: random.Random) -> tuple[str, str]:
    """JSON text of `value` with one hostile change: a value replaced, a key removed or
    added, or the text itself damaged (bytes, a cut, deep nesting, a huge integer)."""
    kind = rng.choices(["set", "drop", "add", "text"], weights=[6, 2, 1, 2])[0]
    inner = [p for p in _paths(value) if p]
    if kind == "text" or not inner:  # a scalar has no inner value to change
        text = json.dumps(value)
        damage = rng.choice(["flip", "cut", "deep", "digits"])
        if damage == "flip":
            i = rng.randrange(len(text))
            return text[:i] + chr(rng.randrange(32, 127)) + text[i + 1 :], "flip"
        if damage == "cut":
            return text[: rng.randrange(len(text))], "cut"
        if damage == "deep":
            return "[" * 100_000 + "]" * 100_000, "100000-deep"
        return text.replace("1", "1" + "7" * 5000, 1), "5000 digits"
    value = copy.deepcopy(value)
    path = rng.choice(inner)
    parent = value
    for key in path[:-1]:
        parent = parent[key]
    if kind == "set":
        parent[path[-1]] = rng.choice(_HOSTILE_JSON)
    elif kind == "drop":
        del parent[path[-1]]
    elif isinstance(parent, dict):
        parent["unknown"] = 1
    return json.dumps(value), f"{kind} {'.'.join(map(str, path))}"


def config_command(seed: int, study: Study) -> Case:
    rng = random.Random(seed)
    text, what = mutated_json(json.loads(study.config.read_text()), rng)
    verify = rng.random() < 0.3

    def make(folder: Path) -> list[str]:
        (folder / "cfg.json").write_text(text)
        base = ["--model", str(study.model), "--config", str(folder / "cfg.json")]
        if verify:
            return ["verify", *base, "--samples", "1", "--json"]
        return ["compile", *base, "-o", str(folder / "build")]

    return Case("config", seed, f"{'verify' if verify else 'compile'} {what}", make)


# ---------------------------------------------------------------------------- flag values
_HOSTILE_FLAGS: tuple = (
    "0",
    "-1",
    "1",
    "3",
    "64",
    "65",
    "65536",
    "65537",
    "4294967296",
    "9223372036854775808",
    "1" * 5000,
    "1e3",
    "0x10",
    "1.5",
    "",
    " ",
    "nan",
    "inf",
    "１",
    "abc",
    "\n",
)
_HOSTILE_SIZES: tuple = (
    "0",
    "1",
    "15",
    "16",
    "1KiB",
    "0.5",
    "1.5KiB",
    "4GiB",
    "4.5GiB",
    "1024GiB",
    "1025GiB",
    "1TiB",
    "9223372036854775808",
    "9" * 400,
    "-1",
    "1e9",
    "1KB",
    "256kib",
    "NaN",
    "1 MiB",
)
_NAMES: dict[str, tuple] = {
    "--accelerator-config": (
        "ethos-u55-32",
        "ethos-u65-512",
        "ethos-u85-256",
        "ethos-u99-1",
        "",
        "ETHOS-U55-256",
    ),
    "--system-config": (
        "Ethos_U55_Deep_Embedded",
        "Ethos_U65_High_End",
        "Ethos_U85_SYS_DRAM_Mid",
        "Ethos_U65_Client_Server",
        "nope",
        "",
    ),
    "--memory-mode": (
        "Shared_Sram",
        "Sram_Only",
        "Dedicated_Sram",
        "Dedicated_Sram_512KB",
        "nope",
        "",
    ),
    "--cost-model": ("tvm", "vela", "other"),
}


def _vela_ini(old: bytes = b"", new: bytes = b"", extra: bytes = b"") -> Callable[[], bytes]:
    return lambda: DEFAULT_VELA_INI.read_bytes().replace(old, new) + extra


_VELA_INIS: dict[str, Callable[[], bytes]] = {
    "vela.ini": _vela_ini(),
    "binary": lambda: bytes(range(256)) * 8,
    "no-section": lambda: b"core_clock=1e9\n",
    "duplicate": lambda: b"[System_Config.A]\n[System_Config.A]\n",
    "bad-values": _vela_ini(b"core_clock=500e6", b"core_clock=x"),
    "bad-port": _vela_ini(b"axi1_port=OffChipFlash", b"axi1_port=Moon"),
    "self-inherit": _vela_ini(extra=b"\n[Memory_Mode.Loop]\ninherit=Memory_Mode.Loop\n"),
    "latin-1": lambda: "[System_Config.é]\n".encode("latin-1"),
}


def flag_values(seed: int, study: Study) -> Case:
    """`dse estimate` on a one-convolution model with one to three hostile flag values."""
    rng = random.Random(seed)
    flags: list[str] = []
    ini = None
    for _ in range(rng.choice((1, 1, 2, 3))):
        kind = rng.choice(["size", "count", "name", "ini"])
        if kind == "size":
            flags += [rng.choice(["--sram", "--proposal-region"]), rng.choice(_HOSTILE_SIZES)]
        elif kind == "count":
            flag = rng.choice(
                ["--stripe-factors", "--max-plan-size", "--max-proposals", "--always-copy-size"]
            )
            flags += [flag, rng.choice(_HOSTILE_FLAGS)]
        elif kind == "name":
            flag = rng.choice(sorted(_NAMES))
            flags += [flag, rng.choice(_NAMES[flag])]
        else:
            ini = rng.choice(sorted(_VELA_INIS))
    what = " ".join(repr(f) if len(f) < 30 else repr(f[:27] + "...") for f in flags)

    def make(folder: Path) -> list[str]:
        argv = ["estimate", "--model", str(study.model), *flags, "--json"]
        if ini is not None:
            (folder / "vela.ini").write_bytes(_VELA_INIS[ini]())
            argv += ["--config", str(folder / "vela.ini")]
        return argv

    return Case("flags", seed, f"{what} {'ini ' + ini if ini else ''}", make)


def sweep_flags(seed: int, study: Study) -> Case:
    """`dse sweep` with hostile values of its own flags (refused before any trial)."""
    rng = random.Random(seed)
    flag = rng.choice(
        [
            "--trials",
            "--jobs",
            "--seed",
            "--sram-min",
            "--sram-max",
            "--objectives",
            "--sampler",
            "--study",
            "--storage",
        ]
    )
    values = {
        "--sram-min": _HOSTILE_SIZES,
        "--sram-max": _HOSTILE_SIZES,
        "--objectives": ("cycles", "sram,cycles,sram", "cycles,sram,offchip,x", "", ","),
        "--sampler": ("grid", "random", ""),
        "--study": ("", "x" * 5000, "a\nb", "../..", "s"),
        "--storage": (
            "sqlite:///:memory:",
            "sqlite://",
            "sqlite:///",
            "nosuch://x",
            "postgresql://",
            "sqlite:///file:x?mode=memory&uri=true",
            "mysql://u:p@127.0.0.1:1/d",
            "%%%",
        ),
    }.get(flag, _HOSTILE_FLAGS)
    value = rng.choice(values)

    def make(folder: Path) -> list[str]:
        argv = ["sweep", "--model", str(study.model), "--out", str(folder / "out")]
        return [*argv, "--trials", "1", "--sram-max", "256KiB", flag, value]

    shown = value if len(value) < 30 else value[:27] + "..."
    return Case("flags", seed, f"sweep {flag} {shown!r}", make)


# -------------------------------------------------------------------- study databases
_HOSTILE_TEXT: tuple = (
    "{",
    "",
    "null",
    "[]",
    "{}",
    "NaN",
    "1e999",
    '"x"',
    "[" * 5000 + "]" * 5000,
    "1" + "0" * 5000,
    '{"trials": "many"}',
    '{"hits": -1}',
)


def _rows(db: Path, sql: str) -> list[tuple]:
    # Closed at once: the last connection to close checkpoints the write-ahead log, so the
    # damage `_execute` makes is in the file itself, which is what the case copies.
    with contextlib.closing(sqlite3.connect(db)) as con:
        return con.execute(sql).fetchall()


def _execute(db: Path, sql: str, args: tuple = ()) -> None:
    con = sqlite3.connect(db)
    try:
        con.execute(sql, args)
        con.commit()
    finally:
        con.close()


def damage_database(db: Path, rng: random.Random) -> str:
    """Damage a copy of a study database one way: its bytes (a page, a few bytes, a cut), the
    file as a whole (empty, text, another program's database), dse's stored JSON, the trials'
    values, states and parameters, or a dropped table."""
    kinds = ["page", "bytes", "cut", "whole", "json", "json", "json", "row", "row", "drop"]
    kind = rng.choice(kinds)
    size = db.stat().st_size
    if kind == "page":
        data = bytearray(db.read_bytes())
        page = rng.randrange(size // 4096)
        data[page * 4096 : page * 4096 + 4096] = bytes(rng.randrange(256) for _ in range(4096))
        db.write_bytes(bytes(data))
        return f"page {page} randomised"
    if kind == "bytes":
        data = bytearray(db.read_bytes())
        for _ in range(rng.choice((1, 4, 16))):
            data[rng.randrange(size)] = rng.randrange(256)
        db.write_bytes(bytes(data))
        return "bytes flipped"
    if kind == "cut":
        cut = rng.randrange(size // 4096) * 4096
        os.truncate(db, cut)
        return f"cut at {cut}"
    if kind == "whole":
        how = rng.choice(["empty", "text", "foreign"])
        db.unlink()
        if how == "empty":
            db.write_bytes(b"")
        elif how == "text":
            db.write_text("this is not a database\n")
        else:
            _execute(db, "CREATE TABLE accounts (id INTEGER, owner TEXT)")
        return f"whole file: {how}"
    if kind == "json":
        table = rng.choice(
            ["study_user_attributes", "trial_user_attributes", "trial_system_attributes"]
        )
        rows = _rows(db, f"SELECT rowid, key, value_json FROM {table}")
        if not rows:
            return damage_database(db, rng)
        rowid, key, text = rng.choice(rows)
        if rng.random() < 0.5:
            new = rng.choice(_HOSTILE_TEXT)
        else:
            new, _ = mutated_json(json.loads(text), rng)
        _execute(db, f"UPDATE {table} SET value_json = ? WHERE rowid = ?", (new, rowid))
        return f"{table} {key} = {new[:40]!r}"
    if kind == "row":
        sql, args = rng.choice(
            [
                (
                    "UPDATE trial_values SET value = ? WHERE rowid = ?",
                    rng.choice([None, "x", 1e308]),
                ),
                ("UPDATE trial_values SET value_type = ? WHERE rowid = ?", rng.choice(["X", None])),
                (
                    "UPDATE trials SET state = ? WHERE rowid = ?",
                    rng.choice(["FOO", "RUNNING", "WAITING", "FAIL", None]),
                ),
                ("UPDATE trials SET number = ? WHERE rowid = ?", rng.choice([None, -1, 10**6])),
                (
                    "UPDATE trial_params SET param_value = ? WHERE rowid = ?",
                    rng.choice([None, 1e308, -5.0]),
                ),
                ("UPDATE trial_params SET distribution_json = ? WHERE rowid = ?", "{"),
                ("UPDATE studies SET study_name = ? WHERE rowid = ?", rng.choice(["", None])),
            ]
        )
        table = sql.split()[1]
        rowids = [r[0] for r in _rows(db, f"SELECT rowid FROM {table}")]
        if not rowids:  # e.g. no trial_params row: a study of fixed points only
            return damage_database(db, rng)
        rowid = rng.choice(rowids)
        try:
            _execute(db, sql, (args, rowid))
        except sqlite3.IntegrityError:  # the schema itself refuses it: damage another way
            return damage_database(db, rng)
        return f"{sql.split(' WHERE')[0]} ({args!r:.20}) row {rowid}"
    table = rng.choice(
        ["trial_heartbeats", "version_info", "alembic_version", "trial_values", "study_directions"]
    )
    _execute(db, f"DROP TABLE {table}")
    return f"dropped {table}"


_DB_COMMANDS = ("sweep", "worker", "export", "report")


def study_database(seed: int, study: Study) -> Case:
    rng = random.Random(seed)
    command = _DB_COMMANDS[seed % len(_DB_COMMANDS)]
    scratch = Path(os.environ.get("TMPDIR", "/tmp"))
    probe = scratch / f".fuzz-db-{os.getpid()}-{seed}.db"
    shutil.copy(study.folder / "study.db", probe)
    what = damage_database(probe, rng)
    damaged = probe.read_bytes() if probe.exists() else None
    for leftover in (probe, Path(f"{probe}-wal"), Path(f"{probe}-shm")):
        leftover.unlink(missing_ok=True)

    def make(folder: Path) -> list[str]:
        db = folder / "study.db"
        if damaged is not None:
            db.write_bytes(damaged)
        url = f"sqlite:///{db}"
        if command == "sweep":
            return [
                "sweep",
                "--model",
                str(study.model),
                "--study",
                "s",
                "--out",
                str(folder),
                "--trials",
                "1",
                "--json",
            ]
        if command == "worker":
            return ["worker", "--storage", url, "--study", "s", "--trials", "1"]
        if command == "export":
            return [
                "export",
                "--storage",
                url,
                "--study",
                "s",
                "--max-sram",
                "256KiB",
                "-o",
                str(folder / "cfg.json"),
            ]
        return ["report", "--storage", url, "--study", "s", "--out", str(folder / "report")]

    # A trial left running is retried after the grace period: shortened, as the kill tests do.
    env = {"DSE_HEARTBEAT_SECONDS": "1", "DSE_GRACE_SECONDS": "3"}
    return Case("study-db", seed, f"{command}: {what}", make, env)


# ------------------------------------------------- compiled files, graph JSON, output paths
def _compiled(study: Study) -> bytes:
    """The study's model compiled by Vela (written once beside the study)."""
    path = study.folder / "conv_vela.tflite"
    if not path.is_file():
        from ethosu.vela import vela

        work = study.folder / "vela"
        with contextlib.redirect_stdout(io.StringIO()):
            vela.main([str(study.model), "--output-dir", str(work)])
        shutil.copy(work / "conv_vela.tflite", path)
    return path.read_bytes()


def _buffer_span(data: bytes, role: bytes) -> tuple[int, int]:
    """(offset, length) in the file of the data of the first tensor named `role`."""
    model = tflite.Model.GetRootAsModel(data, 0)
    graph = model.Subgraphs(0)
    for t in range(graph.TensorsLength()):
        tensor = graph.Tensors(t)
        if tensor.Name() == role:
            values = model.Buffers(tensor.Buffer()).DataAsNumpy()
            base = np.frombuffer(data, np.uint8)
            return values.ctypes.data - base.ctypes.data, len(values)
    raise ValueError(f"no tensor {role!r}")


def compiled_stream(seed: int, study: Study) -> Case:
    """A Vela-compiled file with bytes of its command stream or constants changed, under
    `dse simulate` (exit 1, a wrong output or a finding, is an answer too)."""
    rng = random.Random(seed)
    data = bytearray(_compiled(study))
    role = rng.choice([b"ethos_u_command_stream", b"read_only"])
    start, length = _buffer_span(bytes(data), role)
    count = rng.choice([1, 2, 8, 32])
    for _ in range(count):
        data[start + rng.randrange(length)] = rng.randrange(256)
    damaged = bytes(data)

    def make(folder: Path) -> list[str]:
        (folder / "x_vela.tflite").write_bytes(damaged)
        return ["simulate", "--model", str(folder / "x_vela.tflite"), "--reference",
                str(study.model), "--samples", "2", "--json"]  # fmt: skip

    what = f"{count} bytes of {role.decode()}"
    return Case("compiled-stream", seed, what, make, allowed=(0, 1, 2, 3))


_EXTREME = (1e308, -1e308, 1e30, -1e30, 1e-300, 2**62, -(2**62), 2**31, 0, -1, 0.5)


def _graph(study: Study) -> dict:
    """The study model's graph JSON (written once beside the study)."""
    path = study.folder / "conv_graph.json"
    if not path.is_file():
        from dse.cli import main

        with contextlib.redirect_stdout(io.StringIO()):
            main(["graph", "--model", str(study.model), "-o", str(path)])
    return json.loads(path.read_text())


def graph_numbers(seed: int, study: Study) -> Case:
    """The graph JSON with a number made extreme, or two parts made to read each other."""
    rng = random.Random(seed)
    graph = copy.deepcopy(_graph(study))
    parts = graph["parts"]
    if rng.random() < 0.15 and len(parts) >= 2:
        first, second = rng.sample(parts, 2)
        first["inputs"][0], second["inputs"][0] = second["output"], first["output"]
        what = f"parts {first['id']} and {second['id']} read each other"
    else:
        numbers = [p for p in _paths(graph) if p and type(_value_at(graph, p)) in (int, float)]
        path = rng.choice(numbers)
        value = rng.choice(_EXTREME)
        holder = graph
        for key in path[:-1]:
            holder = holder[key]
        holder[path[-1]] = value
        what = f"{'.'.join(map(str, path))} = {value!r}"
    text = json.dumps(graph)
    command = rng.choice(["estimate", "propose"])

    def make(folder: Path) -> list[str]:
        (folder / "g.json").write_text(text)
        return [command, "--graph", str(folder / "g.json"), "--json"]

    return Case("graph-json", seed, f"{command}: {what}", make)


def _value_at(value, path: tuple):
    for key in path:
        value = value[key]
    return value


def _output_in_the_way(kind: str, folder: Path, study: Study) -> Path:
    target = folder / "out"
    if kind == "symlink":
        (folder / "victim").write_text("not dse's")
        target.symlink_to(folder / "victim")
    elif kind == "fifo":
        os.mkfifo(target)
    elif kind == "device" and os.geteuid() == 0:
        os.mknod(target, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # as /dev/null
    elif kind == "study":
        shutil.copy(study.folder / "study.db", target)
    else:
        target.write_text("not dse's")
    return target


_OUTPUT_KINDS = ("symlink", "fifo", "device", "study", "foreign")
_OUTPUT_COMMANDS = ("export", "graph", "cut", "compile", "report")


def output_path(seed: int, study: Study) -> Case:
    """Something this tool did not write in the way of an output: it must be refused (exit 2)
    and left as it was."""
    kind = _OUTPUT_KINDS[seed % len(_OUTPUT_KINDS)]
    command = _OUTPUT_COMMANDS[(seed // len(_OUTPUT_KINDS)) % len(_OUTPUT_COMMANDS)]

    def make(folder: Path) -> list[str]:
        target = str(_output_in_the_way(kind, folder, study))
        model = str(study.model)
        return {
            "export": ["export", "--storage", study.url, "--study", "s", "--max-sram", "256KiB",
                       "-o", target],
            "graph": ["graph", "--model", model, "-o", target],
            "cut": ["cut", "--model", model, "--samples", "2", "-o", target],
            "compile": ["compile", "--model", model, "--sram", "256KiB", "-o", target],
            "report": ["report", "--storage", study.url, "--study", "s", "--out", target],
        }[command]  # fmt: skip

    return Case("output-path", seed, f"{command} -o {kind}", make, allowed=(2,))


CATEGORIES: dict[str, Callable[..., Case]] = {
    "model-estimate": lambda seed, study: model_estimate(seed),
    "model-sweep": lambda seed, study: model_sweep(seed),
    "special-file": special_file,
    "config": config_command,
    "flags": lambda seed, study: (flag_values if seed % 4 else sweep_flags)(seed, study),
    "study-db": study_database,
    "compiled-stream": compiled_stream,
    "graph-json": graph_numbers,
    "output-path": output_path,
}


def cases(counts: dict[str, int], seed: int, study: Study) -> list[Case]:
    """`counts[c]` cases of each category `c`, from seeds derived from `seed`."""
    found = []
    for index, (category, count) in enumerate(counts.items()):
        for i in range(count):
            found.append(CATEGORIES[category](seed * 1_000_003 + index * 100_000 + i, study))
    return found
