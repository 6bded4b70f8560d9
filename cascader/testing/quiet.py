"""Console output silenced at the file-descriptor level: Vela's C++ core prints its summary
from C, past Python's sys.stdout, so redirecting the streams alone is not enough."""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Iterator


@contextlib.contextmanager
def silenced() -> Iterator[None]:
    """File descriptors 1 and 2 go to the null device, sys.stdout/stderr to buffers."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (null, *saved):
            os.close(fd)
