"""Prepared workers: start the rank processes once, run many calls on them.

``compiled.prepare(...)`` / ``DistributedWorker(compiled_or_list, ...)`` start
one process per rank and keep them for every call of every program registered
with the worker (several programs share one set of ranks).  A call costs its
dispatches, not a process start.  Windows are fresh (zero-filled) on every
call unless the worker is ``persistent``: then each window buffer is
allocated on first use and kept (see ``persistent.py``).  Device tensors
(``alloc_tensor`` / ``alloc_stacked_tensor``) and raw blocks (``malloc``)
live as long as the worker (see ``device_tensors.py``).

Calls are served one at a time, in order: ``submit`` queues a call for the
worker's dispatcher thread and returns a handle at once (at most two calls
in flight; a third ``submit`` waits for the oldest to finish), and a blocking
call first lets the submitted ones finish.  A failed call (a rank raising, a
deadlock, Ctrl-C) stops the ranks and is raised; the next call starts new
ones (persistent windows start zeroed again; device tensors survive, they are
the worker's, not the ranks').  ``close()`` (or leaving a ``with`` block, or
interpreter exit) drains what was submitted, stops the ranks and removes every
segment.
"""
from __future__ import annotations

import atexit
import itertools
import math
import os
import queue
import threading
import weakref

from ...errors import ArgumentError, ConfigError, DataRaceError, RuntimeFault
from ...transport import segments as S
from ..controller.arguments import check_arguments
from ..executable import to_numpy
from .device_tensors import DeviceTensor, ResidentMemory, StackedDeviceTensor
from .handles import DistributedRunHandle, RegistrationHandle
from ..controller.backend import backend_class
from ..controller.ranks import Ranks, next_id
from ..controller.race_history import RaceHistory
from ..controller.run import Run, execute
from .pipeline import Pipeline
from ..controller.subworkers import bind_callbacks

_OPEN: "weakref.WeakSet[DistributedWorker]" = weakref.WeakSet()
IN_FLIGHT = 2            # submitted calls that may be queued or running at once
_WORKER_IDS = itertools.count(1)


def _programs(compiled_or_list, extra_compiled) -> list:
    if compiled_or_list is None:
        progs = []
    elif isinstance(compiled_or_list, (list, tuple)):
        progs = list(compiled_or_list)
    else:
        progs = [compiled_or_list]
    progs += list(extra_compiled or ())
    # a program with several orchestration functions brings each of them
    progs = [q for p in progs for q in (p if hasattr(p, "programs") and
                                        hasattr(p, "names") else [p])]
    if not progs:
        raise ConfigError("DistributedWorker requires at least one compiled program",
                          code="TC417")
    for p in progs:
        if not hasattr(p, "specialise") or not hasattr(p, "config"):
            raise ConfigError(f"DistributedWorker takes compiled programs (fn.compile(...), "
                              f"tilecomm.ir.compile(...)); got {type(p).__name__}", code="TC417")
    unique = []
    for p in progs:                      # the same program given twice is registered once
        if not any(p is q for q in unique):
            unique.append(p)
    first = unique[0].config
    for p in unique[1:]:
        c = p.config
        if (c.platform, c.dist.device_ids, c.dist.runtime) != \
                (first.platform, first.dist.device_ids, first.dist.runtime):
            raise ConfigError(
                "DistributedWorker multi-program mode requires the same platform/device_ids/"
                f"runtime: {first.platform}/{list(first.dist.device_ids)}/{first.dist.runtime} "
                f"vs {c.platform}/{list(c.dist.device_ids)}/{c.dist.runtime}", code="TC417")
    return unique


class DistributedWorker:
    """Ranks kept alive across calls of one or more compiled programs."""

    def __init__(self, compiled_or_list=None, config=None, *, extra_compiled=(),
                 persistent=False, reset_persistent_windows=None, callbacks=None,
                 sub_worker_overrides=None, inherited_host_tensors=None,
                 startup_timeout_s=None):
        self._programs = _programs(compiled_or_list, extra_compiled)
        if reset_persistent_windows and not persistent:
            raise ConfigError("DistributedWorker reset_persistent_windows=True requires "
                              "persistent=True", code="TC417")
        if startup_timeout_s is not None and (
                isinstance(startup_timeout_s, bool)
                or not isinstance(startup_timeout_s, (int, float))
                or not math.isfinite(startup_timeout_s) or startup_timeout_s <= 0):
            raise ConfigError(f"startup_timeout_s must be None or a finite number > 0, got "
                              f"{startup_timeout_s!r}", code="TC417")
        self.callbacks = bind_callbacks(self._programs, callbacks, sub_worker_overrides)
        self.persistent = bool(persistent)
        self.reset_persistent_windows = (self.persistent if reset_persistent_windows is None
                                         else bool(reset_persistent_windows))
        primary = self._programs[0]
        # the ranks' transport and wait tuning come from the primary program's
        # config; ``config`` (upstream: ring sizing pre-warm) is checked, not kept
        if config is not None and not hasattr(config, "resolved_transport"):
            raise ConfigError(f"config must be a RunConfig, got {type(config).__name__}",
                              code="TC417")
        self._config = primary.config
        # the backend the ranks run on (its class: what a call may do there)
        self._backend = backend_class(self._config.resolved_transport())
        self._inherited = list(inherited_host_tensors or ())
        self._ranks: Ranks | None = None
        self._closed = False
        self._last_submitted = None     # the handle of the last submit()
        self._race_history = None       # the checked calls in flight together, if any
        self.id = next(_WORKER_IDS)
        self._owner = os.getpid()
        self._segment_id = next_id()     # names of the worker's resident segments
        self._segments = 0
        self.memory = ResidentMemory(self._new_segment, primary.world, self)
        # one call on the ranks at a time (a blocking one or the dispatcher's)
        self._lock = threading.Lock()
        self._admission = threading.Semaphore(IN_FLIGHT)
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._pending: list = []         # submitted handles not yet finished, oldest first
        self._sent = 0                   # pipelined calls sent and not yet finished
        self._pipeline = Pipeline(self._finish_pipelined)   # those calls' second halves
        self._warm: set = set()          # (image, argument sizes) a persistent call checked
        self._pending_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        _OPEN.add(self)
        self._start()

    # ------------------------------------------------------------ state
    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def programs(self) -> tuple:
        return tuple(self._programs)

    @property
    def world(self) -> int:
        return self._programs[0].world

    @property
    def persistent_domains(self) -> int:
        """How many persistent window buffers the current ranks hold."""
        ranks = self._ranks
        return len(ranks.persistent) if ranks is not None and ranks.persistent else 0

    def _new_segment(self, nbytes: int):
        name = S.segment_name(self._owner, self._segment_id, self._segments)
        self._segments += 1
        return S.Segment.create(name, nbytes)

    def _start(self):
        self._warm.clear()              # new ranks: no window or argument segment exists
        reset = self.reset_persistent_windows if self.persistent else None
        self._ranks = Ranks(self.world, self._config, persistent_reset=reset,
                            pool_arguments=True)
        # specialisations compiled so far are inherited by the fork; later
        # ones are sent to the workers when first used
        for p in self._programs:
            for exe in p.executables():
                self._ranks.know(exe.image)
        self._ranks.start()

    def _check_open(self, op):
        if self._closed:
            raise RuntimeFault(f"DistributedWorker.{op}() called after close()", code="TC413")

    def _registered(self, compiled):
        if not any(compiled is p for p in self._programs):
            raise ConfigError("DistributedWorker.submit/run requires a DistributedCompiledProgram "
                              "registered when this worker was constructed.", code="TC415")

    # ------------------------------------------------------------ calls
    def __call__(self, *args, config=None):
        """Blocking call of the worker's only program."""
        self._check_open("__call__")
        if len(self._programs) > 1:
            raise ArgumentError("rt(*args) is ambiguous on a multi-program DistributedWorker; "
                                "dispatch explicitly with rt.run(compiled, *args).", code="TC416")
        return self._blocking(self._programs[0], args, config)

    def run(self, compiled, *args, config=None):
        """Blocking call of a registered program; outputs land in place."""
        self._check_open("run")
        self._registered(compiled)
        return self._blocking(compiled, args, config)

    def submit(self, compiled, *args, config=None) -> DistributedRunHandle:
        """Queue a call of a registered program and return its handle at once.
        Two calls may be in flight; a third waits for the oldest to finish.
        Calls run in submission order; concurrent calls need distinct output
        tensors (the caller's tensors are written when each call finishes)."""
        self._check_open("submit")
        self._registered(compiled)
        call = self._prepare_call(compiled, args)
        pipelined = self._pipelines(call[0])
        outputs = _returned(compiled, args, call[1])
        if not self._admission.acquire(blocking=False):
            self._pipeline.drive(oldest_only=True)   # finished here rather than waited for
            self._admission.acquire()
        # a pipelined call is finished by the first thread that asks for it
        handle = DistributedRunHandle(compiled, self._pipeline.drive if pipelined else None,
                                      outputs)
        try:
            self._check_open("submit")
            with self._pending_lock:
                self._pending.append(handle)
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, daemon=True,
                                                name=f"tilecomm-worker-{self.id}")
                self._thread.start()
        except BaseException:
            self._admission.release()
            raise
        if not pipelined:
            self._queue.put(("run", handle, call, config))
            return handle
        history = self._history_for(call[0], config, handle)
        try:                            # sent now, while the call before may still run
            run = self._begin(call, config, history)
        except BaseException as e:      # kept for result(), as if it had run in the background
            self._finished(handle, error=e)
            return handle
        if self._pipeline.add(handle, run):  # the dispatcher finishes what nobody asked for
            self._queue.put(("watch", None, None, None))
        return handle

    def _pipelines(self, exe) -> bool:
        """Whether a submitted call may be sent before the ones in flight
        finished: with fresh windows (each run allocates its own segments and
        the transport forgets only that run's when it ends, so two runs never
        share a window) or kept persistent windows, not zeroed ones (zeroing,
        like resetting the control block, needs every rank idle); without
        SubWorkers (they wait on the ranks from the sending thread); and on a
        single-program worker: the per-buffer collective counts are reset
        between runs unless pipelined, and only one program's runs keep them
        equal across a domain's members.  Not under an SPMD backend (MPI),
        whose every call is a collective step of all the job's processes, one
        call at a time."""
        return not exe.sub_workers and len(self._programs) == 1 and \
            (not self.persistent or not self.reset_persistent_windows) and \
            not self._backend.spmd

    def _history_for(self, exe, config, handle):
        """The race history a pipelined call joins (``race_history.py``): that
        of the call submitted before it, if the caller has not waited for
        that one yet and the windows are kept; else a new one, or None when
        the call is not checked."""
        with self._lock:
            last, self._last_submitted = self._last_submitted, handle
            if not self._run_config(exe, config).races_enabled or not self.persistent:
                return None
            if last is not None and not last.taken and self._race_history is not None:
                return self._race_history
            self._end_history()
            self._race_history = RaceHistory(self.world)
            return self._race_history

    def _end_history(self) -> None:
        if self._race_history is not None:
            self._race_history.end()
            self._race_history = None

    def _begin(self, call, config, history=None):
        exe, args = call
        with self._lock:
            ranks = self._live_ranks()
            with self._pending_lock:
                idle = self._sent == 0
                self._sent += 1
            try:
                return Run(ranks, exe, self._run_config(exe, config), self.callbacks,
                           race_history=history).begin(args, idle=idle, reset_control=False)
            except BaseException:
                with self._pending_lock:
                    self._sent -= 1
                self._drop(ranks)
                raise

    def _live_ranks(self) -> Ranks:
        """The ranks, started afresh if none or a rank died while idle (under _lock).
        While a pipelined call is in flight the ranks are not idle (a readable
        channel may be its Failed, not a death): the monitor of that call
        watches them."""
        with self._pending_lock:
            idle = self._sent == 0
        if self._ranks is not None and (self._ranks.failed or
                                        idle and not self._ranks.alive()):
            self._ranks.close()
            self._ranks = None
        if self._ranks is None:
            self._start()
        return self._ranks

    def _drop(self, ranks) -> None:
        """After a failure: the ranks were stopped by it; the next call starts new ones."""
        ranks.close()
        if self._ranks is ranks:
            self._ranks = None

    def _finished(self, handle, value=None, error=None) -> None:
        handle._set(value, error)
        with self._pending_lock:
            self._pending.remove(handle)
        self._admission.release()

    def register(self, compiled) -> RegistrationHandle:
        self._check_open("register")
        self._registered(compiled)
        return RegistrationHandle(self, compiled)

    def _prepare_call(self, compiled, args):
        """Check a call before it is queued or run: (executable, args)."""
        args = compiled.complete_args(args)     # return style: outputs allocated
        if any(isinstance(a, (DeviceTensor, StackedDeviceTensor)) for a in args):
            self._check_device_arguments(compiled, args)
        exe = compiled.specialise(args)
        # refused before the ranks are touched: they stay.  Room in /dev/shm is
        # checked until this program's persistent windows and this signature's
        # argument segments exist (then a call creates nothing)
        warm = self.persistent and (exe.image.key, _sizes(args)) in self._warm
        check_arguments(exe, args, space=not warm)
        if self.persistent and not warm:
            self._warm.add((exe.image.key, _sizes(args)))
        return exe, list(args)

    def _check_device_arguments(self, compiled, args):
        names = compiled._check_args(args)
        for name, a in zip(names, args):
            if isinstance(a, (DeviceTensor, StackedDeviceTensor)):
                kind = type(a).__name__
                if a._owner is not self:
                    raise ArgumentError(f"Parameter '{name}': this {kind} was allocated by "
                                        f"another DistributedWorker", code="TC414")
                if a.freed:
                    raise ArgumentError(f"Parameter '{name}': this {kind} was freed",
                                        code="TC414")

    def _blocking(self, compiled, args, config):
        call = self._prepare_call(compiled, args)
        self._drain()                   # submitted calls first, in order
        with self._lock:                # nothing is in flight with a blocking call
            self._last_submitted = None
            self._end_history()
        result = self._execute(call, config)
        outputs = _returned(compiled, args, call[1])
        return result if outputs is None else outputs

    def _execute(self, call, config, admitted=False):
        exe, args = call
        with self._lock:
            if not admitted:            # a submitted call runs even while close() drains
                self._check_open("run")
            ranks = self._live_ranks()
            try:
                # one program: no control-block reset between runs (see begin)
                return execute(ranks, exe, args, self._run_config(exe, config),
                               callbacks=self.callbacks,
                               reset_control=len(self._programs) > 1)
            except DataRaceError:
                raise                   # the run completed: the ranks and windows stay
            except BaseException:
                self._drop(ranks)       # already killed by execute: drop the husk
                raise

    @staticmethod
    def _run_config(exe, config):
        # a per-call config sets that call's run-time knobs (time-outs, ring
        # limits); the ranks' transport and devices stay the worker's
        if config is None:
            return exe.config
        if not hasattr(config, "resolved_transport"):
            raise ConfigError(f"config must be a RunConfig, got {type(config).__name__}",
                              code="TC417")
        return config

    def _serve(self):
        while True:
            item = self._queue.get()
            if item is None:
                return
            kind, handle, what, config = item
            if kind == "watch":
                self._pipeline.watch()
                continue
            value = error = None
            try:
                value = self._execute(what, config, admitted=True)
            except BaseException as e:  # kept for result(); the next call restarts ranks
                error = e
            self._finished(handle, value, error)

    def _finish_pipelined(self, handle, run) -> None:
        value = error = None
        try:
            value = self._finish(run)
        except BaseException as e:      # kept for result(); the next call restarts ranks
            error = e
        self._finished(handle, value, error)

    def _finish(self, run):
        """The second half of a pipelined call, in submission order."""
        try:
            if run.ranks.failed:        # stopped under it by a failure of another call
                run.release()
                raise RuntimeFault("the call was stopped: another call on this DistributedWorker "
                                   "failed while it was in flight", code="TC426")
            try:
                return run.finish()
            except DataRaceError:
                raise                   # the run completed: the ranks and windows stay
            except BaseException:
                with self._lock:
                    self._drop(run.ranks)
                raise
        finally:
            with self._pending_lock:
                self._sent -= 1

    def _drain(self, timeout=None) -> None:
        """Wait until every submitted call has finished."""
        if timeout is None:
            self._pipeline.drive()      # pipelined calls: finished in this thread
        while True:
            with self._pending_lock:
                last = self._pending[-1] if self._pending else None
            if last is None:
                return
            last._finished.wait(timeout)
            if timeout is not None:
                return

    # ------------------------------------------------------------ device memory
    def alloc_tensor(self, shape, dtype, *, init=None, worker_id=0) -> DeviceTensor:
        """A tensor resident on worker ``worker_id`` (zero-filled, or a copy of
        ``init``), freed by ``free_tensor`` or ``close()``."""
        self._check_open("alloc_tensor")
        return self.memory.alloc_tensor(shape, dtype, init, worker_id)

    def free_tensor(self, t, *, worker_id=0) -> None:
        """Free a device tensor of this worker; idempotent."""
        self._check_open("free_tensor")
        if not isinstance(t, DeviceTensor):
            raise ArgumentError(f"free_tensor takes a DeviceTensor, got {type(t).__name__}",
                                code="TC418")
        if t._owner is not self:
            raise ConfigError("free_tensor: the DeviceTensor was allocated by another "
                              "DistributedWorker", code="TC418")
        if t.worker_id != worker_id:
            raise ConfigError(f"free_tensor: the tensor lives on worker {t.worker_id}, not "
                              f"worker {worker_id}", code="TC418")
        self.memory.release(t._block)

    def alloc_stacked_tensor(self, host, *, worker_ids=None) -> StackedDeviceTensor:
        """Shard ``host[i]`` uploaded to worker ``worker_ids[i]`` (default i)."""
        self._check_open("alloc_stacked_tensor")
        return self.memory.alloc_stacked(host, worker_ids)

    def free_stacked_tensor(self, s) -> None:
        self._check_open("free_stacked_tensor")
        self._own_stacked(s, "free_stacked_tensor")
        for shard in s.shards:
            self.memory.release(shard._block)

    def copy_stacked_from(self, s, host_out) -> None:
        """Read every shard back into ``host_out`` (CPU-contiguous, s's shape)."""
        self._check_open("copy_stacked_from")
        self._own_stacked(s, "copy_stacked_from")
        if s.freed:
            raise ConfigError("copy_stacked_from: the StackedDeviceTensor was freed",
                              code="TC418")
        from_host = _writable_host(host_out)
        if from_host.shape != s.shape or from_host.dtype != s.dtype:
            raise ConfigError(f"copy_stacked_from: host_out is {from_host.dtype}"
                              f"{list(from_host.shape)}, the stacked tensor is {s.dtype}"
                              f"{list(s.shape)}", code="TC418")
        for i, shard in enumerate(s.shards):
            from_host[i] = shard.array()
        self._as_process_0(from_host)

    def _own_stacked(self, s, op):
        if not isinstance(s, StackedDeviceTensor):
            raise ArgumentError(f"{op} takes a StackedDeviceTensor, got {type(s).__name__}",
                                code="TC418")
        if s._owner is not self:
            raise ConfigError(f"{op}: the StackedDeviceTensor was allocated by another "
                              f"DistributedWorker", code="TC418")

    def malloc(self, nbytes, *, worker_id=0) -> int:
        """``nbytes`` of zero-filled resident memory on worker ``worker_id``;
        returns its device address."""
        self._check_open("malloc")
        return self.memory.malloc(nbytes, worker_id).address

    def free(self, ptr, *, worker_id=0) -> None:
        self._check_open("free")
        self.memory.free_address(ptr, worker_id)

    def copy_to(self, dst_dev_ptr, src_host_ptr, nbytes, *, worker_id=0) -> None:
        """Copy ``nbytes`` from host address ``src_host_ptr`` to a device address."""
        self._check_open("copy_to")
        self._drain()                   # not under a call that may read it
        self.memory.copy_to(dst_dev_ptr, src_host_ptr, nbytes, worker_id)

    def copy_from(self, dst_host_ptr, src_dev_ptr, nbytes, *, worker_id=0) -> None:
        """Copy ``nbytes`` from a device address to host address ``dst_host_ptr``."""
        self._check_open("copy_from")
        self._drain()                   # after the calls that may write it
        self._as_process_0(self.memory.copy_from(dst_host_ptr, src_dev_ptr, nbytes, worker_id))

    def _as_process_0(self, host) -> None:
        """Under MPI, device memory that calls wrote is process 0's (its
        arguments are the ones the ranks see, as for host tensors): a read
        of it gives every process process 0's bytes.  Collective there, as
        every process makes the same read; nothing elsewhere."""
        if self._backend.spmd:
            with self._lock:
                self._live_ranks().backend.share(host)

    def release_inherited_host_tensor_refs(self) -> None:
        self._check_open("release_inherited_host_tensor_refs")
        self._inherited.clear()

    # ------------------------------------------------------------ shutdown
    def close(self):
        """Stop admitting calls, let the submitted ones finish (in order), stop
        the ranks, free device memory and persistent windows; idempotent."""
        self._close(None)

    def _close(self, timeout):
        if self._closed:
            return
        self._closed = True              # no new call is admitted from here on
        self._drain(timeout)
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join(timeout)
            self._thread = None
        # at interpreter exit a daemon thread's call may never return: after
        # ``timeout`` the ranks are stopped under it
        locked = self._lock.acquire(timeout=-1 if timeout is None else timeout)
        try:
            if self._ranks is not None:
                ranks, self._ranks = self._ranks, None
                ranks.close(graceful=locked)
            self.memory.close()
            self._inherited.clear()
            self._end_history()
            S.sweep(self._owner, self._segment_id)
        finally:
            if locked:
                self._lock.release()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


def _returned(compiled, given, full):
    """A return-style call's allocated outputs (None for an in-place call, and
    for a reloaded build, which takes in-place calls only)."""
    pick = getattr(compiled, "returned_outputs", None)
    return None if pick is None else pick(given, full)


def _sizes(args) -> tuple:
    """Byte sizes of the host arrays of a call (what its argument segments need)."""
    out = []
    for a in args:
        arr = to_numpy(a) if not isinstance(a, (DeviceTensor, StackedDeviceTensor)) else None
        out.append(arr.nbytes if arr is not None else 0)
    return tuple(out)


def _writable_host(x):
    a = to_numpy(x)
    if a is None or not a.flags.c_contiguous or not a.flags.writeable:
        raise ConfigError("copy_stacked_from: host_out must be a writable, C-contiguous CPU "
                          "numpy array or torch tensor", code="TC418")
    return a


@atexit.register
def _close_all():
    for w in list(_OPEN):
        w._close(timeout=5.0)


__all__ = ["DistributedWorker", "IN_FLIGHT"]
