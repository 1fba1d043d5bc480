"""The compiled artefact the runtime runs: plain data, built by the compiler.

Nothing here knows how it was produced (no front end, ops or lowering): an
``Executable`` is the lowered entry function, the ``KernelImage`` ranks run,
and the tables the controller and the deadlock report read (function names,
window buffers with the devices and notifiers the analysis found)."""
from __future__ import annotations

import builtins
import itertools
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from .. import dtypes as D
from ..errors import ArgumentError

_IMAGE_KEYS = itertools.count(1)


@dataclass(frozen=True)
class FunctionInfo:
    """One lowered program function."""

    name: str                   # unique within the program (the lowered f_<name>)
    py_name: str                # the user's qualified name, for reports
    kind: str


@dataclass(frozen=True)
class BufferInfo:
    """One ``alloc_window_buffer`` site, with what the analysis found about it."""

    id: int
    name: str
    span: object
    nbytes: int | None
    devices: frozenset          # union of the dispatches its views reach
    notifiers: dict = field(default_factory=dict)   # device -> names of notifying functions
    # the dtypes of its pld.window views (names, e.g. "INT32"): a buffer
    # viewed as INT32 may hold signal cells (RunConfig.poison_windows spares it)
    dtypes: frozenset = frozenset()


@dataclass(frozen=True)
class ProgramInfo:
    functions: dict             # name -> FunctionInfo
    buffers: list               # BufferInfo, indexed by buffer id
    world: int


def fresh_image_key() -> int:
    """A key no image of this process has (a reloaded image gets one)."""
    return next(_IMAGE_KEYS)


class KernelImage:
    """What a rank needs to run one specialisation: the lowered source and the
    tables that go with it.  Forked workers inherit it; a worker started before
    the specialisation existed receives it pickled and compiles the source."""

    def __init__(self, *, source, filename, linemap, spans, func_names, param_shapes,
                 notify_sources=None, namespace=None, dump_params=None, dump_tasks=None,
                 loops=(), line_loops=None):
        self.key = next(_IMAGE_KEYS)
        self.source = source
        self.filename = filename
        self.linemap = linemap
        self.spans = list(spans)
        self.func_names = list(func_names)
        self.param_shapes = param_shapes      # function -> per-parameter static shape or None
        # window buffer id -> which functions hand-roll notifies into it, as text
        # (a collective that finds its signal dirty names them)
        self.notify_sources = dict(notify_sources or {})
        # what RunConfig(enable_dump_args=1) writes: function -> tagged parameter
        # indices; (task span id, task body function) -> tagged argument indices
        self.dump_params = dict(dump_params or {})
        self.dump_tasks = dict(dump_tasks or {})
        # the program's for loops ((var, span, function) each) and, per lowered
        # line, the ids of the loops it is in: how a report names the
        # iteration a rank was in (runtime/rank/iterations.py)
        self.loops = tuple(loops)
        self.line_loops = dict(line_loops or {})
        self._namespace = namespace

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_namespace"] = None             # rebuilt from the source on arrival
        return state

    def function(self, name):
        if self._namespace is None:
            ns: dict = {}
            exec(builtins.compile(self.source, self.filename, "exec"), ns)
            self._namespace = ns
        return self._namespace[f"f_{name}"]

    def span(self, loc):
        return self.spans[loc] if 0 <= loc < len(self.spans) else None


class Param(NamedTuple):
    name: str
    span: object                      # where the user wrote it (for located errors)


class EntryInfo(NamedTuple):
    """What the runtime reads of the HOST entry: its name (the key of its
    parameter directions) and its parameters, for argument errors."""

    name: str
    params: tuple                     # of Param


class Executable:
    """One specialisation, ready to launch: the HOST entry, the rank image and
    the program tables."""

    def __init__(self, *, prog: ProgramInfo, lowered, config, entry, entry_info: EntryInfo,
                 image: KernelImage, directions: dict, ir=None, program_key=None,
                 sub_workers=None):
        self.prog = prog
        self.lowered = lowered          # .source, .filename, .linemap of the lowered module
        self.config = config
        self.world = prog.world
        self.entry = entry
        self.entry_info = entry_info
        self.image = image
        self.directions = directions    # function -> per-parameter In / Out / InOut
        # the verified IR it came from, for the compiler's tools (None for a
        # reloaded build); the runtime reads ``entry_info`` instead
        self.ir = ir
        # which program this specialises (persistent windows are kept per program)
        self.program_key = program_key
        # SubWorker function -> (its Python name, its Python function, whether
        # its body is only ``...`` and a callback must be bound)
        self.sub_workers = dict(sub_workers or {})
        self.output_dir = None          # the program's build / run-artefact directory

    def span(self, loc):
        return self.image.span(loc)


def to_numpy(x):
    """A numpy view of a host argument (numpy array or torch CPU tensor)."""
    if isinstance(x, np.ndarray):
        return x
    mod = type(x).__module__
    if mod.startswith("torch"):
        import torch
        if x.device.type != "cpu":
            raise ArgumentError(f"torch tensors must be on the CPU; got device {x.device}")
        if not x.is_contiguous():
            raise ArgumentError("torch tensors passed to a program must be contiguous")
        if x.dtype == torch.bfloat16:
            return x.view(torch.int16).numpy().view(D.BF16.np_dtype)
        return x.numpy()
    return None


__all__ = ["BufferInfo", "EntryInfo", "Executable", "FunctionInfo", "KernelImage", "Param", "ProgramInfo",
           "to_numpy"]
