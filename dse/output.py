"""Output that is all or nothing and never destroys: a file is written beside its target and
renamed over it, and only over an earlier output of the same kind (a symlink, a special file,
a study database or a file of the user's in the way is refused and left alone); a folder (a
build, a report) is written into a fresh folder beside its target, which then replaces the
target whole, and only a folder of an earlier output of the same kind. A file the new output
does not hold does not linger from an old one, and output that fails half way leaves the
previous one exactly as it was.

    with staged_folder(Path(args.output), "manifest.json", OWNED) as staging:
        write_everything_into(staging)   # raise to keep the old folder
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from dse.errors import BadInput

_OWNED_CHECK_BYTES = 64 << 20  # an existing file larger than this is not taken for ours
_SQLITE_HEADER = b"SQLite format 3\x00"


def write_file(
    path: Path,
    data: bytes | str,
    owned: Callable[[bytes], bool],
    kind: str,
    flag: str = "-o",
) -> None:
    """`data` into `path`, all at once (parent folders made as needed), through a temporary
    file renamed over it. Something already at `path` is replaced only when it is a regular
    file whose bytes `owned` takes for an earlier output of this `kind` (say "config"):
    a symlink, a folder, a special file (FIFO, device, socket), a study database or any other
    file is refused with one line and left as it was."""
    path = Path(path)
    _check_replaceable(path, owned, kind, flag)
    payload = data.encode() if isinstance(data, str) else data
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    except OSError as error:
        raise BadInput(f"{flag} {path}: cannot write there ({error.strerror})") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
        os.chmod(tmp, 0o666 & ~_umask())
        _check_replaceable(path, owned, kind, flag)  # it may have appeared meanwhile
        os.replace(tmp, path)
    except OSError as error:
        Path(tmp).unlink(missing_ok=True)
        raise BadInput(f"{flag} {path}: cannot write there ({error.strerror})") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _check_replaceable(path: Path, owned: Callable[[bytes], bool], kind: str, flag: str) -> None:
    """Refuse, in one line, whatever is at `path` that `write_file` may not replace."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as error:
        raise BadInput(f"{flag} {path}: cannot read it ({error.strerror})") from None
    fix = f"give a new file name for the {kind}"
    if stat.S_ISLNK(info.st_mode):
        raise BadInput(f"{flag} {path}: is a symlink, which is left alone; {fix}")
    if stat.S_ISDIR(info.st_mode):
        raise BadInput(f"{flag} {path}: is a folder; {fix}")
    if not stat.S_ISREG(info.st_mode):
        raise BadInput(f"{flag} {path}: is not a regular file (a FIFO, device or socket); {fix}")
    content = b""
    if info.st_size <= _OWNED_CHECK_BYTES:
        try:
            content = path.read_bytes()
        except OSError as error:
            raise BadInput(f"{flag} {path}: cannot read it ({error.strerror})") from None
    if content.startswith(_SQLITE_HEADER):
        raise BadInput(
            f"{flag} {path}: is a database (a study?), which is never overwritten; {fix}"
        )
    if not owned(content):
        raise BadInput(
            f"{flag} {path}: exists and is not a {kind} this tool wrote, so it is not "
            f"overwritten; {fix} or move that file away"
        )


def json_of_format(expected: str) -> Callable[[bytes], bool]:
    """Whether bytes are a JSON object whose "format" is `expected` (this tool's JSON files)."""

    def owned(data: bytes) -> bool:
        try:
            found = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            return False
        return isinstance(found, dict) and found.get("format") == expected

    return owned


def check_folder(target: Path, marker: str, owned: re.Pattern[str], flag: str = "-o") -> None:
    """Refuse `target` unless it is absent, an empty folder, or an earlier output of the same
    kind, which may be replaced whole: a folder holding `marker` as a regular file and
    nothing but files (or symlinks, removed with the folder, never followed) whose names
    `owned` matches. A symlink, a file, or a folder holding anything else (a study
    database, a subfolder, a file of the user's) is left alone: replacing the folder would
    delete it."""
    target = Path(target)
    if target.is_symlink():
        raise BadInput(f"{flag} {target}: is a symlink; give the folder itself")
    if not target.exists():
        return
    if not target.is_dir():
        raise BadInput(f"{flag} {target}: exists and is not a folder; give a folder name")
    try:
        entries = {name: os.lstat(target / name) for name in sorted(os.listdir(target))}
    except OSError as error:
        raise BadInput(f"{flag} {target}: cannot read it ({error.strerror})") from None
    if not entries:
        return
    kept = entries.get(marker)
    if kept is None or not stat.S_ISREG(kept.st_mode):
        shown = ", ".join(list(entries)[:3]) + (", ..." if len(entries) > 3 else "")
        raise BadInput(
            f"{flag} {target}: holds {shown} but no {marker} of an earlier output, so it is "
            "not replaced; give a new or empty folder"
        )
    for name, info in entries.items():  # a link among them goes with the folder, unfollowed
        kind = stat.S_IFMT(info.st_mode)
        if kind not in (stat.S_IFREG, stat.S_IFLNK) or not owned.fullmatch(name):
            raise BadInput(
                f"{flag} {target}: holds {name}, which this command does not write, so the "
                "folder is not replaced; move it away or give another folder"
            )


@contextlib.contextmanager
def staged_folder(
    target: Path, marker: str, owned: re.Pattern[str], flag: str = "-o"
) -> Iterator[Path]:
    """A new, empty folder beside `target` to write into. When the block ends normally it
    takes `target`'s place (the old folder, if any, is removed); when the block raises, it is
    removed and `target` is untouched. `target` is checked as `check_folder` does, before the
    block and again before the swap."""
    target = Path(target)
    check_folder(target, marker, owned, flag)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.new-", dir=target.parent))
        os.chmod(staging, 0o777 & ~_umask())
    except OSError as error:
        raise BadInput(f"{flag} {target}: cannot write there ({error.strerror})") from None
    try:
        yield staging
        check_folder(target, marker, owned, flag)
        _swap(staging, target)
    except OSError as error:
        raise BadInput(f"{flag} {target}: cannot write there ({error.strerror})") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _swap(staging: Path, target: Path) -> None:
    """Put `staging` at `target`: one rename when there is nothing (or an empty folder) to
    replace; else the old folder moves aside first and is removed once the new one is in."""
    try:
        os.rename(staging, target)
        return
    except OSError as error:
        if error.errno not in (errno.ENOTEMPTY, errno.EEXIST) or not target.is_dir():
            raise
    old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))
    os.rename(target, old / target.name)
    try:
        os.rename(staging, target)
    except OSError:
        os.rename(old / target.name, target)
        raise
    finally:
        shutil.rmtree(old, ignore_errors=True)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
