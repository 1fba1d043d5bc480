"""Compiled programs: specialisation per argument signature, cached."""
from __future__ import annotations

import builtins
import itertools

import numpy as np

from .. import dtypes as D
from ..errors import ArgumentError
from ..ir.types import IN, ScalarType, TensorType, is_static
from ..lower.codegen import lower_program
from .config import RunConfig


_IMAGE_KEYS = itertools.count(1)


class KernelImage:
    """What a rank needs to run one specialisation: the lowered source and the
    tables that go with it.  Forked workers inherit it; a worker started before
    the specialisation existed receives it pickled and compiles the source."""

    def __init__(self, prog, lowered):
        self.key = next(_IMAGE_KEYS)
        self.source = lowered.source
        self.filename = lowered.filename
        self.linemap = lowered.linemap
        self.spans = list(prog.spans)
        self.func_names = list(prog.functions)
        self.param_shapes = {
            name: [tuple(p.type.shape) if isinstance(p.type, TensorType) and p.type.shape
                   and all(map(is_static, p.type.shape)) else None for p in fn.params]
            for name, fn in prog.functions.items()}
        self._namespace = lowered.namespace

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


class Executable:
    """One specialisation: verified IR plus lowered code, ready to launch."""

    def __init__(self, prog, lowered, config: RunConfig):
        self.prog = prog
        self.lowered = lowered
        self.config = config
        self.world = prog.world
        self.entry = lowered.namespace[f"f_{prog.entry.name}"]
        self.image = KernelImage(prog, lowered)
        self.directions = {
            name: [p.type.direction if isinstance(p.type, TensorType) else IN for p in fn.params]
            for name, fn in prog.functions.items()}

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


def arg_type(x, name):
    if isinstance(x, bool):
        return ScalarType(D.BOOL)
    if isinstance(x, (int, np.integer)):
        return ScalarType(D.INDEX)
    if isinstance(x, (float, np.floating)):
        return ScalarType(D.FP32)
    a = to_numpy(x)
    if a is None:
        raise ArgumentError(f"parameter '{name}': expected a numpy array, a torch CPU tensor or "
                            f"a Python scalar; got {type(x).__name__}", code="TC411")
    dt = D.from_numpy(a.dtype)
    if dt is None:
        raise ArgumentError(f"parameter '{name}': unsupported dtype {a.dtype}", code="TC411")
    return TensorType(tuple(int(d) for d in a.shape), dt)


class CompiledProgram:
    """A program compiled for one RunConfig; call it with host tensors."""

    def __init__(self, entry, *, config: RunConfig, self_ns=None):
        self.entry = entry
        self.config = config
        self.self_ns = self_ns
        self._cache: dict = {}

    @property
    def world(self):
        return self.config.dist.world_size

    def _build(self, arg_types):
        from ..frontend.builder import ProgramBuilder
        b = ProgramBuilder(self.entry, world=self.world, platform=self.config.platform_profile,
                           arg_types=arg_types, self_ns=self.self_ns)
        return b.build()

    def precheck(self):
        """Parse and verify with annotation shapes only (no tensors yet).  With no
        pl.dynamic dims this is the final specialisation and is cached."""
        key = ("annotations",)
        if key not in self._cache:
            # an entry with bare pl.Tensor parameters takes its shapes from the
            # call's arguments: nothing can be checked before the first call
            self._cache[key] = None if self._entry_has_bare_params() else self._build(None)
        return self

    def _entry_has_bare_params(self) -> bool:
        from ..language.typing import annotation_type
        for name, ann in self.entry.fn.__annotations__.items():
            t = annotation_type(ann) if name != "return" else None
            if isinstance(t, TensorType) and t.shape is None:
                return True
        return False

    def _check_args(self, args):
        from ..frontend import source as source_mod
        src = source_mod.load(self.entry.fn)
        names = [a.arg for a in src.tree.args.args][(1 if self.entry.is_method else 0):]
        if len(args) != len(names):
            raise ArgumentError(f"{self.entry.fn.__name__} expects {len(names)} arguments "
                                f"(in-place, one per parameter), got {len(args)}. Parameters: "
                                f"{names}")
        return names

    def specialise(self, args) -> Executable:
        names = self._check_args(args)
        types = tuple(arg_type(a, n) for a, n in zip(args, names))
        key = types
        exe = self._cache.get(key)
        if exe is None:
            prog = self._build(list(types))
            self._check_entry_shapes(prog, types, names)
            lowered = lower_program(prog, self.config.resolved_cache_dir())
            exe = self._cache[key] = Executable(prog, lowered, self.config)
        return exe

    def lowered(self, *args):
        """The lowered Python of this program for these arguments: ``.source``,
        ``.filename`` (kept on disk for stepping through) and ``.linemap``
        (generated line -> user span)."""
        return self.specialise(args).lowered

    def _check_entry_shapes(self, prog, types, names):
        for p, t, n in zip(prog.entry.params, types, names):
            pt = p.type
            if isinstance(pt, TensorType):
                if not isinstance(t, TensorType):
                    raise ArgumentError(f"parameter '{n}' expects a tensor; got a scalar",
                                        span=p.span)
                if pt.dtype is not None and not D.compatible(pt.dtype, t.dtype):
                    raise ArgumentError(f"parameter '{n}' expects dtype {pt.dtype.name}; got "
                                        f"{t.dtype.name}", span=p.span)
                if len(pt.shape) != len(t.shape) or any(
                        is_static(a) and a != b for a, b in zip(pt.shape, t.shape)):
                    raise ArgumentError(f"parameter '{n}' expects shape {list(pt.shape)}; got "
                                        f"{list(t.shape)}", span=p.span,
                                        hint="use pl.dynamic(...) for dims that vary per call")
            elif isinstance(pt, ScalarType) and not isinstance(t, ScalarType):
                raise ArgumentError(f"parameter '{n}' expects a scalar; got a tensor",
                                    span=p.span)

    def executables(self) -> list:
        """Specialisations compiled so far."""
        return [v for v in self._cache.values() if isinstance(v, Executable)]

    def prepare(self, *args, config=None):
        """Start the rank processes once and keep them for many calls
        (a ``DistributedWorker``); given tensors, specialise for them first so
        the workers start with that code."""
        from .prepared import DistributedWorker
        if args:
            self.specialise(args)
        return DistributedWorker(self, config)

    def __call__(self, *args, config=None):
        from .launch import launch
        exe = self.specialise(args)
        cfg = config or self.config
        return launch(exe, list(args), cfg)


def compile(program, output_dir=None, *, platform=None, distributed_config=None, config=None):
    """Compile a ``@pl.program`` class or a ``@pl.jit.host`` function."""
    from ..language.jit import KernelFunction, ProgramClass
    from ..frontend.resolve import SelfNamespace
    cfg = config or RunConfig()
    if platform is not None or distributed_config is not None or output_dir is not None:
        from dataclasses import replace
        cfg = replace(cfg, platform=platform or cfg.platform,
                      distributed_config=distributed_config or cfg.distributed_config,
                      cache_dir=output_dir or cfg.cache_dir)
    if isinstance(program, ProgramClass):
        ns = SelfNamespace(program.cls, program.functions)
        cp = CompiledProgram(program.entry, config=cfg, self_ns=ns)
        return cp.precheck()
    if isinstance(program, KernelFunction):
        return program.compile(config=cfg)
    raise TypeError(f"tilecomm.ir.compile expects a @pl.program class or a @pl.jit.host "
                    f"function; got {program!r}")
