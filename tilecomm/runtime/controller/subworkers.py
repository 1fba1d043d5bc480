"""HOST SubWorkers: Python a HOST orchestrator calls between its dispatches.

A SubWorker (``@pl.function(level=pl.Level.HOST, role=pl.Role.SubWorker)``)
runs in the controller process -- the process that made the call -- when the
HOST orchestrator reaches the call, once every dispatch already sent that
touches one of its tensors has completed (a data dependency, as upstream).
Its tensors are the host tensors themselves (numpy views of the shared
memory the ranks use), so what it writes is what later dispatches read.

Which Python runs: a callback bound to the SubWorker's name
(``prepare(callbacks={name: fn})``) receives ONE positional argument, the
sequence of its arguments (upstream's ``MappedArgs``); otherwise the
SubWorker's own body runs, called with its arguments.  A SubWorker whose
body is only ``...`` must be bound.

Its tensors are numpy arrays, or torch tensors when the call's arguments were
torch tensors (as upstream, where everything is torch): zero-copy views of
the same memory (``as_torch``), so writing them writes the host tensor.
torch is imported only then.
"""
from __future__ import annotations

import inspect
import time
import warnings

import numpy as np

from ...errors import ConfigError, DeadlockError
from .. import control as C
from ..messages import Failed
from .monitor import rank_died, rank_error

BACKOFF_MAX_S = 0.001      # longest sleep between checks of the awaited dispatches


def declared(programs) -> dict:
    """{name: KernelFunction} of every SubWorker the programs declare."""
    out: dict = {}
    for p in programs:
        out.update(getattr(p, "sub_workers", {}) or {})
    return out


def bind_callbacks(programs, callbacks, overrides) -> dict:
    """The callbacks of a worker, checked: ``sub_worker_overrides`` is a
    deprecated alias (``callbacks`` wins a collision); every name must be a
    SubWorker of a program; every callback takes one positional argument;
    every abstract SubWorker must be bound."""
    merged: dict = {}
    if overrides:
        warnings.warn("sub_worker_overrides= is deprecated; pass callbacks= instead",
                      DeprecationWarning, stacklevel=4)
        merged.update(dict(overrides))
    if callbacks:
        merged.update(dict(callbacks))
    subs = declared(programs)
    available = sorted(subs)
    unknown = sorted(n for n in merged if n not in subs)
    if unknown:
        where = "any prepared program" if len(programs) > 1 else "this program"
        raise ConfigError(f"callbacks names {unknown} are not sub-workers of {where}. "
                          f"Available sub-workers: {available}", code="TC423")
    for name, fn in merged.items():
        check_signature(name, fn)
    missing = sorted(n for n, f in subs.items() if f.requires_runtime_binding and n not in merged)
    if missing:
        raise ConfigError(unbound_message(missing), code="TC425")
    return merged


def unbound_message(names) -> str:
    return (f"SubWorkers {sorted(names)} are runtime-bound callbacks (declared with a `...` "
            f"body) and must be supplied via callbacks={{...}} to prepare()")


def check_signature(name, fn) -> None:
    if not callable(fn):
        raise TypeError(f"callback {name!r} must be callable, got {type(fn).__name__}")
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return                              # a builtin without a signature: trust it
    try:
        sig.bind(())
    except TypeError:
        raise TypeError(f"callback {name!r} must accept a single positional argument "
                        f"fn(args: MappedArgs); its signature is {name}{sig}") from None


def invoke(run, py_name, body, abstract, values) -> None:
    """Run SubWorker ``py_name`` with ``values`` (its host tensors as numpy
    arrays, and scalars): the callback bound to its name, given the argument
    list, else its own body.  Tensors go as torch when the run's caller passed
    torch (``run.torch``, set where the arguments are shared)."""
    if getattr(run, "torch", False):
        values = [as_torch(v) if isinstance(v, np.ndarray) else v for v in values]
    callback = run.callbacks.get(py_name)
    if callback is not None:
        callback(tuple(values))          # one positional argument: the argument list
    elif abstract:
        raise ConfigError(unbound_message([py_name]), code="TC425")
    else:
        body(*values)


# numpy dtypes (ml_dtypes' among them) torch reaches only through a same-size
# integer view: (the integer view, the torch dtype's name)
_VIEWED = {"bfloat16": (np.int16, "bfloat16"), "float8_e4m3fn": (np.uint8, "float8_e4m3fn"),
           "float8_e5m2": (np.uint8, "float8_e5m2")}


def as_torch(arr: np.ndarray):
    """A torch tensor sharing ``arr``'s memory (zero-copy); ``arr`` itself for
    a dtype torch lacks (INT4, FP4, ...)."""
    import torch                         # only for a caller that uses torch already
    viewed = _VIEWED.get(arr.dtype.name)
    if viewed is not None:
        dt = getattr(torch, viewed[1], None)
        return arr if dt is None else torch.from_numpy(arr.view(viewed[0])).view(dt)
    try:
        return torch.from_numpy(arr)
    except TypeError:
        return arr


def wait_dispatches(run, deps: dict) -> None:
    """Block until rank r completed its dispatch ``deps[r]``, for every r.
    A rank failing or dying is raised; no rank running, no dispatch
    completing and no message for ``deadlock_timeout_s`` is a deadlock (the
    ranks wait for something only dispatches after this point could do)."""
    ranks = run.ranks
    control = ranks.control
    sleep, quiet_since, last = 0.0, None, None
    while True:
        pending = {r: s for r, s in deps.items() if control.done_seq(r) < s}
        if not pending:
            return
        live = [r for r in range(run.world) if r not in run.done]
        for rank, msg in ranks.launcher.receive(live, 0):
            if msg is None:
                raise rank_died(ranks.launcher, rank)
            if isinstance(msg, Failed):
                raise rank_error(msg)
        states = [(s.state, s.gen) for s in control.snapshot(range(run.world))]
        now = (tuple(states), tuple(control.done_seq(r) for r in range(run.world)))
        if any(st == C.RUNNING for st, _ in states) or now != last:
            quiet_since, last = None, now
        elif quiet_since is None:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since >= run.config.deadlock_timeout_s:
            waits = ", ".join(f"rank {r} dispatch {s} (done: {control.done_seq(r)})"
                              for r, s in sorted(pending.items()))
            raise DeadlockError(f"deadlock: the HOST orchestrator waits for {waits} before a "
                                f"SubWorker call, and no rank can make progress: they wait for "
                                f"what only dispatches after the SubWorker call would do", [])
        time.sleep(sleep)
        sleep = min(BACKOFF_MAX_S, sleep * 2 or 1e-5)


__all__ = ["as_torch", "bind_callbacks", "check_signature", "declared", "invoke",
           "unbound_message", "wait_dispatches"]
