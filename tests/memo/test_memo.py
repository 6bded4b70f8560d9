"""The one memo type: its bound, its counts, and the switch that turns every cache off."""

from __future__ import annotations

import pickle

import pytest

from cascader.memo import Memo, caches_off, caches_on, forget_memos, memo_function, module_memo

pytestmark = pytest.mark.caches


def test_a_memo_forgets_its_least_recently_used_entry_past_its_bound() -> None:
    memo: Memo[str, int] = Memo("test", 2)
    memo.keep("a", 1)
    memo.keep("b", 2)
    assert memo.lookup("a") == 1  # now the most recently used
    memo.keep("c", 3)
    assert list(memo) == ["a", "c"]
    assert memo.lookup("b") is None
    assert (memo.hits, memo.misses) == (1, 1)


def test_a_function_memo_calls_once_per_arguments() -> None:
    calls = []

    @memo_function(8)
    def double(n: int) -> int | None:
        calls.append(n)
        return None if n < 0 else 2 * n

    assert [double(2), double(2), double(-1), double(-1)] == [4, 4, None, None]
    assert calls == [2, -1]  # None is remembered too
    assert double.memo.hits == 2


def test_with_caches_off_nothing_is_kept() -> None:
    calls = []

    @memo_function(8)
    def square(n: int) -> int:
        calls.append(n)
        return n * n

    table = module_memo("test table", 4)
    square(3)
    table.keep("k", 1)
    with caches_off():
        assert not caches_on()
        assert not table and not square.memo  # emptied on the way in
        assert [square(3), square(3)] == [9, 9]
        table.keep("k", 1)
        assert table.lookup("k") is None
    assert caches_on()
    assert calls == [3, 3, 3]
    square(3)
    assert calls == [3, 3, 3, 3]  # nothing kept while off


def test_an_owner_forgets_the_memos_it_reads_as_dicts() -> None:
    class Owner:
        def __init__(self) -> None:
            self.memo: Memo[int, int] = Memo("Owner.memo")
            self.other = {1: 1}  # not a memo: left as it is

    owner = Owner()
    owner.memo[1] = 2
    forget_memos(owner)
    assert not owner.memo and owner.other == {1: 1}


def test_a_memo_travels_empty() -> None:
    memo: Memo[int, int] = Memo("test", 3)
    memo.keep(1, 1)
    copy = pickle.loads(pickle.dumps(memo))
    assert isinstance(copy, Memo) and not copy and (copy.owner, copy.size) == ("test", 3)
