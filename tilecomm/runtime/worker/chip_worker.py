"""``ChipWorker``: upstream's explicit-dispatch handle, on the CPU.

Upstream binds a ``ChipWorker`` to one device and keeps the device open
across calls; ``worker.run(compiled, *args)`` and ``worker.register(compiled)``
dispatch explicitly, and inside ``with ChipWorker(...):`` a plain
``compiled(*args)`` finds the active worker and runs there.

Here the "device" is the rank processes a program runs on.  A ``ChipWorker``
prepares one ``DistributedWorker`` per program it runs (on first use, from the
program's own config) and keeps it until the worker closes, so a loop of
calls pays the process start once.  Each call gets fresh windows, as a
one-shot call does.  The worker's config says which platform it serves: a
program compiled for another one is refused, as upstream refuses it.
"""
from __future__ import annotations

import contextvars

from ...errors import ArgumentError, ConfigError, RuntimeFault
from ..config import RunConfig
from .distributed_worker import DistributedWorker
from .handles import RegistrationHandle

# the workers entered with ``with``, innermost last
_ACTIVE: contextvars.ContextVar = contextvars.ContextVar("tilecomm_chip_workers", default=())

DEFAULT_RUNTIME = "tensormap_and_ringbuffer"


class ChipWorker:
    """Run compiled programs on ranks kept alive across calls (see the module doc)."""

    def __init__(self, config: RunConfig | None = None, *, level: int = 2,
                 runtime: str = DEFAULT_RUNTIME, enable_sdma: bool = False,
                 auto_init: bool | None = None):
        if level != 2:
            raise ConfigError(f"ChipWorker only supports level=2 (one chip's programs); got "
                              f"level={level}", code="TC427",
                              hint="programs with a HOST orchestrator run on "
                                   "compiled.prepare(), a DistributedWorker")
        if config is not None and not isinstance(config, RunConfig):
            raise ConfigError(f"ChipWorker config must be a RunConfig, got "
                              f"{type(config).__name__}", code="TC427")
        self._config = config or RunConfig()
        self._runtime = runtime
        self._enable_sdma = bool(enable_sdma)   # the CPU needs no SDMA workspace
        self._workers: dict = {}                # compiled.key -> its DistributedWorker
        self._token = None
        self._initialized = False
        if auto_init is None or auto_init:
            self.init()

    # ------------------------------------------------------------ state
    @property
    def level(self) -> int:
        return 2

    @property
    def platform(self) -> str:
        return self._config.platform

    @property
    def device_id(self) -> int:
        return self._config.dist.device_ids[0]

    @property
    def runtime(self) -> str:
        return self._runtime

    @property
    def initialized(self) -> bool:
        return self._initialized

    @property
    def closed(self) -> bool:
        return not self._initialized

    def init(self) -> None:
        """Make the worker usable (again, after ``close()``); idempotent."""
        self._initialized = True

    def close(self) -> None:
        """Stop every program's ranks; idempotent.  ``init()`` reopens it."""
        workers, self._workers = list(self._workers.values()), {}
        self._initialized = False
        for w in workers:
            w.close()

    @classmethod
    def current(cls, platform: str | None = None) -> "ChipWorker | None":
        """The innermost worker entered with ``with`` (serving ``platform``,
        when given), or None."""
        for w in reversed(_ACTIVE.get()):
            if platform is None or w.platform == platform:
                return w
        return None

    # ------------------------------------------------------------ dispatch
    def _check(self, compiled, op):
        if not self._initialized:
            raise RuntimeFault(f"ChipWorker.{op}() called after close()", code="TC413")
        if not hasattr(compiled, "prepare") or not hasattr(compiled, "platform"):
            raise ArgumentError(f"ChipWorker.{op}() takes a compiled program (tilecomm.ir.compile "
                                f"or fn.compile()); got {type(compiled).__name__}",
                                code="TC411")
        if compiled.platform != self.platform:
            raise ConfigError(f"the program is compiled for platform={compiled.platform!r}; this "
                              f"ChipWorker serves platform={self.platform!r}", code="TC427",
                              hint=f"construct ChipWorker(config=RunConfig(platform="
                                   f"{compiled.platform!r})), or compile for {self.platform!r}")

    def _worker_for(self, compiled) -> DistributedWorker:
        w = self._workers.get(compiled.key)
        if w is None or w.closed:
            w = self._workers[compiled.key] = DistributedWorker(compiled)
        return w

    def run(self, compiled, *args, config: RunConfig | None = None):
        """Run ``compiled`` here; returns what ``compiled(*args)`` returns."""
        self._check(compiled, "run")
        return self._worker_for(compiled).run(compiled, *args, config=config)

    def register(self, compiled) -> RegistrationHandle:
        """Start ``compiled``'s ranks now; the handle runs it here when called."""
        self._check(compiled, "register")
        self._worker_for(compiled)
        return RegistrationHandle(self, compiled)

    # ------------------------------------------------------------ with
    def __enter__(self) -> "ChipWorker":
        stack = _ACTIVE.get()
        if any(w.platform == self.platform and w.device_id == self.device_id for w in stack):
            raise ConfigError(f"a ChipWorker for platform={self.platform!r}, device "
                              f"{self.device_id} is already active in an enclosing with block",
                              code="TC427", hint="use the outer worker")
        if not self._initialized:
            self.init()
        self._token = _ACTIVE.set(stack + (self,))
        return self

    def __exit__(self, *exc) -> None:
        if self._token is not None:
            _ACTIVE.reset(self._token)
            self._token = None
        self.close()

    def __repr__(self):
        state = "open" if self._initialized else "closed"
        return f"<ChipWorker platform={self.platform!r} device={self.device_id} {state}>"


def active_worker(platform: str) -> ChipWorker | None:
    """The worker a plain ``compiled(*args)`` call runs on, if one is active."""
    return ChipWorker.current(platform)


__all__ = ["ChipWorker", "active_worker"]
