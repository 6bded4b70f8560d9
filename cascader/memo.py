"""The one memo type of cascader-dse, and the one switch that turns every cache off.

Every cache is a `Memo`: its key and value types are its type parameters, it has a bound
(`size`; None when its owner's life bounds it), an owner (the object it lives on, or the
pure function whose arguments it keys) and counts its hits and misses. ARCHITECTURE.md lists
each one with why it exists. A pure function's memo is `memo_function`, in place of
`functools.lru_cache`.

The switch: `DSE_CACHES=off` in the environment (read here, once) or `caches_off()` (tests)
makes every memo forget, so a run with the switch off shows that no cache changes a result.
"""

from __future__ import annotations

import functools
import os
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Generic, ParamSpec, TypeVar

__all__ = [
    "Memo",
    "caches_off",
    "caches_on",
    "clear_module_memos",
    "forget_memos",
    "memo_function",
    "module_memo",
]

K = TypeVar("K")
V = TypeVar("V")
P = ParamSpec("P")
R = TypeVar("R")

_OFF_VALUES = ("off", "0", "false", "no")
_ABSENT = object()  # what a lookup finds when nothing is kept (None may be a kept value)
_KEYWORDS = object()  # between a call's positional and keyword arguments in its key


class _Switch:
    """Whether memos keep what they are given: one flag, read by every memo."""

    on: bool = os.environ.get("DSE_CACHES", "on").strip().lower() not in _OFF_VALUES


# The memos of pure functions and of modules (not owned by an object), so that `caches_off`
# can empty them and tests can start cold.
_MODULE_MEMOS: list[Memo] = []


def caches_on() -> bool:
    """Whether caches keep entries (False under `DSE_CACHES=off` or inside `caches_off`)."""
    return _Switch.on


@contextmanager
def caches_off() -> Iterator[None]:
    """Every memo forgets inside this block: module memos are emptied, no `lookup` finds
    anything nor `keep` keeps it, and each run empties the memos it reads as dicts."""
    was = _Switch.on
    _Switch.on = False
    clear_module_memos()
    try:
        yield
    finally:
        _Switch.on = was


def clear_module_memos() -> None:
    """Empty every module-level and pure-function memo (tests that time or count a cold run)."""
    for memo in _MODULE_MEMOS:
        memo.clear()


class Memo(OrderedDict[K, V], Generic[K, V]):
    """A cache of values of type V by keys of type K, owned by `owner`, holding at most
    `size` entries (least recently used forgotten first; None: as many as its owner's life
    brings). `lookup` and `keep` count hits and misses, keep the bound and obey the switch.
    An owner on a hot path may read an unbounded memo as a dict (`get`, `[]=`), uncounted,
    as its working table too; with the switch off, that owner empties it at the start of
    each run (`forget_memos`), so every run starts cold."""

    def __init__(self, owner: str, size: int | None = None) -> None:
        super().__init__()
        self.owner = owner
        self.size = size
        self.hits = 0
        self.misses = 0

    def __reduce__(self) -> tuple:
        """A memo travels empty (pickled to a worker, deep-copied): a cache belongs to the
        process and the object that filled it."""
        return (Memo, (self.owner, self.size))

    def lookup(self, key: K, default: Any = None) -> V | Any:
        """The entry of `key` (`default` if absent), now the most recently used."""
        if not _Switch.on:
            self.misses += 1
            return default
        found = self.get(key, _ABSENT)
        if found is _ABSENT:
            self.misses += 1
            return default
        self.hits += 1
        if self.size is not None:
            self.move_to_end(key)
        return found

    def keep(self, key: K, value: V) -> None:
        """Store `value` under `key`, forgetting the least recently used past the bound."""
        if not _Switch.on:
            return
        self[key] = value
        if self.size is not None:
            while len(self) > self.size:
                self.popitem(last=False)

    def __repr__(self) -> str:
        bound = "unbounded" if self.size is None else f"at most {self.size}"
        return (f"Memo({self.owner}: {len(self)} entries, {bound}, {self.hits} hits, "
                f"{self.misses} misses)")  # fmt: skip


def forget_memos(owner: object) -> None:
    """Empty the memos `owner` holds as attributes: what a run does first, with the switch
    off, to the objects whose memos it reads as dicts."""
    for value in vars(owner).values():
        if isinstance(value, Memo):
            value.clear()


def memo_function(size: int | None) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """A pure function's memo of its (hashable) arguments, bounded by `size`: what
    `functools.lru_cache` gave, as a `Memo` the switch reaches. The wrapped function's
    `memo` attribute is its Memo."""

    def wrap(function: Callable[P, R]) -> Callable[P, R]:
        memo: Memo[Any, R] = module_memo(f"{function.__module__}.{function.__qualname__}", size)
        get, keep, move_to_end = memo.get, memo.keep, memo.move_to_end
        bounded = size is not None

        @functools.wraps(function)
        def call(*args: P.args, **kwargs: P.kwargs) -> R:
            key = (*args, _KEYWORDS, *kwargs.items()) if kwargs else args
            if _Switch.on:
                found = get(key, _ABSENT)
                if found is not _ABSENT:
                    memo.hits += 1
                    if bounded:
                        move_to_end(key)
                    return found
            memo.misses += 1
            found = function(*args, **kwargs)
            keep(key, found)
            return found

        call.memo = memo  # type: ignore[attr-defined]
        return call

    return wrap


def module_memo(owner: str, size: int | None) -> Memo:
    """A memo at module level (a pure function's helper table), read through `lookup` and
    `keep` only; `caches_off` empties it."""
    memo: Memo = Memo(owner, size)
    _MODULE_MEMOS.append(memo)
    return memo
