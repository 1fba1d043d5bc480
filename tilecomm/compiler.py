"""The compiler: specialise a program per argument signature, build and verify
its IR, lower it, and cache the resulting executables.

It is the only thing the decorators call (they attach this module as the
``driver`` of the objects they make), and the only layer that knows both the
front end and the runtime: it hands the runtime a plain ``Executable``."""
from __future__ import annotations

import functools
import hashlib
import inspect
import itertools
import pickle
import sys
import warnings
import os
from dataclasses import replace
from pathlib import Path

import numpy as np

from . import dtypes as D
from .errors import (ArgumentError, ConfigError, ProgramValueError, TilecommError, UserError,
                     at_entry_point)
from .analysis import compute_facts
from .analysis.tasks import annotate as annotate_tasks
from .frontend import source as source_mod
from .frontend.builder import ProgramBuilder
from .frontend.resolve import SelfNamespace
from .ir.annotations import annotation_type
from .ir.functions import KernelFunction, ProgramClass
from .ir.kinds import ORCH, SUBWORKER
from .ir.types import IN, OUT, ScalarType, TensorType, is_static
from .lower import layout
from .lower.codegen import lower_program
from .runtime.rank.artefacts import merged_trace_path
from .runtime.config import RunConfig
from .runtime.executable import (BufferInfo, EntryInfo, Executable, FunctionInfo, KernelImage, Param,
                                 ProgramInfo, to_numpy)
from .runtime.worker import builds
from .runtime.worker.chip_worker import active_worker
from .runtime.worker.device_tensors import DeviceTensor, StackedDeviceTensor
from .runtime.controller.run import launch
from .runtime.worker.distributed_worker import DistributedWorker
from .runtime.controller.subworkers import unbound_message
from .verify import lint, verify
from .verify import world as world_checks
from .verify.lint import report as report_lint


# the types of scalar arguments, made once: every call specialises its arguments
_BOOL_ARG, _INDEX_ARG, _FP32_ARG = ScalarType(D.BOOL), ScalarType(D.INDEX), ScalarType(D.FP32)


def arg_type(x, name):
    """The IR type a host argument specialises its parameter to."""
    if isinstance(x, bool):
        return _BOOL_ARG
    if isinstance(x, (int, np.integer)):
        return _INDEX_ARG
    if isinstance(x, (float, np.floating)):
        return _FP32_ARG
    if isinstance(x, (DeviceTensor, StackedDeviceTensor)):
        return TensorType(x.shape, D.from_numpy(x.dtype))
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


def entry_point(fn):
    """A call from the user's code into tilecomm: an error about the program
    passing out of it shows the user's frames, not the compiler's and the
    launcher's (``errors.at_entry_point``)."""

    @functools.wraps(fn)
    def call(*args, **kw):
        try:
            return fn(*args, **kw)
        except TilecommError as e:
            at_entry_point(e)
            raise
    return call


def make_executable(prog, facts, lowered, config, abstract_subs=frozenset()) -> Executable:
    """Package verified IR and its lowering as the runtime's plain data."""
    functions = {name: FunctionInfo(name, fn.py_name, fn.kind)
                 for name, fn in prog.functions.items()}
    buffers = [BufferInfo(b.id, b.name, b.span, b.nbytes, facts.buffer(b).devices,
                          {d: frozenset(f) for d, f in facts.buffer(b).notifiers.items()},
                          facts.buffer(b).dtypes)
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
                        namespace=lowered.namespace,
                        dump_params=lowered.dumps.params, dump_tasks=lowered.dumps.tasks,
                        loops=lowered.loops, line_loops=lowered.line_loops)
    directions = {
        name: [p.type.direction if isinstance(p.type, TensorType) else IN for p in fn.params]
        for name, fn in prog.functions.items()}
    subs = {name: (fn.py_fn.__name__, fn.py_fn, fn.py_fn in abstract_subs)
            for name, fn in prog.functions.items() if fn.kind == SUBWORKER}
    return Executable(prog=ProgramInfo(functions, buffers, prog.world), lowered=lowered,
                      config=config, entry=lowered.namespace[f"f_{prog.entry.name}"],
                      entry_info=EntryInfo(prog.entry.name, tuple(Param(p.name, p.span)
                                                                  for p in prog.entry.params)),
                      image=image, directions=directions, ir=prog, sub_workers=subs)


def _default_output_dir(entry, config) -> Path:
    """Where a program's build and run artefacts go unless ``compile(...,
    output_dir=)`` names a place: one directory per program under the cache,
    keyed by the defining file and name so two programs never share one."""
    fn = entry.fn
    # a build is for one world size and platform: each gets its own directory
    source = inspect.getsourcefile(fn) or "?"
    world, platform = config.dist.world_size, config.platform
    ident = f"{source}:{fn.__qualname__}:{world}:{config.platform}"
    digest = hashlib.sha1(ident.encode()).hexdigest()[:12]
    # named so a user finds their program's: its file, its name (a factory's
    # function without the "<locals>" parts), ranks and platform; the hash of
    # the full path keeps two files of one name apart
    name = ".".join(p for p in fn.__qualname__.split(".") if p != "<locals>")
    stem = os.path.splitext(os.path.basename(source))[0]
    return Path(config.resolved_cache_dir(), "programs",
                f"{stem}.{name}-{world}r-{platform}-{digest}")


_PROGRAM_KEYS = itertools.count(1)


def _is_output(param) -> bool:
    return isinstance(param.type, TensorType) and param.type.direction == OUT


def _zeros(shape, dtype, like_torch: bool):
    """A zero-filled output tensor (torch when the call passed torch tensors)."""
    arr = np.zeros(tuple(shape), dtype.np_dtype)
    if like_torch:
        import torch                       # only when the caller uses torch already
        if dtype is D.BF16:
            return torch.zeros(tuple(shape), dtype=torch.bfloat16)
        return torch.from_numpy(arr)
    return arr


class CompiledProgram:
    """A program compiled for one RunConfig; call it with host tensors."""

    def __init__(self, entry, *, config: RunConfig, self_ns=None, output_dir=None,
                 sub_workers=None):
        self.key = next(_PROGRAM_KEYS)     # persistent windows are kept per program
        self._sub_workers = dict(sub_workers or {})
        self.entry = entry
        self.config = config
        self.self_ns = self_ns
        self._cache: dict = {}
        self.output_dir = output_dir or _default_output_dir(entry, config)

    @property
    def output_dir(self) -> Path:
        """The program's build and run-artefact directory, an absolute
        ``pathlib.Path`` (as upstream's: ``compiled.output_dir / "dfx_outputs"``);
        assignable from a str or a Path."""
        return self._output_dir

    @output_dir.setter
    def output_dir(self, value):
        self._output_dir = Path(value).resolve()
        for exe in self.executables():   # run artefacts of later calls go there too
            exe.output_dir = self._output_dir

    def __fspath__(self) -> str:
        return str(self._output_dir)

    @property
    def platform(self) -> str:
        return self.config.platform

    @property
    def name(self) -> str:
        """The entry function's name (a HOST orchestrator's, or a single-chip
        program's orchestration function's)."""
        return self.entry.fn.__name__

    @property
    def param_names(self) -> list:
        return list(self._param_names())

    @property
    def world(self):
        return self.config.dist.world_size

    def _build(self, arg_types):
        """Build, analyse and verify one specialisation, then run the protocol
        lint as ``RunConfig.lint`` says (a warning shows once per source line:
        the user's module keeps the registry, as for its own warnings)."""
        prog, facts = self._verified(arg_types)
        self._lint(prog, facts)
        return prog, facts

    def _lint(self, prog, facts) -> None:
        mode = self.config.resolved_lint(self.world)
        if mode != "off":
            registry = self.entry.fn.__globals__.setdefault("__warningregistry__", {})
            report_lint(lint(prog, facts), mode, registry)

    def check(self, arg_types=None) -> tuple:
        """Compile for ``arg_types`` (None: the annotations) without lowering or
        running anything: raise the front end's and the verifier's errors
        together; return the program's IR and the protocol lint's warnings."""
        prog, facts = self._verified(arg_types)
        return prog, lint(prog, facts)

    def _verified(self, arg_types):
        """Build, analyse and verify one specialisation; raise every diagnostic of
        the front end and of the verifier together."""
        b = ProgramBuilder(self.entry, world=self.world, platform=self.config.platform_profile,
                           arg_types=arg_types, self_ns=self.self_ns)
        try:
            prog, diags, incomplete = b.build()
        except UserError as e:
            raise self._on_one_rank(e)
        facts = compute_facts(prog)
        annotate_tasks(prog)
        diags += verify(prog, facts, incomplete)
        if diags:
            first = diags[0]
            first.diagnostics = list(diags)
            raise self._on_one_rank(first)
        return prog, facts

    @property
    def _unconfigured(self) -> bool:
        """Called without a DistributedConfig: one rank, whatever the program says."""
        return self.config.distributed_config is None and self.entry.kind != ORCH

    def _on_one_rank(self, e: UserError) -> UserError:
        return world_checks.on_one_rank(e) if self._unconfigured else e

    def _check_call_world(self, config) -> None:
        given = config.distributed_config if config is not None else None
        if given is not None and self._unconfigured:
            world_checks.check_call_world(self.name, given.world_size, self.world)

    def _check_world(self, prog, facts) -> None:
        if self._unconfigured and prog.world == 1:
            world_checks.check_world(self.name, prog, facts)

    def precheck(self):
        """Parse and verify with annotation shapes only (no tensors yet).  With no
        pl.dynamic dims this is the final specialisation and is cached."""
        key = ("annotations",)
        if key not in self._cache:
            # an entry with bare pl.Tensor parameters takes its shapes from the
            # call's arguments: nothing can be checked before the first call
            built = self._cache[key] = None if self._entry_has_bare_params() \
                else self._build(None)
            if built is not None:
                prog = built[0]
                # static shapes: the lowered code can go into the layout now
                static = all(all(map(is_static, p.type.shape)) for p in prog.entry.params
                             if isinstance(p.type, TensorType))
                self._lay_out(prog, lower_program(prog, self.config.resolved_cache_dir())
                              if static else None)
        return self

    def _lay_out(self, prog, lowered) -> None:
        """The build directory in upstream's layout (``lower/layout.py``);
        a directory that cannot be written costs a warning, not the build."""
        try:
            layout.write(self.output_dir, prog, self.config, lowered, self._sub_workers,
                         single_chip=self.entry.kind == ORCH)
        except OSError as e:
            warnings.warn(f"build layout not written under {self.output_dir}: {e}",
                          RuntimeWarning, stacklevel=3)

    def _entry_has_bare_params(self) -> bool:
        for name, ann in self.entry.fn.__annotations__.items():
            t = annotation_type(ann) if name != "return" else None
            if isinstance(t, TensorType) and t.shape is None:
                return True
        return False

    def _param_names(self) -> list:
        names = self.__dict__.get("_names")
        if names is None:                  # read on every call: parsed once
            src = source_mod.load(self.entry.fn)
            names = self._names = [a.arg for a in src.tree.args.args][
                (1 if self.entry.is_method else 0):]
        return names

    @property
    def returns_outputs(self) -> bool:
        """Whether the entry has a return annotation: then it may also be called
        with its inputs only, its ``pl.Out`` tensors allocated and returned."""
        return "return" in self.entry.fn.__annotations__

    def _annotated_params(self) -> list | None:
        """The entry's parameters as its annotations type them (None when a bare
        ``pl.Tensor`` takes its shape from the call)."""
        built = self.precheck()._cache.get(("annotations",))
        return None if built is None else list(built[0].entry.params)

    def _check_args(self, args):
        names = self._param_names()
        if len(args) != len(names):
            also = ""
            params = self._annotated_params() if self.returns_outputs else None
            if params is not None:
                n_in = sum(1 for p in params if not _is_output(p))
                also = f" or {n_in} (return style: inputs only, outputs allocated and returned)"
            raise ArgumentError(f"{self.entry.fn.__name__} expects {len(names)} arguments "
                                f"(in-place, one per parameter){also}, got {len(args)}. "
                                f"Parameters: {names}")
        return names

    def complete_args(self, args) -> tuple:
        """A return-style call's full argument list: every ``pl.Out`` tensor
        allocated zero-filled from its annotation.  Other calls: ``args``."""
        if not self.returns_outputs or len(args) == len(self._param_names()):
            return tuple(args)
        params = self._annotated_params()
        if params is None or len(args) != sum(1 for p in params if not _is_output(p)):
            self._check_args(args)             # raises, naming both accepted counts
        like_torch = any(type(a).__module__.startswith("torch") for a in args)
        given = iter(args)
        full = []
        for p in params:
            if not _is_output(p):
                full.append(next(given))
                continue
            shape = p.type.shape
            if not all(isinstance(d, int) for d in shape):
                raise ProgramValueError(
                    f"Cannot allocate output tensor '{p.name}': its shape "
                    f"{[str(d) for d in shape]} contains dynamic dimensions.", code="TC422",
                    span=p.span, hint="pass the output tensor (in-place call), or give it a "
                                      "static shape")
            full.append(_zeros(shape, p.type.dtype, like_torch))
        return tuple(full)

    def returned_outputs(self, given, full):
        """What a return-style call returns (``full`` is ``complete_args(given)``):
        its ``pl.Out`` tensors, one, or a tuple for several, whatever the HOST
        orchestrator itself returns (as upstream).  None for an in-place call."""
        if len(given) == len(full):
            return None
        outs = [a for a, p in zip(full, self._annotated_params()) if _is_output(p)]
        return outs[0] if len(outs) == 1 else tuple(outs)

    def specialise(self, args) -> Executable:
        names = self._check_args(args)
        types = tuple(arg_type(a, n) for a, n in zip(args, names))
        key = types
        exe = self._cache.get(key)
        if exe is None:
            prog, facts = self._verified(list(types))
            self._check_world(prog, facts)
            self._lint(prog, facts)
            self._check_entry_shapes(prog, types, names)
            lowered = lower_program(prog, self.config.resolved_cache_dir())
            abstract = frozenset(f.fn for f in self.sub_workers.values()
                                 if f.requires_runtime_binding)
            exe = make_executable(prog, facts, lowered, self.config, abstract)
            exe.program_key = self.key
            self._cache[key] = exe
            self._lay_out(prog, lowered)
            try:                               # kept for from_dir(); a run does not need it
                builds.save(self.output_dir, self.entry.fn.__name__, builds.signature(args), exe,
                            names)
            except (OSError, pickle.PicklingError, TypeError, AttributeError) as e:
                warnings.warn(f"build not saved under {self.output_dir}: {e}", RuntimeWarning,
                              stacklevel=2)
        exe.output_dir = self.output_dir        # where run artefacts go (settable per program)
        return exe

    from_dir = staticmethod(builds.from_dir)

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
        merged Perfetto trace of the call (see runtime/rank/artefacts.py)."""
        return merged_trace_path(self.output_dir)

    def executables(self) -> list:
        """Specialisations compiled so far."""
        return [v for v in self._cache.values() if isinstance(v, Executable)]

    @property
    def sub_workers(self) -> dict:
        """The program's SubWorker functions by name (callbacks bind to them)."""
        return dict(self._sub_workers)

    @property
    def num_sub_workers(self) -> int:
        """DistributedConfig.num_sub_workers, at least the SubWorkers declared."""
        return max(self.config.dist.num_sub_workers, len(self._sub_workers))

    def prepare(self, *args, config=None, extra_compiled=(), persistent=False,
                reset_persistent_windows=None, callbacks=None, sub_worker_overrides=None,
                startup_timeout_s=None):
        """Start the rank processes once and keep them for many calls: a
        ``DistributedWorker`` (see ``tilecomm.runtime.worker.distributed_worker``).  A first
        positional ``RunConfig`` is the config (as upstream allows); host tensors
        given instead specialise the program first, so the ranks start with that
        code."""
        if args and (args[0] is None or isinstance(args[0], RunConfig)):
            if len(args) > 1 or config is not None:
                raise TypeError("prepare() takes at most one config")
            config, args = args[0], ()
        if args:
            self.specialise(args)
        return DistributedWorker(self, config, extra_compiled=extra_compiled,
                                 persistent=persistent,
                                 reset_persistent_windows=reset_persistent_windows,
                                 callbacks=callbacks, sub_worker_overrides=sub_worker_overrides,
                                 startup_timeout_s=startup_timeout_s)

    @entry_point
    def __call__(self, *args, config=None):
        worker = active_worker(self.platform)
        if worker is not None:          # inside ``with ChipWorker(...):`` it runs there
            return worker.run(self, *args, config=config)
        given, args = args, self.complete_args(args)
        for a in args:
            if isinstance(a, (DeviceTensor, StackedDeviceTensor)):
                raise ArgumentError("One-shot calls cannot accept DeviceTensor or "
                                    "StackedDeviceTensor arguments: device tensors live in a "
                                    "prepared worker; call it through that worker "
                                    "(rt(...) / rt.run(compiled, ...))", code="TC414")
        self._check_call_world(config)
        exe = self.specialise(args)
        unbound = [n for n, f in self._sub_workers.items() if f.requires_runtime_binding]
        if unbound:
            raise ConfigError(unbound_message(unbound).replace("prepare()", "prepare(); a "
                              "one-shot call cannot bind them"), code="TC425")
        cfg = config or self.config
        result = launch(exe, list(args), cfg)
        if cfg.enable_chip_swimlane and not cfg.trace_dir:   # (with a trace dir: said there)
            print(f"tilecomm: trace of this call of {self.name} written to {self.trace_path} "
                  f"(tilecomm trace {self.trace_path} summarises it)", file=sys.stderr)
        outputs = self.returned_outputs(given, args)
        return result if outputs is None else outputs


class CompiledPrograms:
    """A ``@pl.program`` with several HOST orchestrators (or, single-chip, several
    chip orchestration functions): ``compiled["name"]`` or ``compiled.name`` is
    the program of one of them; a worker prepared from it serves them all."""

    def __init__(self, name: str, programs: dict):
        self.name = name
        self.programs = programs

    def names(self) -> list:
        return list(self.programs)

    @property
    def orchestration_names(self) -> list:
        return self.names()

    def __getattr__(self, name):
        # only for names not found otherwise: an orchestration function's program
        programs = self.__dict__.get("programs", {})
        if name in programs:
            return programs[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __getitem__(self, name) -> CompiledProgram:
        try:
            return self.programs[name]
        except (KeyError, TypeError):
            raise KeyError(f"{self.name} has no orchestration function {name!r}; its "
                           f"orchestration functions are {self.names()}") from None

    def __iter__(self):
        return iter(self.programs.values())

    def __len__(self):
        return len(self.programs)

    @property
    def config(self) -> RunConfig:
        return next(iter(self.programs.values())).config

    def _ambiguous(self, what):
        return ArgumentError(f"{self.name} has several orchestration functions {self.names()}: "
                             f"{what} is ambiguous; select one explicitly: "
                             f"compiled[{self.names()[0]!r}]", code="TC424")

    def __call__(self, *args, config=None):
        raise self._ambiguous("calling the program")

    def specialise(self, args):
        raise self._ambiguous("specialising the program")

    def prepare(self, config=None, **options) -> DistributedWorker:
        """One worker for every orchestration function (dispatch with
        ``rt.run(compiled["name"], ...)``)."""
        return DistributedWorker(list(self.programs.values()), config, **options)


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


@entry_point
def compile(program, output_dir=None, *, platform=None, distributed_config=None, config=None):
    """Compile a ``@pl.program`` class or a ``@pl.jit.host`` function."""
    cfg = config or RunConfig()
    output_dir = os.fspath(output_dir) if output_dir is not None else None
    if platform is not None or distributed_config is not None or output_dir is not None:
        cfg = replace(cfg, platform=platform or cfg.platform,
                      distributed_config=distributed_config or cfg.distributed_config,
                      cache_dir=output_dir or cfg.cache_dir)
    if isinstance(program, ProgramClass):
        ns = SelfNamespace(program.cls, program.functions)
        if program.single_chip:
            # runs on one device, as upstream's L2 programs (a distributed
            # config names at most which one)
            cfg = replace(cfg, distributed_config=replace(cfg.dist,
                                                          device_ids=cfg.dist.device_ids[:1]))
        if program.entry is None:              # several entries: one program per name
            # upstream keeps each chip orchestration's build under next_levels/<name>
            sub = ("next_levels",) if program.single_chip else ()
            return CompiledPrograms(program.cls.__name__, {
                name: CompiledProgram(fn, config=cfg, self_ns=ns,
                                      output_dir=os.path.join(output_dir, *sub, name)
                                      if output_dir else None,
                                      sub_workers=program.sub_workers).precheck()
                for name, fn in program.entries.items()})
        cp = CompiledProgram(program.entry, config=cfg, self_ns=ns, output_dir=output_dir,
                             sub_workers=program.sub_workers)
        return cp.precheck()
    if isinstance(program, KernelFunction):
        cp = program.compile(config=cfg)
        if output_dir:                         # its own config (cache_dir), its own program
            cp.output_dir = output_dir
        return cp
    raise TypeError(f"tilecomm.ir.compile expects a @pl.program class or a @pl.jit.host "
                    f"function; got {program!r}")


__all__ = ["CompiledProgram", "CompiledPrograms", "arg_type", "compile", "compile_function", "make_executable"]
