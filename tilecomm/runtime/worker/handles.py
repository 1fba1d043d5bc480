"""Handles a DistributedWorker gives out: one per submitted call, one per
registered program."""
from __future__ import annotations

import math
import threading

from ...errors import ConfigError, RuntimeFault


def check_timeout(timeout) -> float | None:
    """``None`` (wait for ever) or a finite number >= 0 of seconds."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) \
            or not math.isfinite(timeout) or timeout < 0:
        raise ConfigError(f"timeout must be None or a finite number of seconds >= 0, got "
                          f"{timeout!r}", code="TC421")
    return float(timeout)


class DistributedRunHandle:
    """A call submitted with ``rt.submit``: ``result()`` waits for it and
    returns what the call returns (re-raising its error, every time it is
    asked); ``done`` says whether it finished."""

    def __init__(self, compiled, drive=None, outputs=None):
        self.compiled = compiled
        self._outputs = outputs         # a return-style call's allocated outputs: its result
        # drive(handle): finish the call in the asking thread (a pipelined
        # call, see ``pipeline.py``); None: the worker's dispatcher runs it
        self._drive = drive
        self._finished = threading.Event()
        self._value = None
        self._error: BaseException | None = None
        # the caller has waited for it: a call submitted after that is not in
        # flight with it (race_history.py)
        self.taken = False

    def _set(self, value=None, error: BaseException | None = None) -> None:
        self._value, self._error = value, error
        self._finished.set()

    @property
    def done(self) -> bool:
        return self._finished.is_set()

    def wait(self, timeout=None) -> None:
        """Wait until the call finished; re-raise its error; ``TimeoutError``
        if it has not finished within ``timeout`` seconds."""
        t = check_timeout(timeout)
        self.taken = True
        if t is None and self._drive is not None and not self._finished.is_set():
            self._drive(self)           # without a time limit: this thread finishes it
        if not self._finished.wait(t):
            raise TimeoutError(f"the submitted call did not finish within {t} s")
        if self._error is not None:
            raise self._error

    def result(self, timeout=None):
        """``wait(timeout)``, then the call's return value."""
        self.wait(timeout)
        return self._value if self._outputs is None else self._outputs

    def __repr__(self):
        state = "done" if self.done else "in flight"
        return f"<DistributedRunHandle {state}>"


class RegistrationHandle:
    """A program registered with a worker: calling it runs it there.  Usable
    as a context manager (``unregister()`` at its end); after ``unregister()``
    or the worker's ``close()`` a call is refused."""

    def __init__(self, worker, compiled):
        self._worker = worker
        self.compiled = compiled
        self._unregistered = False

    @property
    def cid(self) -> int:
        """Upstream's registration id; the CPU has none to give (always 0)."""
        return 0

    @property
    def closed(self) -> bool:
        return self._unregistered or self._worker.closed

    def _check(self, op):
        if self._unregistered:
            raise RuntimeFault(f"RegistrationHandle.{op}() called after unregister()",
                               code="TC413", hint="register the program again: "
                                                  "worker.register(compiled)")

    def __call__(self, *args, config=None):
        self._check("__call__")
        return self._worker.run(self.compiled, *args, config=config)

    def submit(self, *args, config=None) -> DistributedRunHandle:
        self._check("submit")
        return self._worker.submit(self.compiled, *args, config=config)

    def unregister(self) -> None:
        """Refuse later calls through this handle; idempotent.  The worker
        keeps the program's ranks until it closes."""
        self._unregistered = True

    def __enter__(self) -> "RegistrationHandle":
        return self

    def __exit__(self, *exc) -> None:
        self.unregister()

    def __repr__(self):
        return f"<RegistrationHandle {'closed' if self.closed else 'open'}>"


__all__ = ["DistributedRunHandle", "RegistrationHandle", "check_timeout"]
