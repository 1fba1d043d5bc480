"""All runtime knobs: one frozen, validated dataclass passed explicitly.

Environment variables are read in exactly one place (``from_env``) so two
runtimes with different settings can live in one process."""
from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from typing import NamedTuple

from ..errors import ConfigError, user_span
from ..transport import TRANSPORTS


@dataclass(frozen=True)
class Platform:
    """Limits of a target chip, enforced while still executing on the CPU."""

    name: str
    bf16_atomic_add: bool
    aiv_cores: int
    # asynchronous puts (pld.tensor.put_async): upstream provisions the DMA
    # engine's workspace only on a2a3 hardware; its simulators and a5 refuse
    # a kernel that builds a session
    async_dma: bool = True


TRANSPORT_NAMES = tuple(TRANSPORTS)
# transports whose ranks are the processes of an MPI job (mpiexec), not forked:
# every process runs the caller's script
MPI_TRANSPORT = "mpi"
# RunConfig.transport name -> "module:Class" of the backend that runs it
# (``controller/backend.py``), imported only when a run selects it
BACKENDS = {**{name: "tilecomm.runtime.controller.backend:ForkBackend" for name in TRANSPORT_NAMES},
            MPI_TRANSPORT: "tilecomm.backends.mpi.spmd:MpiBackend"}
ALL_TRANSPORTS = tuple(BACKENDS)
# set in every process that an MPI launcher (MPICH / Intel MPI, Open MPI, PMIx) started
MPI_LAUNCHER_VARS = ("PMI_RANK", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "MPI_LOCALRANKID")
# cores of a rank's scheduler on the "cpu" platform: enough that independent
# tasks visibly overlap (and a missing dependency races), few enough that a
# 2-core machine running several ranks is not flooded with threads
CPU_CORES = 4
MAX_CORES = 256
# what the protocol lint does at compile time (verify/lint.py reads the findings)
LINT_MODES = ("warn", "error", "off")
# the lint runs every rank's orchestration abstractly, so its cost grows with
# the square of the world for an all-to-all protocol (0.9 s at 128 ranks):
# unasked, it checks programs up to this many ranks ("warn"/"error" given
# explicitly, or `tilecomm check --ranks N`, check any world)
LINT_DEFAULT_MAX_WORLD = 32

PLATFORMS = {
    "cpu": Platform("cpu", bf16_atomic_add=True, aiv_cores=0),
    "a2a3": Platform("a2a3", bf16_atomic_add=True, aiv_cores=48),
    "a2a3sim": Platform("a2a3sim", bf16_atomic_add=True, aiv_cores=48, async_dma=False),
    "a5": Platform("a5", bf16_atomic_add=False, aiv_cores=36, async_dma=False),
    "a5sim": Platform("a5sim", bf16_atomic_add=False, aiv_cores=36, async_dma=False),
}


@dataclass(frozen=True)
class DistributedConfig:
    """Which devices the program runs on: rank r is device ``device_ids[r]``."""

    device_ids: tuple = (0,)
    num_sub_workers: int = 0
    runtime: str = "tensormap_and_ringbuffer"
    aicpu_thread_num: int = 0

    def __post_init__(self):
        ids = self.device_ids
        if isinstance(ids, int) or not hasattr(ids, "__iter__"):
            raise ConfigError(f"DistributedConfig.device_ids must be a list of device indices, "
                              f"got {ids!r}", code="TC401")
        ids = tuple(ids)
        object.__setattr__(self, "device_ids", ids)
        if not ids:
            raise ConfigError("DistributedConfig.device_ids must not be empty", code="TC401")
        if any(not isinstance(i, int) or isinstance(i, bool) or i < 0 for i in ids):
            raise ConfigError(f"DistributedConfig.device_ids must be non-negative device indices, "
                              f"got {list(ids)}", code="TC401")
        if len(set(ids)) != len(ids):
            raise ConfigError(f"DistributedConfig.device_ids must be distinct, got {list(ids)}",
                              code="TC401")
        if self.num_sub_workers < 0:
            raise ConfigError(f"DistributedConfig.num_sub_workers must be non-negative, got "
                              f"{self.num_sub_workers}", code="TC401")
        if self.aicpu_thread_num < 0 or self.aicpu_thread_num == 1:
            raise ConfigError(f"DistributedConfig.aicpu_thread_num must be 0 (architecture "
                              f"default) or at least 2, got {self.aicpu_thread_num}", code="TC401")

    @property
    def world_size(self) -> int:
        return len(self.device_ids)


@dataclass(frozen=True)
class RankKnobs:
    """What a rank reads of a run's ``RunConfig`` while it runs.  The ranks
    start with their launch config's; a run whose config sets others sends
    them ahead of its first dispatch (``messages.BeginRun``), so a per-call
    config of a prepared worker applies on the ranks too."""

    wait_timeout_s: float
    spin_iters: int
    cores: int
    task_window: int | None



class CallChecks(NamedTuple):
    """``RunConfig.checks()``: ``races`` and ``poison`` as ``races_enabled`` /
    ``poison_enabled`` say, ``trace_dir`` as ``trace_dir``."""

    races: bool
    poison: bool
    trace_dir: str | None

@dataclass(frozen=True)
class RunConfig:
    """How a program is compiled and run.

    platform           "cpu" (default) or a chip profile ("a2a3", "a5", and their
                       "*sim" aliases) whose limits are enforced at compile time.
    distributed_config which devices run the program.
    deadlock_timeout_s quiescence must persist this long before a deadlock is
                       reported (the report itself comes within ~2 s).
    wait_timeout_s     a single wait still blocked after this long fails its rank
                       (0 = never; deadlocks are reported without it).
    spin_iters         busy-poll iterations before a wait yields, then sleeps.
    cache_dir          where lowered Python sources are kept for stepping through.
    cores              cores (task threads) of each rank's scheduler: None (default)
                       is the chip profile's AIV count, or CPU_CORES for "cpu";
                       only the "cpu" platform accepts another value.
    transport          how ranks reach each other's windows: "shm" (shared memory,
                       zero-copy) or "copy" (every remote byte moves through an
                       explicit request, as over a network), or "mpi" (MPI-3
                       one-sided RMA; the ranks are the processes of an mpiexec
                       job).  None (default): $TILECOMM_TRANSPORT, else "mpi"
                       when the process was started by an MPI launcher, else "shm".
    detect_races       check the call for data races (accesses to one window copy
                       that no notify / wait, collective or task dependency
                       orders) and raise ``DataRaceError`` after writing the
                       results back.  None (default): $TILECOMM_DETECT_RACES=1
                       turns it on.  Runs on every transport whose ranks share one
                       machine (on MPI: every process on one node).
    lint               the protocol lint (TC7xx) run when a program is compiled:
                       "warn" shows each finding once per source line as a
                       ``TilecommWarning``, "error" raises them as a ``LintError``
                       before any rank starts, "off" skips the lint.  None
                       (default): $TILECOMM_LINT, else "warn" for programs of
                       up to LINT_DEFAULT_MAX_WORLD (32) ranks and "off" above.
    poison_windows     fill every data window and every ``pl.Out`` tensor of the
                       call with a sentinel before it runs (NaN for floats, the
                       byte 0xA5 repeated for integers; ``POISON_BYTE``), so a
                       read of elements nobody wrote shows up instead of reading
                       zeros.  INT32 windows are signal windows and start at 0 as
                       always.  None (default): $TILECOMM_POISON_WINDOWS=1 turns
                       it on.  The shm and copy transports.
    """

    platform: str = "cpu"
    distributed_config: DistributedConfig | None = None
    deadlock_timeout_s: float = 0.3
    wait_timeout_s: float = 0.0
    spin_iters: int = 2000
    cache_dir: str | None = None
    transport: str | None = None
    cores: int | None = None
    # ring sizing (upstream: per scope depth, a scalar for all four or a list
    # of 4).  ring_task_window is each rank's limit of tasks in flight (the
    # scheduler's; depth 0 of a list); ring_heap / ring_dep_pool size upstream
    # buffers that have no counterpart here: checked, without effect
    ring_task_window: int | tuple | None = None
    ring_heap: int | tuple | None = None
    ring_dep_pool: int | tuple | None = None
    # run artefacts (reference 5.1), per dispatch: see runtime/rank/artefacts.py
    enable_chip_swimlane: int | bool = 0
    enable_dump_args: int = 0
    enable_pmu: int = 0
    enable_dep_gen: bool = False
    enable_scope_stats: bool = False
    enable_l2_swimlane: int | bool | None = None      # deprecated name of enable_chip_swimlane
    detect_races: bool | None = None
    lint: str | None = None
    poison_windows: bool | None = None

    def __post_init__(self):
        _check_dfx(self)
        if self.platform not in PLATFORMS:
            raise ConfigError(f"RunConfig.platform must be one of {sorted(PLATFORMS)}, got "
                              f"{self.platform!r}", code="TC402")
        if self.distributed_config is not None and not isinstance(self.distributed_config,
                                                                  DistributedConfig):
            raise ConfigError("RunConfig.distributed_config must be a DistributedConfig",
                              code="TC402")
        # checks are written as "v is good" so NaN fails them (NaN would disable the timeouts)
        for name, ok, want in (("deadlock_timeout_s", lambda v: v > 0, "a number > 0"),
                               ("wait_timeout_s", lambda v: v >= 0, "a number >= 0 (0 = never)"),
                               ("spin_iters", lambda v: isinstance(v, int) and v >= 0,
                                "an int >= 0")):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not ok(v):
                raise ConfigError(f"RunConfig.{name} must be {want}, got {v!r}", code="TC402")

        if self.cores is not None:
            c = self.cores
            if isinstance(c, bool) or not isinstance(c, int) or not 1 <= c <= MAX_CORES:
                raise ConfigError(f"RunConfig.cores must be an int in [1, {MAX_CORES}], got {c!r}",
                                  code="TC402")
            fixed = PLATFORMS[self.platform].aiv_cores
            if self.platform != "cpu" and c != fixed:
                raise ConfigError(f"RunConfig.cores is fixed by the {self.platform!r} profile "
                                  f"({fixed} AIV cores); got {c}", code="TC402",
                                  hint="only platform='cpu' takes a core count")
        for name in RING_FIELDS:
            object.__setattr__(self, name, _ring_sizing(name, getattr(self, name)))
        if self.detect_races not in (None, True, False):
            raise ConfigError(f"RunConfig.detect_races must be True, False or None "
                              f"($TILECOMM_DETECT_RACES), got {self.detect_races!r}", code="TC402",
                              span=_user_span())
        if self.poison_windows not in (None, True, False):
            raise ConfigError(f"RunConfig.poison_windows must be True, False or None "
                              f"($TILECOMM_POISON_WINDOWS), got {self.poison_windows!r}",
                              code="TC402", span=_user_span())
        if self.lint is not None and self.lint not in LINT_MODES:
            raise ConfigError(f"RunConfig.lint must be one of {list(LINT_MODES)} or None "
                              f"($TILECOMM_LINT), got {self.lint!r}", code="TC402",
                              span=_user_span())
        if self.transport is not None and self.transport not in ALL_TRANSPORTS:
            raise ConfigError(f"RunConfig.transport must be one of {list(ALL_TRANSPORTS)}, got "
                              f"{self.transport!r}", code="TC402")

    def compile_kwargs(self) -> dict:
        """The keyword arguments of ``tilecomm.ir.compile`` this config stands
        for: ``ir.compile(Program, **cfg.compile_kwargs())`` compiles for this
        config's platform and devices, and the program's calls run with this
        config unless a call passes its own.  ``distributed_config`` is given
        only when set, as upstream's (unset, a program compiles for one device)."""
        kw = {"platform": self.platform, "config": self}
        if self.distributed_config is not None:
            kw["distributed_config"] = self.distributed_config
        return kw

    def checks(self) -> "CallChecks":
        """What one call with this config checks and where it traces, the
        environment read once: a call asks several times, and every read of
        the environment costs microseconds."""
        env = checks_from_env()
        return CallChecks(
            self.detect_races if self.detect_races is not None else
            bool(env.get("detect_races")),
            self.poison_windows if self.poison_windows is not None else
            bool(env.get("poison_windows")),
            env.get("trace_dir"))

    @property
    def races_enabled(self) -> bool:
        """Whether a call with this config checks for data races."""
        if self.detect_races is not None:
            return self.detect_races
        return bool(checks_from_env().get("detect_races"))

    @property
    def poison_enabled(self) -> bool:
        """Whether a call with this config poisons its windows and outputs."""
        if self.poison_windows is not None:
            return self.poison_windows
        return bool(checks_from_env().get("poison_windows"))

    def resolved_lint(self, world: int = 1) -> str:
        """What the protocol lint does when this config compiles a program of
        ``world`` ranks."""
        if self.lint is not None:
            return self.lint
        return from_env().get("lint", "warn" if world <= LINT_DEFAULT_MAX_WORLD else "off")

    @property
    def dfx_enabled(self) -> bool:
        """Whether a dispatch with this config writes run artefacts."""
        return bool(self.enable_chip_swimlane or self.enable_dump_args or self.enable_dep_gen
                    or self.enable_scope_stats)

    @property
    def trace_dir(self) -> str | None:
        """Where every call's trace is also written ($TILECOMM_TRACE, which
        ``tilecomm run --trace DIR`` sets): tracing is then on for every call."""
        return checks_from_env().get("trace_dir")

    def resolved_transport(self) -> str:
        if self.transport is not None:
            return self.transport
        name = from_env().get("transport") or "shm"
        if name not in ALL_TRANSPORTS:
            raise ConfigError(f"TILECOMM_TRANSPORT must be one of {list(ALL_TRANSPORTS)}, got "
                              f"{name!r}", code="TC402")
        return name

    def resolved_task_window(self) -> int | None:
        """Tasks a rank's scheduler keeps in flight at most (None: no limit)."""
        w = self.ring_task_window
        return w[0] if isinstance(w, tuple) else w

    def rank_knobs(self) -> RankKnobs:
        return RankKnobs(float(self.wait_timeout_s), int(self.spin_iters), self.resolved_cores(),
                         self.resolved_task_window())

    def resolved_cores(self) -> int:
        """Cores of each rank's task scheduler."""
        if self.cores is not None:
            return self.cores
        return PLATFORMS[self.platform].aiv_cores or CPU_CORES

    @property
    def platform_profile(self) -> Platform:
        return PLATFORMS[self.platform]

    @property
    def dist(self) -> DistributedConfig:
        return self.distributed_config or DistributedConfig()

    def resolved_cache_dir(self) -> str:
        if self.cache_dir:
            return self.cache_dir
        return from_env().get("cache_dir") or os.path.join(
            os.path.expanduser("~"), ".cache", "tilecomm")


RING_FIELDS = ("ring_task_window", "ring_heap", "ring_dep_pool")
RING_LEVELS = 4


def _ring_sizing(name, v):
    """None, a positive int, or RING_LEVELS positive ints (kept as a tuple)."""
    if v is None:
        return None

    def positive(x):
        return isinstance(x, int) and not isinstance(x, bool) and x > 0
    if positive(v):
        return v
    if isinstance(v, (list, tuple)) and len(v) == RING_LEVELS and all(map(positive, v)):
        return tuple(v)
    raise ConfigError(f"RunConfig.{name} must be a positive int or a list of {RING_LEVELS} "
                      f"positive ints, got {v!r}", code="TC402")


# ---------------------------------------------------------------- DFX fields
def _user_span():
    """Where the user built this RunConfig: the first frame outside tilecomm
    and dataclasses (errors about a config point at the constructor call)."""
    return user_span()


def _dfx_error(message, code="TC440", hint=None):
    return ConfigError(message, code=code, span=_user_span(), hint=hint)


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _check_dfx(cfg) -> None:
    """Validate (and normalise) the DFX fields of a RunConfig."""
    old = cfg.enable_l2_swimlane
    if old is not None:
        warnings.warn("RunConfig.enable_l2_swimlane is deprecated; use enable_chip_swimlane",
                      DeprecationWarning, stacklevel=4)
        if cfg.enable_chip_swimlane not in (0, False) and cfg.enable_chip_swimlane != old:
            raise _dfx_error(f"RunConfig.enable_l2_swimlane={old!r} (deprecated) contradicts "
                             f"enable_chip_swimlane={cfg.enable_chip_swimlane!r}",
                             hint="set only enable_chip_swimlane")
        object.__setattr__(cfg, "enable_chip_swimlane", old)
        object.__setattr__(cfg, "enable_l2_swimlane", None)
    lane = cfg.enable_chip_swimlane
    if isinstance(lane, bool):
        object.__setattr__(cfg, "enable_chip_swimlane", 4 if lane else 0)
    elif not (_is_int(lane) and 0 <= lane <= 4):
        raise _dfx_error(f"RunConfig.enable_chip_swimlane must be an int in [0, 4] or a bool "
                         f"(True = 4), got {lane!r}")
    dump = cfg.enable_dump_args
    if not (_is_int(dump) and dump in (0, 1, 2)):
        raise _dfx_error(f"RunConfig.enable_dump_args must be 0, 1 or 2, got {dump!r}")
    pmu = cfg.enable_pmu
    if not _is_int(pmu) or pmu < 0:
        raise _dfx_error(f"RunConfig.enable_pmu must be a non-negative int, got {pmu!r}")
    if pmu:
        raise _dfx_error(f"RunConfig.enable_pmu={pmu}: a CPU has no AICore PMU counters to "
                         f"sample", code="TC441",
                         hint="enable_chip_swimlane records per-task and per-op timing")
    for name in ("enable_dep_gen", "enable_scope_stats"):
        v = getattr(cfg, name)
        if not isinstance(v, bool) and v not in (0, 1):
            raise _dfx_error(f"RunConfig.{name} must be a bool, got {v!r}")
        object.__setattr__(cfg, name, bool(v))


def from_env() -> dict:
    """The only place environment variables are read (with ``checks_from_env``,
    its part)."""
    out = {}
    if os.environ.get("TILECOMM_CACHE_DIR"):
        out["cache_dir"] = os.environ["TILECOMM_CACHE_DIR"]
    if os.environ.get("TILECOMM_TRANSPORT"):
        out["transport"] = os.environ["TILECOMM_TRANSPORT"]
    elif any(os.environ.get(v) for v in MPI_LAUNCHER_VARS):
        out["transport"] = MPI_TRANSPORT            # under mpiexec: the MPI backend
    out.update(checks_from_env())
    budget = os.environ.get("TILECOMM_EXPLORE_BUDGET", "")
    if budget:
        out["explore_budget"] = _explore_budget(budget)
    lint = os.environ.get("TILECOMM_LINT", "")
    if lint and lint not in LINT_MODES:
        raise ConfigError(f"TILECOMM_LINT must be one of {list(LINT_MODES)}, got {lint!r}",
                          code="TC402")
    if lint:
        out["lint"] = lint
    if os.environ.get("TILECOMM_MPI_POOL_MB"):
        out["mpi_pool_mb"] = os.environ["TILECOMM_MPI_POOL_MB"]
    if os.environ.get("TILECOMM_MPI_LOST_S"):
        out["mpi_lost_s"] = os.environ["TILECOMM_MPI_LOST_S"]
    if os.environ.get("TILECOMM_MPI_DIRECT") == "0":
        out["mpi_direct"] = False       # no shared-memory window: every access an RMA call
    return out


def _getenv(name: str, key: bytes, default=None):
    """``os.environ.get(name, default)``, read where CPython keeps POSIX
    environment variables (``os.environ._data``, keyed by the encoded name)
    when it is there: ``get`` of an unset variable raises and catches
    KeyError twice, about 0.55 us, and every call reads three.  Any other
    ``os.environ`` (a platform or a stand-in without that store) is read
    through ``get``."""
    data = getattr(os.environ, "_data", None)
    if type(data) is not dict or os.name != "posix":
        return os.environ.get(name, default)
    value = data.get(key)
    return default if value is None else os.fsdecode(value)


def checks_from_env() -> dict:
    """The part of ``from_env`` every call reads (``RunConfig.checks``): the
    race check, poisoned windows and the trace directory -- three variables,
    not all of them, each through ``_getenv``: this is on the path of every
    prepared call."""
    out = {}
    races = _getenv("TILECOMM_DETECT_RACES", b"TILECOMM_DETECT_RACES", "")
    if races not in ("", "0", "1"):
        raise ConfigError(f"TILECOMM_DETECT_RACES must be 0 or 1, got {races!r}", code="TC402")
    if races == "1":
        out["detect_races"] = True
    poison = _getenv("TILECOMM_POISON_WINDOWS", b"TILECOMM_POISON_WINDOWS", "")
    if poison not in ("", "0", "1"):
        raise ConfigError(f"TILECOMM_POISON_WINDOWS must be 0 or 1, got {poison!r}",
                          code="TC402")
    if poison == "1":
        out["poison_windows"] = True
    trace = _getenv("TILECOMM_TRACE", b"TILECOMM_TRACE")
    if trace:
        out["trace_dir"] = trace
    return out


def _explore_budget(text: str) -> float:
    """TILECOMM_EXPLORE_BUDGET: the factor exploration's time budgets are
    multiplied by (pytest --tilecomm-explore=FACTOR sets it)."""
    try:
        factor = float(text)
    except ValueError:
        factor = float("nan")
    if not factor > 0 or factor == float("inf"):     # written so NaN fails it
        raise ConfigError(f"TILECOMM_EXPLORE_BUDGET must be a number > 0, got {text!r}",
                          code="TC402")
    return factor
