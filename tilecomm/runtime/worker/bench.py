"""``benchmark(compiled, args)``: timed calls of a program on ranks kept alive.

Upstream reads the chip's own timers: ``device_wall_us`` is the time the
orchestration ran on the NPU, ``host_wall_us`` the whole launch.  The CPU has
no device clock apart from the machine's, so here both are this machine's
wall clock around each call of a prepared worker (``time.perf_counter_ns``):
``device_wall_us`` is the call from dispatch to the last rank's completion,
and ``host_wall_us`` is the same span (argument sharing included in both).
They measure the CPU emulation, not a chip; compare them with each other, not
with upstream's figures.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field

from ...errors import ConfigError
from ..config import RunConfig


@dataclass
class BenchmarkStats:
    """Per-round timings of ``benchmark`` (microseconds, this machine's wall
    clock; see the module doc), warm-up rounds excluded."""

    device_wall_us: list = field(default_factory=list)
    host_wall_us: list = field(default_factory=list)
    rounds: int = 0
    warmup: int = 0

    @property
    def samples(self) -> list:
        return self.device_wall_us

    @property
    def all_zero_device(self) -> bool:
        return bool(self.device_wall_us) and all(v == 0 for v in self.device_wall_us)

    def per_round(self, metric: str = "device") -> list:
        """One value per measured round: ``"device"`` or ``"host"``."""
        if metric not in ("device", "host"):
            raise ConfigError(f"BenchmarkStats.per_round metric must be \"device\" or \"host\" "
                              f"here (the CPU keeps no per-dispatch spans); got {metric!r}",
                              code="TC427")
        return list(self.device_wall_us if metric == "device" else self.host_wall_us)

    @property
    def device_us_min(self) -> float:
        return min(self.device_wall_us)

    @property
    def device_us_max(self) -> float:
        return max(self.device_wall_us)

    @property
    def device_us_mean(self) -> float:
        return statistics.fmean(self.device_wall_us)

    @property
    def device_us_median(self) -> float:
        return statistics.median(self.device_wall_us)

    @property
    def device_us_stdev(self) -> float:
        return statistics.stdev(self.device_wall_us) if len(self.device_wall_us) > 1 else 0.0

    # upstream spells the same figures both ways
    device_wall_us_min = device_us_min
    device_wall_us_max = device_us_max
    device_wall_us_mean = device_us_mean
    device_wall_us_median = device_us_median
    device_wall_us_stdev = device_us_stdev


def _count(name, value, minimum):
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"benchmark {name} must be an int >= {minimum}, got {value!r}",
                          code="TC427")
    return value


def benchmark(compiled, args, *, rounds: int = 100, warmup: int = 3, platform=None,
              device_id=None, config: RunConfig | None = None, persistent: bool = False,
              reset_persistent_windows=None) -> BenchmarkStats:
    """Prepare ``compiled`` once, call it ``warmup`` times untimed and
    ``rounds`` times timed with ``args``; each timed call's wall time is one
    sample (see the module doc for what the figures mean here).
    ``platform`` / ``device_id`` (or ``config``, not both) must name the
    program's own platform: the CPU runs the program it was given."""
    _count("rounds", rounds, 1)
    _count("warmup", warmup, 0)
    if config is not None and (platform is not None or device_id is not None):
        raise ConfigError("benchmark takes config= or platform= / device_id=, not both",
                          code="TC427")
    want = platform if platform is not None else (config.platform if config else None)
    if want is not None and want != compiled.platform:
        raise ConfigError(f"benchmark platform {want!r} differs from the program's "
                          f"platform {compiled.platform!r}", code="TC427",
                          hint="compile the program for that platform")
    stats = BenchmarkStats(rounds=rounds, warmup=warmup)
    with compiled.prepare(persistent=persistent,
                          reset_persistent_windows=reset_persistent_windows) as worker:
        handle = worker.register(compiled)
        for _ in range(warmup):
            handle(*args, config=config)
        for _ in range(rounds):
            t0 = time.perf_counter_ns()
            handle(*args, config=config)
            us = (time.perf_counter_ns() - t0) / 1000.0
            stats.device_wall_us.append(us)
            stats.host_wall_us.append(us)
    return stats


__all__ = ["BenchmarkStats", "benchmark"]
