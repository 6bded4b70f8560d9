"""Database URLs as dse opens them: a connect and a statement timeout on every one (a server
that accepts connections and never answers fails the command instead of hanging it),
passwords masked in everything printed, a SQLite file checked before Optuna touches it (a
damaged file, an empty one or another program's database is refused, not turned into a new
study), and schema creation serialised between processes that open one new storage at once.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path

import sqlalchemy
from sqlalchemy.engine import URL, make_url

from dse.errors import BadInput

CONNECT_SECONDS = 10
STATEMENT_SECONDS = 60
SQLITE_LOCK_SECONDS = 120  # worker processes share a file: wait for its lock, not fail at 5 s
_OPTUNA_TABLES = {"studies", "version_info"}
_SCHEMA_LOCK = 0x64736521  # the PostgreSQL advisory lock dse holds while creating tables


def shown_url(url: str) -> str:
    """A storage URL safe to print or write into files: any password masked (an unparsable
    one is cut to its scheme: where its password is cannot be known)."""
    try:
        parsed = make_url(url)
    except sqlalchemy.exc.ArgumentError:
        return url.split(":", 1)[0] + ":..."
    if parsed.get_backend_name() == "sqlite":
        return url  # no password; rendering would escape the path (`%3Amemory%3A`)
    return parsed.render_as_string(hide_password=True)


def _parsed(url: str) -> URL:
    try:
        return make_url(url)
    except sqlalchemy.exc.ArgumentError:
        raise BadInput(
            f"cannot open storage {shown_url(url)!r}: not a database URL; give e.g. "
            "sqlite:///path/study.db or postgresql+psycopg2://user@host/db"
        ) from None


def engine_kwargs(url: str) -> dict:
    """SQLAlchemy engine arguments that bound every wait on the database: connecting, each
    statement and (SQLite) a lock held by another process."""
    parsed = _parsed(url)
    backend = parsed.get_backend_name()
    try:
        driver = parsed.get_driver_name()  # the dialect's default driver, when none is named
    except sqlalchemy.exc.NoSuchModuleError:
        driver = None
    if backend == "sqlite":
        return {"connect_args": {"timeout": SQLITE_LOCK_SECONDS}}
    if backend == "postgresql" and driver in ("psycopg2", "psycopg"):
        return {
            "connect_args": {
                "connect_timeout": CONNECT_SECONDS,
                "options": f"-c statement_timeout={STATEMENT_SECONDS * 1000}",
                "keepalives": 1,
                "keepalives_idle": 30,
                "keepalives_interval": 10,
                "keepalives_count": 3,
            }
        }
    if backend == "postgresql" and driver == "pg8000":
        return {"connect_args": {"timeout": STATEMENT_SECONDS}}
    if backend == "mysql" and driver in ("pymysql", "mysqldb"):
        seconds = {"read_timeout": STATEMENT_SECONDS, "write_timeout": STATEMENT_SECONDS}
        return {"connect_args": {"connect_timeout": CONNECT_SECONDS, **seconds}}
    raise BadInput(
        f"cannot open storage {shown_url(url)!r}: dse bounds its waits on sqlite, postgresql "
        "(psycopg2, psycopg, pg8000) and mysql (pymysql, mysqldb) URLs only; use one of those"
    )


def sqlite_path(url: str) -> Path | None:
    """The database file of a SQLite URL (None for another backend)."""
    parsed = _parsed(url)
    if parsed.get_backend_name() != "sqlite":
        return None
    if not parsed.database or parsed.database == ":memory:" or parsed.database.startswith("file:"):
        raise BadInput(
            f"cannot open storage {shown_url(url)!r}: an in-memory or URI SQLite database "
            "keeps nothing after the command; give a file, e.g. sqlite:///path/study.db"
        )
    return Path(parsed.database)


def check_sqlite_file(path: Path, create: bool) -> None:
    """Refuse a SQLite study file that is missing (unless it may be created), not a regular
    file, empty, not a SQLite database, damaged, or another program's database."""
    where = f"study database {path}"
    try:
        info = os.stat(path)
    except FileNotFoundError:
        if create:
            return
        raise BadInput(f"no {where}; run `dse sweep` first, or check --storage") from None
    except OSError as error:
        raise BadInput(f"{where} cannot be read ({error.strerror})") from None
    if not stat.S_ISREG(info.st_mode):
        raise BadInput(f"{where} is not a regular file; give a .db file")
    if info.st_size == 0:
        raise BadInput(f"{where} is empty, not a study; remove it to start a new study there")
    # Read through SQLite only: open() and close() of the file by any other means would drop
    # the locks SQLite holds on it in this process (POSIX locks are per process), and a
    # writer elsewhere could then damage it.
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
            db.execute(f"PRAGMA busy_timeout = {SQLITE_LOCK_SECONDS * 1000}")
            problems = [row[0] for row in db.execute("PRAGMA quick_check(1)")]
            tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
    except sqlite3.DatabaseError as error:
        full = full_disk(path)
        if full is not None:
            raise full from None
        if "not a database" in str(error):
            raise BadInput(
                f"{where} is not a SQLite database; give another --out or --storage"
            ) from None
        raise BadInput(
            f"{where} is damaged ({error}); restore it from a copy or start a new study"
        ) from None
    if problems != ["ok"]:
        full = full_disk(path)
        if full is not None:
            raise full from None
        raise BadInput(
            f"{where} is damaged ({problems[0][:120]}); restore it from a copy or start a new study"
        )
    foreign = {t for t in tables if not t.startswith("sqlite_")}
    if foreign and not foreign >= _OPTUNA_TABLES:
        shown = ", ".join(sorted(foreign)[:4])
        raise BadInput(
            f"{where} is another program's database (tables {shown}), not a study; give "
            "another --out or --storage"
        )


@contextlib.contextmanager
def schema_lock(url: str, engine: sqlalchemy.engine.Engine | None = None) -> Iterator[None]:
    """Held while Optuna creates its tables in a new storage, so two processes opening it at
    once do not both create them (one would fail: "table already exists"). A SQLite file's
    folder is locked; a PostgreSQL server gets an advisory lock."""
    path = sqlite_path(url)
    if path is not None:
        try:
            folder = os.open(path.parent, os.O_RDONLY)
        except FileNotFoundError:
            folder = None
        if folder is None:  # no folder, so no file another process is making
            yield
            return
        try:
            fcntl.flock(folder, fcntl.LOCK_EX)
            yield
        finally:
            os.close(folder)
        return
    if engine is None or engine.dialect.name != "postgresql":
        yield
        return
    with engine.connect() as connection:
        connection.execute(sqlalchemy.text(f"SELECT pg_advisory_lock({_SCHEMA_LOCK})"))
        try:
            yield
        finally:
            connection.execute(sqlalchemy.text(f"SELECT pg_advisory_unlock({_SCHEMA_LOCK})"))
            connection.commit()


def _server(url: str) -> str:
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        return f"file {parsed.database}"
    port = f":{parsed.port}" if parsed.port else ""
    return f"server {parsed.host or 'localhost'}{port}"


def _reason(error: BaseException, url: str) -> str:
    """The first line of what the driver said, with the URL's password masked if quoted."""
    while error.__cause__ is not None and not str(error):
        error = error.__cause__
    found = getattr(error, "orig", None) or error
    text = (str(found).strip().splitlines() or [type(found).__name__])[0]
    password = make_url(url).password
    if password:
        text = text.replace(str(password), "***")
    return " ".join(text.split())[:200]


def open_failure(error: BaseException, url: str) -> BadInput:
    """One line for a storage that could not be opened, naming the server."""
    missing = error if isinstance(error, ImportError) else error.__cause__
    if isinstance(missing, ImportError):
        return BadInput(
            f"cannot open storage {shown_url(url)!r}: its database driver is not installed "
            f"({_reason(missing, url)}); install it, or name an installed driver, e.g. "
            "postgresql+psycopg2://"
        )
    return BadInput(
        f"cannot open storage {shown_url(url)!r} ({_reason(error, url)}); check the URL and "
        f"that the database {_server(url)} is running and answering"
    )


# Free bytes below which a SQLite I/O failure is taken for a full disk (SQLite reports ENOSPC
# as "disk I/O error" where it writes its journal).
_FULL_DISK_BYTES = 1 << 20


def full_disk(path: Path) -> BadInput | None:
    """The one line for a SQLite study whose disk is full, or None when it has room."""
    try:
        free = shutil.disk_usage(path.parent if path.parent.exists() else Path.cwd()).free
    except OSError:
        return None
    if free >= _FULL_DISK_BYTES:
        return None
    return BadInput(
        f"the disk holding {path} is full ({free} bytes free); free some space and run the "
        "command again (the study as stored is kept)"
    )


def run_failure(error: BaseException, url: str) -> BadInput:
    """One line for a storage that failed while the command ran: what is stored stays."""
    path = sqlite_path(url)
    full = full_disk(path) if path is not None else None
    if full is not None:
        return full
    return BadInput(
        f"the study's database failed ({_reason(error, url)}) at {shown_url(url)}; check the "
        f"database {_server(url)} and run the command again (trials already stored are kept)"
    )
