"""Cache hit counting: evaluators report the real hits and misses of their caches (the
cascader's proposals, proposal scores, scored points); each run stores its counts in the
study, the report sums them."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

import optuna

from dse.tickets import worker_id

CACHE_PREFIX = "dse.cache."


@dataclass
class CacheCounter:
    hits: int = 0
    misses: int = 0

    def to_json(self) -> dict[str, int]:
        return asdict(self)


def record(study: optuna.Study, counters: dict[str, CacheCounter]) -> None:
    """Store one run's counts under a key of its own (runs in parallel never collide)."""
    if any(c.hits + c.misses for c in counters.values()):
        key = f"{CACHE_PREFIX}{time.time_ns()}.{worker_id()}"
        study.set_user_attr(key, {name: c.to_json() for name, c in counters.items()})


def study_cache_stats(study: optuna.Study) -> dict[str, dict[str, int]]:
    """Hits and misses per cache, summed over every run on the study."""
    total: dict[str, dict[str, int]] = {}
    for key, value in study.user_attrs.items():
        if key.startswith(CACHE_PREFIX):
            for name, counts in value.items():
                into = total.setdefault(name, {"hits": 0, "misses": 0})
                into["hits"] += counts["hits"]
                into["misses"] += counts["misses"]
    return total


def describe(stats: dict[str, dict[str, int]]) -> str:
    """'proposals 9/10 hits (90%), scored points 0/10 hits (0%)'."""
    labels = {"proposals": "proposals", "scores": "proposal scores", "results": "scored points",
              "vela compiles": "Vela compiles"}  # fmt: skip
    parts = []
    for name, c in stats.items():
        lookups = c["hits"] + c["misses"]
        if lookups:
            parts.append(
                f"{labels.get(name, name)} {c['hits']}/{lookups} hits "
                f"({100 * c['hits'] / lookups:.0f}%)"
            )
    return ", ".join(parts)
