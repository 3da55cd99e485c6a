"""The cache of planned work, under Google TorchTPU's names (``torch.tpu._get_cache_stats()`` and
its companions; docs/coming-from-torchtpu.md).

TorchTPU keeps the XLA executables it compiles for fused-eager graphs and compiled programs in a
cache keyed by the graph. torchtpu's counterpart is fused eager's plan cache (defer/Lowering.cpp):
each recorded graph is planned once (regions, fusion, memory) and the plan is reused by every
graph of the same structure; ``torch.compile(backend="tpu")`` programs replay their plans through
the same cache. The statistics count lookups of that cache; an entry's ``compilation_duration``
is the time its planning took on the host.
"""
from __future__ import annotations

import datetime
from dataclasses import dataclass

from . import _C

__all__ = [
    "CacheEntryStats", "CacheStats", "_clear_cache", "_get_cache_hits", "_get_cache_misses",
    "_get_cache_requests", "_get_cache_stats", "_get_dump_on_cache_miss", "_set_allow_cache",
    "_set_cache_only", "_set_dump_on_cache_miss",
]


@dataclass(frozen=True)
class CacheEntryStats:
    """One cached plan: reads (its planning counts as the first), planning time, last read."""
    read_count: int
    compilation_duration: datetime.timedelta
    last_read: datetime.datetime


@dataclass(frozen=True)
class CacheStats:
    num_cache_reqs: int
    num_cache_hits: int
    per_entry_stats: list[CacheEntryStats]

    @property
    def num_cache_misses(self) -> int:
        return self.num_cache_reqs - self.num_cache_hits

    def __str__(self) -> str:
        share = f" ({100.0 * self.num_cache_hits / self.num_cache_reqs:.1f}%)" \
            if self.num_cache_reqs else ""
        total = sum((e.compilation_duration for e in self.per_entry_stats), datetime.timedelta())
        return (f"num_cache_reqs={self.num_cache_reqs}\n"
                f"num_cache_hits={self.num_cache_hits}{share}\n"
                f"num_compilation_events={self.num_cache_reqs - self.num_cache_hits}\n"
                f"sum_compilation_time={total}")


def _counter(name: str) -> int:
    # (counted since the process started or torchtpu.metrics.reset())
    return int(dict(_C.metrics_snapshot("counter")).get(name, 0))


def _get_cache_hits() -> int:
    return _counter("defer.cache_hits")


def _get_cache_misses() -> int:
    return _counter("defer.cache_misses")


def _get_cache_requests() -> int:
    return _get_cache_hits() + _get_cache_misses()


def _get_cache_stats() -> CacheStats:
    entries = [
        CacheEntryStats(
            read_count=reads,
            compilation_duration=datetime.timedelta(microseconds=planning_ns / 1000),
            last_read=datetime.datetime.fromtimestamp(last_ns / 1e9),
        )
        for reads, planning_ns, last_ns in _C.defer_cache_entries()
    ]
    return CacheStats(_get_cache_requests(), _get_cache_hits(), entries)


def _clear_cache() -> None:
    """Drops every cached plan (work already enqueued keeps its own)."""
    _C.defer_clear_cache()


def _set_allow_cache(allow: bool = True) -> None:
    """``False``: every graph is planned anew and no plan is kept."""
    _C.defer_set_cache_policy(allow=bool(allow))


def _set_cache_only(cache_only: bool = True) -> None:
    """``True``: a graph whose plan is not cached raises a RuntimeError instead of being planned
    (to prove that a warmed-up program plans nothing more)."""
    _C.defer_set_cache_policy(only=bool(cache_only))


def _set_dump_on_cache_miss(enable: bool = True) -> None:
    """``True``: the region IR of every newly planned graph is printed to standard error."""
    _C.defer_set_cache_policy(dump_on_miss=bool(enable))


def _get_dump_on_cache_miss() -> bool:
    return bool(_C.defer_cache_dumps_on_miss())
