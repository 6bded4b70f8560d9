"""Weight-stream decoding through `mlw_worker`, one long-lived child process, with a cache.

`decode_stream(data)` returns the int16 weights of a stream, or None when the decoder cannot
finish it (the worker died; the next call starts a new one). Identical streams (the same
weights copied for every stripe) are decoded once.
"""

from __future__ import annotations

import atexit
import struct
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np

from cascader.memo import memo_function
from cascader.simulator.errors import SimulationError

_WORKER = Path(__file__).with_name("mlw_worker.py")


class _Worker:
    def __init__(self) -> None:
        self._process: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        atexit.register(self.close)

    def _start(self) -> subprocess.Popen[bytes]:
        if self._process is None or self._process.poll() is not None:
            code = f"import runpy; runpy.run_path({str(_WORKER)!r}, run_name='__main__')"
            self._process = subprocess.Popen(
                [sys.executable, "-u", "-c", code],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
        return self._process

    def decode(self, data: bytes) -> np.ndarray | None:
        with self._lock:
            process = self._start()
            assert process.stdin is not None and process.stdout is not None
            try:
                process.stdin.write(struct.pack("<I", len(data)) + data)
                process.stdin.flush()
                header = process.stdout.read(4)
            except BrokenPipeError:
                header = b""
            if len(header) < 4:
                status = process.wait()
                self._process = None
                if status != 1:  # the codec's own exit on a stream it cannot finish
                    raise SimulationError(f"weight decoder worker failed (exit {status})")
                return None
            (count,) = struct.unpack("<I", header)
            payload = process.stdout.read(2 * count)
            return np.frombuffer(payload, np.int16).astype(np.int64)

    def close(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        if process.stdin is not None:
            process.stdin.close()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()


_worker = _Worker()


@memo_function(1024)
def _decode_cached(data: bytes) -> np.ndarray | None:
    if not data:
        return None
    values = _worker.decode(data)
    if values is not None:
        values.setflags(write=False)
    return values


def decode_stream(data: bytes) -> np.ndarray | None:
    """The weights of an encoded stream (int64, read-only), None if it does not decode."""
    return _decode_cached(bytes(data))
