"""Files the user names (configs, graphs), read only when they are regular files of bounded
size: a FIFO would block for ever, /dev/zero would never end, a huge file would fill memory.
Models are read by `cascader.frontend.tflite_check.read_model`, vela.ini files by
`cascader.ethosu.vela_arch`, with the same rules."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from dse.errors import BadInput

MAX_CONFIG_BYTES = 1 << 20  # an exported config is a few KiB
MAX_GRAPH_BYTES = 256 << 20  # MobileNetV2's graph JSON is 2 MiB
GRAPH_HINT = "give a graph JSON written by `dse graph`"


def _open_regular(path: Path, limit: int, what: str, hint: str) -> int:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise BadInput(f"{what} {path} not found; {hint}") from None
    except OSError as error:
        raise BadInput(f"{what} {path} cannot be read ({error.strerror})") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise BadInput(f"{what} {path} is not a regular file; {hint}")
    if info.st_size > limit:
        os.close(fd)
        raise BadInput(
            f"{what} {path} has {info.st_size} bytes, more than the {limit >> 10} KiB one may "
            f"have; {hint}"
        )
    return fd


def read_input(path: str | Path, limit: int, what: str, hint: str) -> bytes:
    """The bytes of the regular file `path` (at most `limit`); BadInput names `what` the file
    should be and `hint` says what to give instead."""
    path = Path(path)
    with os.fdopen(_open_regular(path, limit, what, hint), "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise BadInput(f"{what} {path} is over {limit >> 10} KiB; {hint}")
    return data


def check_graph(path: str | Path) -> Path:
    """`path`, checked to be a graph file the graph reader can take: a regular file of at
    most MAX_GRAPH_BYTES of UTF-8 text (it parses and checks the rest)."""
    try:
        read_input(path, MAX_GRAPH_BYTES, "graph file", GRAPH_HINT).decode("utf-8")
    except UnicodeDecodeError:
        raise BadInput(f"graph file {path} is not text; {GRAPH_HINT}") from None
    return Path(path)


def check_input(path: str | Path, limit: int, what: str, hint: str) -> Path:
    """`path`, checked to be a regular file of at most `limit` bytes (for a library that
    opens the file itself)."""
    path = Path(path)
    os.close(_open_regular(path, limit, what, hint))
    return path
