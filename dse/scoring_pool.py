"""The processes that score design points for `--jobs N`: the sweep's own process (which
also samples and records every trial, dse.coordinator, so one sampler sees every result)
and N-1 worker processes that only score.

Each worker keeps one evaluator per study it has scored for (its session holds the model's
front half and the cascader's proposals per option set), for the pool's lifetime. A point
goes to the process that already holds its affinity key (its study and option set, or its
whole study in a workload) while that process has room, so proposals and sessions are built
once rather than once per process.
"""

from __future__ import annotations

import json
import multiprocessing
import signal
import time
from collections.abc import Callable, Hashable
from concurrent.futures import Future, ProcessPoolExecutor, wait
from typing import NamedTuple

from cascader.estimate import Estimate
from cascader.memo import Memo, module_memo
from dse.cache_stats import CacheCounter
from dse.evaluators import take_over
from dse.gc_policy import after_evaluation, before_exit, collected_between_evaluations
from dse.objective import Evaluator
from dse.space import DesignPoint
from dse.study import StudySettings

# Per worker process: the evaluator of each study it scored for, keyed by the study's
# settings as JSON (what rebuilds the evaluator, so a pure function of it). Lives as long as
# the process, which the pool ends when the sweep ends; bounded well above a workload's few
# dozen studies.
_EVALUATORS: Memo[str, Evaluator] = module_memo("dse.scoring_pool evaluators by settings", 256)
_MAKE: Callable[[StudySettings], Evaluator] | None = None

# How many points a worker holds at once: the one it scores and the next, so it never waits
# for the sampler between two points.
DEPTH = 2


class Scored(NamedTuple):
    """A point's estimate and the seconds its evaluator took (the benchmarks' producer
    shares)."""

    estimate: Estimate
    seconds: float


def _start_worker(make_evaluator: Callable[[StudySettings], Evaluator]) -> None:
    """Ctrl-C reaches every process of the terminal; the sweep's process handles it and ends
    the pool, so a worker ignores it rather than print a traceback of its own. The worker
    collects garbage between evaluations as a sweep's process does (dse.gc_policy), until
    it leaves."""
    global _MAKE
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _MAKE = make_evaluator
    collected_between_evaluations().__enter__()


def _evaluator(settings_json: str) -> Evaluator:
    found = _EVALUATORS.lookup(settings_json)
    if found is None:
        assert _MAKE is not None, "a scoring worker starts with _start_worker"
        settings = StudySettings.from_json(json.loads(settings_json))
        found = _MAKE(settings)
        _EVALUATORS.keep(settings_json, found)
    return found


def _warm(settings_json: str, handed: bytes | None) -> None:
    if handed is not None:
        take_over(handed)
    _evaluator(settings_json)


def timed(evaluate: Evaluator, point: DesignPoint) -> Scored:
    start = time.perf_counter()
    estimate = evaluate(point)
    return Scored(estimate, time.perf_counter() - start)


def _score(settings_json: str, point: DesignPoint) -> Scored:
    scored = timed(_evaluator(settings_json), point)
    after_evaluation()
    return scored


def _cache(settings_json: str) -> dict[str, CacheCounter]:
    """The hits and misses of this worker's evaluator of the study (none if it scored none)."""
    found = _EVALUATORS.get(settings_json)
    return dict(getattr(found, "cache", {})) if found is not None else {}


def _leave() -> None:
    before_exit()


def settings_key(settings: StudySettings) -> str:
    return json.dumps(settings.to_json(), sort_keys=True)


class ScoringPool:
    """This process and `jobs - 1` single-process executors, so the pool (not the OS) decides
    which process scores which point: points of one affinity key (see the module docstring)
    stay with one scorer while it has room. This process scores a point at submit (it holds one at
    a time: the points it scores are the sweep's pauses in sampling), a worker holds DEPTH.

    `here` gives this process's evaluator of a study (the one that checked the model, so it
    is not built twice); `make_evaluator` must be a module-level function (workers rebuild
    each study's evaluator from its settings)."""

    def __init__(
        self,
        jobs: int,
        make_evaluator: Callable[[StudySettings], Evaluator],
        here: Callable[[StudySettings], Evaluator],
    ) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._here = here
        self._workers = [
            ProcessPoolExecutor(
                1, mp_context=ctx, initializer=_start_worker, initargs=(make_evaluator,)
            )
            for _ in range(jobs - 1)
        ]
        self._room = [1] + [DEPTH] * len(self._workers)  # slot 0 is this process
        self._load = [0] * len(self._room)
        self._owner: dict[tuple[str, Hashable], int] = {}
        self._slot_of: dict[Future, int] = {}
        self._scored_here: set[str] = set()

    def __enter__(self) -> ScoringPool:
        return self

    def __exit__(self, kind, _value, _traceback) -> None:
        self.close(cancel=kind is not None)

    def warm(self, settings: StudySettings, handed: bytes | None = None) -> None:
        """Have every worker build its evaluator of the study now (importing the compiler
        and reading the model take seconds), while this process does something else;
        `handed` (`dse.evaluators.handover`): the model this process prepared already, which
        the workers then take over instead of preparing it again."""
        for worker in self._workers:
            worker.submit(_warm, settings_key(settings), handed)

    def has_room(self) -> bool:
        return any(load < room for load, room in zip(self._load, self._room, strict=True))

    def has_room_for(self, settings: StudySettings, affinity: Hashable) -> bool:
        """Whether the scorer owning `affinity` of the study (any, when none owns it yet)
        has room."""
        slot = self._owner.get((settings_key(settings), affinity))
        return self.has_room() if slot is None else self._load[slot] < self._room[slot]

    def submit(self, settings: StudySettings, point: DesignPoint, affinity: Hashable) -> Future:
        """Score `point` on the scorer that owns `affinity` if it has room, else on the one
        with most room left (which then owns it). Call only while `has_room()`."""
        key = (settings_key(settings), affinity)
        slot = self._owner.get(key)
        if slot is None or self._load[slot] >= self._room[slot]:
            slot = max(range(len(self._room)), key=lambda s: self._room[s] - self._load[s])
            self._owner[key] = slot
        self._load[slot] += 1
        if slot:
            future = self._workers[slot - 1].submit(_score, key[0], point)
        else:
            future = Future()
            self._scored_here.add(key[0])
            try:
                future.set_result(timed(self._here(settings), point))
            except Exception as error:  # the caller gets it from the future, as from a worker
                future.set_exception(error)
            after_evaluation()
        self._slot_of[future] = slot
        return future

    def score_all(self, settings: StudySettings, points: list[DesignPoint]) -> list[Estimate]:
        """Score `points` of one study across the pool (beyond its room: the workers queue
        them) and wait for every one; in order."""
        futures = [self.submit(settings, point, ("probe", i)) for i, point in enumerate(points)]
        wait(futures)
        for future in futures:
            self.taken(future)
        return [future.result().estimate for future in futures]

    def taken(self, future: Future) -> None:
        """The caller has the finished `future`'s result: its scorer has room again."""
        self._load[self._slot_of.pop(future)] -= 1

    def cache(self, settings: StudySettings) -> dict[str, CacheCounter]:
        """The study's cache counts summed over its evaluators in every process."""
        total: dict[str, CacheCounter] = {}
        key = settings_key(settings)
        counts = [worker.submit(_cache, key).result() for worker in self._workers]
        if key in self._scored_here:
            counts.append(dict(getattr(self._here(settings), "cache", {})))
        for found in counts:
            for name, counter in found.items():
                into = total.setdefault(name, CacheCounter())
                into.hits += counter.hits
                into.misses += counter.misses
        return total

    def close(self, cancel: bool = False) -> None:
        """End the workers: after their points (they leave as the `dse` script does), or at
        once, dropping what they have not started (Ctrl-C)."""
        for worker in self._workers:
            if not cancel:
                worker.submit(_leave).result()
            worker.shutdown(wait=not cancel, cancel_futures=cancel)
