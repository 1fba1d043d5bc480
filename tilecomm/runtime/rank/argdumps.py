"""Argument dumps of a run (``RunConfig.enable_dump_args``, reference 5.1).

Level 2 writes every argument of every dispatch; level 1 only the tensors
tagged with ``pl.dump_tag`` / ``dumps=`` (the compiler's tables in the
``KernelImage``: ``dump_params`` per dispatched function, ``dump_tasks`` per
task site), around each dispatch and each task that takes them.  Files, per
dispatch directory ``d``::

    d/args_dump/{before,after}/<index>_<name>.npy  + d/args_dump/args.json
    d/args_dump/task<id>_<name>/{before,after}/... + .../args.json   (level 1 tasks)

A window argument is this rank's copy.  Dispatch arguments are written by
``artefacts.RankArtefacts``; the tasks of a level-1 run are wrapped by
``TaskDumps``, a sink on the rank's recorder (``recorder.py``) whose
``task_scope`` wraps tagged tasks.  A run without dumps never reaches this
module."""
from __future__ import annotations

import json
import os
import re
import threading

import numpy as np

from ...errors import RuntimeFault
from .recorder import Sink
from ..values import WindowView

ARGS_DIR = "args_dump"


def param_names(fn, n: int) -> list:
    """The names of the ``n`` parameters after ``_rt`` of a lowered function."""
    code = fn.__code__
    names = list(code.co_varnames[1:code.co_argcount])[:n]
    return names + [f"arg{i}" for i in range(len(names), n)]


def safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


def unwritable(path, e) -> RuntimeFault:
    return RuntimeFault(f"run artefacts cannot be written to {path}: {e}", code="TC443",
                        hint="pass compile(..., output_dir=) a writable directory")


def write_args(base: str, when: str, entries) -> None:
    """``entries``: (index, name, value); arrays (a window: this rank's copy)
    as ``base/when/<index>_<name>.npy``; the manifest ``base/args.json`` is
    written with the ``before`` set."""
    out = os.path.join(base, when)
    manifest = []
    try:
        os.makedirs(out, exist_ok=True)
        for i, name, v in entries:
            a = v.local if isinstance(v, WindowView) else v
            entry = {"index": i, "name": name}
            if isinstance(a, np.ndarray):
                fname = f"{i:02d}_{safe_name(name)}.npy"
                np.save(os.path.join(out, fname), a)
                entry.update(kind="window" if isinstance(v, WindowView) else "tensor",
                             file=fname, dtype=str(a.dtype), shape=list(a.shape))
            else:
                entry.update(kind="scalar", value=v if isinstance(v, (int, float, bool))
                             else repr(v))
            manifest.append(entry)
        if when == "before":
            with open(os.path.join(base, "args.json"), "w", encoding="utf-8") as f:
                json.dump(manifest, f, indent=1)
    except OSError as e:
        raise unwritable(out, e) from None


class TaskDumps(Sink):
    """A level-1 run's task dumps on one rank: the current dispatch's
    directory and image.  On the stream after exploration, before tracing
    (``ORDER``): a task's dumps are part of its traced slice."""

    ORDER = 2

    def __init__(self):
        self.dir = None
        self.tasks: dict = {}

    def begin_dispatch(self, ctx, d) -> None:
        self.dir = d.dir
        self.tasks = getattr(d.image, "dump_tasks", {})

    def task_scope(self, ctx, inner):
        return DumpScope(inner, self) if self.tasks else inner

    def wrap(self, fn, idx, name, blocks):
        """``fn`` (a task body, run once per block) writing the tagged
        arguments ``idx`` before its first block starts and after its last
        block ends.  Every block passes the lock before it runs, so none
        writes a tagged tensor while it is being dumped."""
        names = param_names(fn, max(idx) + 1)
        d = self.dir
        lock = threading.Lock()
        state = {"base": None, "left": max(int(blocks), 0)}

        def dumped(ctx, *a):
            with lock:
                if state["base"] is None:
                    t = ctx.task
                    tid = t.tid if t is not None else 0
                    state["base"] = os.path.join(d, ARGS_DIR, f"task{tid}_{safe_name(name)}")
                    write_args(state["base"], "before", [(i, names[i], a[i]) for i in idx])
            fn(ctx, *a)
            with lock:
                state["left"] -= 1
                if state["left"] == 0:
                    write_args(state["base"], "after", [(i, names[i], a[i]) for i in idx])

        return dumped


class DumpScope:
    """The scheduler (or the traced scope) as a level-1 dispatch's
    orchestration function sees it: tagged tasks are wrapped to dump."""

    __slots__ = ("inner", "dumps")

    def __init__(self, inner, dumps: TaskDumps):
        self.inner, self.dumps = inner, dumps

    def submit(self, fn, args, name, loc, deps=(), acc=(), blocks=1, waiter=False,
               manual=False):
        idx = self.dumps.tasks.get((loc, fn.__name__))
        if idx:
            fn = self.dumps.wrap(fn, idx, name, blocks)
        return self.inner.submit(fn, args, name, loc, deps, acc, blocks, waiter, manual)

    def close(self):
        return self.inner.close()

    def abandon(self, exc):
        return self.inner.abandon(exc)


__all__ = ["DumpScope", "TaskDumps", "param_names", "unwritable",
           "write_args"]
