"""Running a call under mpiexec: every MPI process runs the user's script, so
every process makes the same calls, and each call is one run of the HOST
orchestrator on the job's processes.

Design.  Process 0 is the controller, exactly as a forked run's caller: it
runs the HOST orchestrator, the monitor and rank 0's worker (a thread), with
the launcher, control plane and transport of this backend behind the
interfaces the shared-memory backend implements (``Launcher``,
``ControlPlane``, ``TransportHost``) -- so host-tensor dependencies, the
deadlock analysis and failure reports are the same code.  A process r > 0,
on reaching the call, serves rank r's dispatches (``rank.loop.rank_main``,
unchanged but for not being a forked child) until the run ends, then takes
the call's outcome from process 0: the outputs (``pl.Out`` / ``pl.InOut``
arguments, broadcast into its own arrays, so every process holds the full
results) or the error, raised there too.  So a script that checks its
results, or catches an error, behaves the same on every process.

Inputs: the tensors process 0 passed are the ones the program reads; the
others' arguments are only written (outputs).  Window buffers live in the
job's MPI RMA window (``backends/mpi/transport.py``).  The control plane -- rank
states, published waits, dispatch progress, collective counts, task
snapshots -- is a block held by process 0, in one of two layouts, chosen
as the window pool's (``MpiHost.pool.shared``):

* every process on one node, and ``TILECOMM_MPI_DIRECT`` not 0: one
  ``MPI_Win_allocate_shared`` window that every process maps, so it is the
  shared-memory control plane's code on MPI-allocated memory
  (``MpiControlPlane``);
* otherwise (across nodes, or ``TILECOMM_MPI_DIRECT=0`` to run on one
  machine exactly as across nodes): an ordinary MPI window reached by RMA
  calls only (``control.RmaControlPlane``).

Host tensors are process 0's /dev/shm segments, which the workers map by
name where the window pool is node-shared memory; otherwise they are reached
over RMA in a dynamic window (``hosts.py``).

Every collective MPI step (window creation and freeing, the outcome's
broadcast) is made by every process in the same order: ranks are set up and
closed, and calls made, by the same lines of the same script.

Failures: a rank's error, a deadlock or a fault of the HOST orchestrator is
raised on process 0 as in a forked run and re-raised on every other process.
A rank that does not end after the abort (user code that never reaches a
wait) cannot be killed from here: process 0 prints the report and aborts
the job (``MPI_Abort``), the last resort.  A process that goes away
between calls (an uncaught exception of the script's own, a script that
ends early) is noticed by the others at the gate each collective step
begins with, and the job ends (``backends/mpi/jobwatch.py``).
"""
from __future__ import annotations

import pickle
import sys

import numpy as np

from ...errors import ConfigError, DataRaceError, RankFailure, UserError
from .transport import MpiHost
from .comm import require_mpi, unlink_backing_file
from . import jobwatch, lifeline
from ...ir.types import INOUT, OUT
from ...runtime import control as C
from ...runtime import taskplane
from ...runtime.config import from_env
from ...runtime.executable import to_numpy
from .control import RmaControlPlane
from .hosts import open_host_window
from .launcher import TAG_EXIT, MpiLauncher, ProcessEnd
from ...runtime.controller.arguments import at_positions, result_positions
from ...runtime.controller.backend import Backend
from ...runtime.rank.loop import rank_main

__all__ = ["MpiBackend", "MpiControlPlane", "MpiJob"]


class _Block:
    """Process 0's share of the control window, as the shared-memory control
    plane uses a segment (address, typed views)."""

    name = "mpi-control"

    def __init__(self, memory: np.ndarray):
        self.memory = memory
        self.addr = memory.__array_interface__["data"][0]

    def ndarray(self, dtype, shape, offset=0):
        n = int(np.prod(shape)) * np.dtype(dtype).itemsize
        return self.memory[offset:offset + n].view(dtype).reshape(shape)

    def close(self):
        pass


class MpiControlPlane(C.ShmControlPlane):
    """The shared-memory control plane on the job's control window.  Native
    seq_cst loads, stores and futex wakes work on it as on a segment: an
    ``MPI_Win_allocate_shared`` window is one shared mapping in every process
    of the node."""

    def __init__(self, block: _Block, world: int, job=None):
        super().__init__(block, world)
        self.job = job

    def attach(self):
        return MpiControlPlane(self.segment, self.world)

    def close(self):
        if self.job is not None:
            job, self.job = self.job, None
            job.close()


class MpiJob:
    """What one set of ranks holds of the MPI job: a communicator of its own
    (the launcher's messages, the control plane's window) and, when the
    control plane is node-shared, its window (collective to create and to
    free; the RMA control plane creates its window itself)."""

    def __init__(self, MPI, world: int, shared: bool):
        self.MPI = MPI
        self.comm = MPI.COMM_WORLD.Dup()
        self.me = self.comm.Get_rank()
        self.shared = shared           # the control block is node-shared memory
        self.win = self.memory = None
        self.hosts = None        # process 0's host tensors over RMA, if so (hosts.py)
        if not shared:
            return                     # the RMA control plane makes its own window
        nbytes = C.control_size(world) + taskplane.area_size(world)
        self.win = MPI.Win.Allocate_shared(nbytes if self.me == 0 else 0, 8, comm=self.comm)
        mem, _ = self.win.Shared_query(0)
        self.memory = np.frombuffer(mem, np.uint8)
        if self.me == 0:
            self.memory[:] = 0
        # nobody reads the block before it is zero (the function's barriers)
        unlink_backing_file(self.comm, self.memory.__array_interface__["data"][0])

    def close(self):
        if self.hosts is not None:
            hosts, self.hosts = self.hosts, None
            hosts.close()
        self.memory = None
        if self.win is not None:
            self.win.Free()
        self.comm.Free()


def races_refused() -> ConfigError:
    """The race check asked for in a job whose control block is reached over
    RMA (processes on several nodes, or TILECOMM_MPI_DIRECT=0).  Why not,
    precisely: the check orders every notify into a signal cell by a ticket
    sequencer that each rank takes with native atomics in the node-shared
    control block, and process 0 reads each rank's access log from its own
    /dev/shm after the call.  Neither reaches over MPI here: the control
    block is process 0's memory behind RMA, and another node's logs are in
    that node's /dev/shm."""
    return ConfigError(
        "RunConfig.detect_races cannot check a job whose control block is reached over MPI "
        "RMA (its processes on several nodes, or TILECOMM_MPI_DIRECT=0): the check numbers "
        "the notifies into each signal cell by a sequencer every rank takes with atomics in "
        "node-shared memory, and reads every rank's access log from process 0's /dev/shm; "
        "across nodes the control block is process 0's memory behind RMA and the logs stay "
        "on their own node.  Nothing ran: the call's outputs are untouched",
        code="TC402",
        hint="what you have across nodes is the protocol lint (TC7xx), run when the program "
             "is compiled on every process; for the race check, run the same script with "
             "every process on one node (mpiexec -n N on one host), or with python on the "
             "shm transport, then across nodes with detect_races off "
             "(TILECOMM_DETECT_RACES unset, no --detect-races)")


class MpiBackend(Backend):
    """The MPI backend: the per-call glue -- process 0 controls, the others
    serve and receive.  Built on every process of the job, collectively."""

    spmd = True

    def __init__(self, ranks):
        super().__init__(ranks)
        MPI = require_mpi()
        jobwatch.gate(jobwatch.SET_UP)     # every process is here before any collective step
        lifeline.start(MPI)                # across nodes: a silent host ends the job
        mb = from_env().get("mpi_pool_mb")
        if mb is not None and not (mb.isdigit() and int(mb) > 0):
            raise ConfigError(f"TILECOMM_MPI_POOL_MB must be a positive number of MiB, got "
                              f"{mb!r}", code="TC402")
        ranks.transport = MpiHost(ranks.world, pool_bytes=int(mb) << 20 if mb else None,
                                  direct=from_env().get("mpi_direct", True))
        shared = ranks.transport.pool.shared
        job = MpiJob(MPI, ranks.world, shared)
        ranks.control = MpiControlPlane(_Block(job.memory), ranks.world, job) if shared else \
            RmaControlPlane(job.comm, ranks.world, job)
        ranks.launcher = MpiLauncher(ranks.world, MPI, job.comm, ranks.images)
        job.hosts = open_host_window(MPI, job.comm, shared, ranks.launcher)
        self.MPI = MPI
        self.job = job
        self.host_window = job.hosts   # None unless ranks reach host tensors over RMA

    @classmethod
    def runs_host_code(cls) -> bool:
        return require_mpi().COMM_WORLD.Get_rank() == 0

    def rank_host_tensors(self, keep):
        if self.host_window is None:
            return super().rank_host_tensors(keep)
        return self.host_window.rank_tensors(keep)

    def execute(self, ranks, executable, args, config, run_call, last):
        # every call is the job's last for the serving processes: each serves
        # one call, then takes its outcome from process 0.  Every process
        # reaches this call before process 0 begins it (a peer that went
        # away, or one at another step, is noticed here); and process 0
        # clears the last call's run artefacts when this call begins, which
        # every process may still be reading
        with jobwatch.call():
            if self.job.me == 0:
                return self._control(ranks, executable, args, config, run_call)
            return self._serve(ranks, executable, args)

    def share(self, host: np.ndarray) -> None:
        """Process 0's contents of ``host`` on every process (collective)."""
        buf = host if host.flags.c_contiguous else np.ascontiguousarray(host)
        self.job.comm.Bcast(_raw(buf), root=0)
        if buf is not host:
            np.copyto(host, buf)

    # -------------------------------------------------------------- process 0
    def _control(self, ranks, executable, args, config, run_call):
        launcher = ranks.launcher
        launcher.begin_call()
        try:
            if config.races_enabled and not self.job.shared:
                raise races_refused()
            result = run_call(True)
        except BaseException as e:
            launcher.end_call()
            if launcher.stuck:
                self._give_up(e, launcher)
            self._withdraw()
            # a race report comes with the results (written back on process 0)
            raced = isinstance(e, DataRaceError)
            self._bcast(("raced" if raced else "error", _portable(e)))
            if raced:
                self._send_outputs(executable, args)
            try:
                e.raised_on_every_process = True  # no reason to abort the job (jobwatch)
            except (AttributeError, TypeError):
                pass
            raise
        launcher.end_call()
        if launcher.stuck:
            self._give_up(None, launcher)
        self._withdraw()
        held = len(ranks.persistent) if ranks.persistent is not None else 0
        self._bcast(("ok", (result_positions(result, args), held)))
        self._send_outputs(executable, args)
        return result

    def _send_outputs(self, executable, args):
        for i in _outputs(executable, args):
            a = np.ascontiguousarray(to_numpy(args[i]))
            self.job.comm.Bcast(_raw(a), root=0)

    def _receive_outputs(self, executable, args):
        """Process 0's outputs, into this process's arrays (``_send_outputs``)."""
        for i in _outputs(executable, args):
            a = to_numpy(args[i])
            buf = a if a.flags.c_contiguous else np.empty(a.shape, a.dtype)
            self.job.comm.Bcast(_raw(buf), root=0)
            if buf is not a:
                np.copyto(a, buf)

    def _give_up(self, error, launcher):
        lines = [f"tilecomm: rank(s) {launcher.stuck} did not stop after the call ended; "
                 f"aborting the MPI job"]
        if error is not None:
            lines.insert(0, f"{type(error).__name__}: {error}")
        print("\n".join(lines), file=sys.stderr, flush=True)
        self.MPI.COMM_WORLD.Abort(1)

    def _withdraw(self):
        """Every rank is out of the call: detach the host segments it closed."""
        if self.host_window is not None:
            self.host_window.withdraw_closed()

    def _bcast(self, header):
        self.job.comm.bcast(header, root=0)

    # -------------------------------------------------------------- process r > 0
    def _serve(self, ranks, executable, args):
        MPI, comm = self.MPI, self.job.comm
        end = ProcessEnd(MPI, comm)
        ranks.launcher.served.discard(self.job.me)
        try:
            code = rank_main(self.job.me, ranks.setup(), end)
        finally:
            ranks.launcher.end_tasks(self.job.me)
        # the worker's inbox stopped reading (end_tasks); this call's channel
        # ends at its Shutdown (always sent): read up to it, or the next
        # call's worker would take it (a worker stopped by an abort, or that
        # failed to start, returns before it)
        while not end.shut.is_set():
            end.recv_bytes()
        comm.Send([np.array([code], np.int64), MPI.BYTE], 0, TAG_EXIT)
        kind, payload = comm.bcast(None, root=0)
        if kind == "error":
            _brief_replicas(self.job.me)
            raise _rebuild(payload)
        if kind == "raced":                # an error that comes with the results
            self._receive_outputs(executable, args)
            _brief_replicas(self.job.me)
            raise _rebuild(payload)
        payload, held = payload
        if ranks.persistent is not None:      # process 0 holds the domains: its count
            ranks.persistent.held_by_controller = held
        self._receive_outputs(executable, args)
        return at_positions(payload, args)


def _raw(a: np.ndarray) -> np.ndarray:
    """A contiguous array's bytes (MPI has no BF16 / FP16 buffer type)."""
    return a.reshape(-1).view(np.uint8)


def _outputs(executable, args) -> list:
    """Indices of the arguments the call writes back (arrays passed as outputs)."""
    dirs = executable.directions[executable.entry_info.name]
    return [i for i, (a, d) in enumerate(zip(args, dirs))
            if d in (OUT, INOUT) and to_numpy(a) is not None]


def _portable(e: BaseException):
    """An error as it can travel to the other processes: its class, args and
    attributes (tilecomm errors keep their fields in attributes, not args)."""
    state = {k: v for k, v in e.__dict__.items() if k != "cause"}
    try:
        data = pickle.dumps((type(e), e.args, state))
        pickle.loads(data)
        return data
    except Exception:
        return pickle.dumps((RankFailure, (str(e),), {"rank": getattr(e, "rank", 0),
                                                      "traceback_text": ""}))


def _brief_replicas(me: int) -> None:
    """Uncaught, an error process 0 reports in full is one line on the other
    processes instead of N copies of the same report (any other error is
    printed as before).  Installed on the first such error."""
    hook = sys.excepthook
    if getattr(hook, "tilecomm_brief", False):
        return

    def brief(etype, value, tb):
        if not getattr(value, "reported_by_process_0", False):
            return hook(etype, value, tb)
        first = (str(value).splitlines() or [""])[0]
        print(f"{etype.__module__}.{etype.__qualname__} on process {me} (process 0 prints the "
              f"report): {first}", file=sys.stderr, flush=True)

    brief.tilecomm_brief = True
    sys.excepthook = brief


def _rebuild(data: bytes) -> BaseException:
    cls, args, state = pickle.loads(data)
    e = cls.__new__(cls)
    e.args = args
    e.__dict__.update(state)
    if isinstance(e, UserError) and e.diagnostics:
        # the first diagnostic is the error itself (not the copy that travelled)
        e.diagnostics = [e, *e.diagnostics[1:]]
    e.reported_by_process_0 = True
    return e

