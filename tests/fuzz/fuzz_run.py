"""Runs one `dse` command line in this process as the `dse` script would, with its stdout and
stderr captured at the file-descriptor level (TVM and SQLite write there directly), bounded in
time, and judges the outcome: exit 0, 2 or 3, and a refusal is exactly one line with no
traceback."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import signal
import tempfile
import time
import traceback
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from dse.cli import main

CASE_SECONDS = 60
ALLOWED_CODES = (0, 2, 3)


class _Hang(BaseException):
    """Raised by the alarm: the case ran past its time (BaseException: no handler eats it)."""


@dataclass(frozen=True)
class Outcome:
    code: int | None
    stderr: str
    seconds: float
    escaped: str | None = None  # the traceback of an exception main() let out
    hung: bool = False

    def problems(self, allowed: Sequence[int] = ALLOWED_CODES) -> list[str]:
        """What breaks the promise: a hang, an escaped exception, another exit code, or a
        refusal that is not one line on stderr."""
        if self.hung:
            return [f"no answer within {CASE_SECONDS} s"]
        if self.escaped is not None:
            return [f"exception escaped: {self.escaped.strip().splitlines()[-1]}"]
        found = []
        if self.code not in allowed:
            found.append(f"exit {self.code}")
        if "Traceback (most recent call last)" in self.stderr:
            found.append("traceback on stderr")
        lines = self.stderr.strip().splitlines()
        if self.code != 0 and len(lines) != 1:
            found.append(f"{len(lines)} lines on stderr: {lines[:3]}")
        if self.code != 0 and lines and not lines[0].startswith("dse "):
            found.append(f"stderr does not start with 'dse ': {lines[0][:80]}")
        return found


@contextlib.contextmanager
def _captured(fd: int) -> Iterator[io.BytesIO]:
    """Everything written to `fd` meanwhile, also through sys.stdout / sys.stderr."""
    out = io.BytesIO()
    with tempfile.TemporaryFile() as sink:
        saved = os.dup(fd)
        os.dup2(sink.fileno(), fd)
        text = io.TextIOWrapper(os.fdopen(os.dup(fd), "wb"), write_through=True)
        redirect = contextlib.redirect_stdout if fd == 1 else contextlib.redirect_stderr
        try:
            with redirect(text):
                yield out
        finally:
            text.close()
            os.dup2(saved, fd)
            os.close(saved)
            sink.seek(0)
            out.write(sink.read())


def run_case(argv: Sequence[str], seconds: int = CASE_SECONDS) -> Outcome:
    """`dse argv` in this process. The alarm interrupts a blocked system call too (a FIFO's
    open), so a hang is reported instead of waited out."""

    def alarm(_signum, _frame) -> None:
        raise _Hang

    previous = signal.signal(signal.SIGALRM, alarm)
    start = time.monotonic()
    code, escaped, hung = None, None, False
    with _captured(1), _captured(2) as err:
        signal.alarm(seconds)
        try:
            code = main(list(argv))
        except _Hang:
            hung = True
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 2
        except BaseException:  # the case is judged, not the fuzzer stopped
            escaped = traceback.format_exc()
        finally:
            signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)
    text = err.getvalue().decode("utf-8", "replace")
    return Outcome(code, text, time.monotonic() - start, escaped, hung)


def execute(case, root: Path, seconds: int = CASE_SECONDS) -> Outcome:
    """Run a fuzz case (`fuzz_cases.Case`) in a fresh folder under `root`, with its
    environment variables set meanwhile; the folder is removed afterwards."""
    folder = Path(tempfile.mkdtemp(prefix=f"{case.category}-{case.seed}-", dir=root))
    saved = {name: os.environ.get(name) for name in case.env}
    os.environ.update(case.env)
    try:
        return run_case(case.make(folder), seconds)
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        shutil.rmtree(folder, ignore_errors=True)
