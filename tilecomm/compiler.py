"""The compiler: specialise a program per argument signature, build and verify
its IR, lower it, and cache the resulting executables.

It is the only thing the decorators call (they attach this module as the
``driver`` of the objects they make), and the only layer that knows both the
front end and the runtime: it hands the runtime a plain ``Executable``."""
from __future__ import annotations

import hashlib
import inspect
import os
from dataclasses import replace

import numpy as np

from . import dtypes as D
from .errors import ArgumentError
from .analysis import compute_facts
from .analysis.tasks import annotate as annotate_tasks
from .frontend import source as source_mod
from .frontend.builder import ProgramBuilder
from .frontend.resolve import SelfNamespace
from .ir.annotations import annotation_type
from .ir.functions import KernelFunction, ProgramClass
from .ir.types import IN, ScalarType, TensorType, is_static
from .lower.codegen import lower_program
from .runtime.artefacts import merged_trace_path
from .runtime.config import RunConfig
from .runtime.executable import (BufferInfo, Executable, FunctionInfo, KernelImage, ProgramInfo,
                                 to_numpy)
from .runtime.launch import launch
from .runtime.prepared import DistributedWorker
from .verify import verify


def arg_type(x, name):
    """The IR type a host argument specialises its parameter to."""
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


def _notify_sources(notifiers: dict) -> str:
    """{device: function names} as "step (ranks 0, 1), relay (rank 2)"."""
    by_fn: dict = {}
    for d, names in sorted(notifiers.items()):
        for f in sorted(names):
            by_fn.setdefault(f, []).append(d)
    return ", ".join(f"{f} (rank{'s' if len(ds) > 1 else ''} {', '.join(map(str, ds))})"
                     for f, ds in by_fn.items())


def make_executable(prog, facts, lowered, config) -> Executable:
    """Package verified IR and its lowering as the runtime's plain data."""
    functions = {name: FunctionInfo(name, fn.py_name, fn.kind)
                 for name, fn in prog.functions.items()}
    buffers = [BufferInfo(b.id, b.name, b.span, b.nbytes, facts.buffer(b).devices,
                          {d: frozenset(f) for d, f in facts.buffer(b).notifiers.items()})
               for b in prog.buffers]
    param_shapes = {
        name: [tuple(p.type.shape) if isinstance(p.type, TensorType) and p.type.shape
               and all(map(is_static, p.type.shape)) else None for p in fn.params]
        for name, fn in prog.functions.items()}
    image = KernelImage(source=lowered.source, filename=lowered.filename,
                        linemap=lowered.linemap, spans=prog.spans,
                        func_names=list(prog.functions), param_shapes=param_shapes,
                        notify_sources={b.id: _notify_sources(b.notifiers) for b in buffers
                                        if b.notifiers},
                        namespace=lowered.namespace)
    directions = {
        name: [p.type.direction if isinstance(p.type, TensorType) else IN for p in fn.params]
        for name, fn in prog.functions.items()}
    return Executable(prog=ProgramInfo(functions, buffers, prog.world), lowered=lowered,
                      config=config, entry=lowered.namespace[f"f_{prog.entry.name}"],
                      image=image, directions=directions, ir=prog)


def _default_output_dir(entry, config) -> str:
    """Where a program's build and run artefacts go unless ``compile(...,
    output_dir=)`` names a place: one directory per program under the cache,
    keyed by the defining file and name so two programs never share one."""
    fn = entry.fn
    ident = f"{inspect.getsourcefile(fn) or '?'}:{fn.__qualname__}"
    digest = hashlib.sha1(ident.encode()).hexdigest()[:12]
    return os.path.join(config.resolved_cache_dir(), "programs", f"{fn.__name__}-{digest}")


class CompiledProgram:
    """A program compiled for one RunConfig; call it with host tensors."""

    def __init__(self, entry, *, config: RunConfig, self_ns=None, output_dir=None):
        self.entry = entry
        self.config = config
        self.self_ns = self_ns
        self._cache: dict = {}
        self.output_dir = output_dir or _default_output_dir(entry, config)

    @property
    def world(self):
        return self.config.dist.world_size

    def _build(self, arg_types):
        """Build, analyse and verify one specialisation; raise every diagnostic of
        the front end and of the verifier together."""
        b = ProgramBuilder(self.entry, world=self.world, platform=self.config.platform_profile,
                           arg_types=arg_types, self_ns=self.self_ns)
        prog, diags, incomplete = b.build()
        facts = compute_facts(prog)
        annotate_tasks(prog)
        diags += verify(prog, facts, incomplete)
        if diags:
            first = diags[0]
            first.diagnostics = list(diags)
            raise first
        return prog, facts

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
        for name, ann in self.entry.fn.__annotations__.items():
            t = annotation_type(ann) if name != "return" else None
            if isinstance(t, TensorType) and t.shape is None:
                return True
        return False

    def _check_args(self, args):
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
            prog, facts = self._build(list(types))
            self._check_entry_shapes(prog, types, names)
            lowered = lower_program(prog, self.config.resolved_cache_dir())
            exe = self._cache[key] = make_executable(prog, facts, lowered, self.config)
        exe.output_dir = self.output_dir        # where run artefacts go (settable per program)
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

    @property
    def trace_path(self) -> str:
        """Where a call with ``RunConfig(enable_chip_swimlane=...)`` writes the
        merged Perfetto trace of the call (see runtime/artefacts.py)."""
        return merged_trace_path(self.output_dir)

    def executables(self) -> list:
        """Specialisations compiled so far."""
        return [v for v in self._cache.values() if isinstance(v, Executable)]

    def prepare(self, *args, config=None):
        """Start the rank processes once and keep them for many calls
        (a ``DistributedWorker``); given tensors, specialise for them first so
        the workers start with that code."""
        if args:
            self.specialise(args)
        return DistributedWorker(self, config)

    def __call__(self, *args, config=None):
        exe = self.specialise(args)
        cfg = config or self.config
        return launch(exe, list(args), cfg)


def compile_function(kfn: KernelFunction, args, config=None) -> CompiledProgram:
    """``fn.compile(*args, config=)``: the program of a @pl.jit.host function for
    ``config`` (cached on the function); specialised for ``args`` when given."""
    config = config or RunConfig()
    if not isinstance(config, RunConfig):
        raise TypeError(f"config must be a RunConfig, got {type(config).__name__}")
    cp = kfn._compiled.get(config)
    if cp is None:
        cp = kfn._compiled[config] = CompiledProgram(kfn, config=config)
    if args:
        cp.specialise(args)
    else:
        cp.precheck()
    return cp


def compile(program, output_dir=None, *, platform=None, distributed_config=None, config=None):
    """Compile a ``@pl.program`` class or a ``@pl.jit.host`` function."""
    cfg = config or RunConfig()
    if platform is not None or distributed_config is not None or output_dir is not None:
        cfg = replace(cfg, platform=platform or cfg.platform,
                      distributed_config=distributed_config or cfg.distributed_config,
                      cache_dir=output_dir or cfg.cache_dir)
    if isinstance(program, ProgramClass):
        ns = SelfNamespace(program.cls, program.functions)
        cp = CompiledProgram(program.entry, config=cfg, self_ns=ns, output_dir=output_dir)
        return cp.precheck()
    if isinstance(program, KernelFunction):
        return program.compile(config=cfg)
    raise TypeError(f"tilecomm.ir.compile expects a @pl.program class or a @pl.jit.host "
                    f"function; got {program!r}")


__all__ = ["CompiledProgram", "arg_type", "compile", "compile_function", "make_executable"]
