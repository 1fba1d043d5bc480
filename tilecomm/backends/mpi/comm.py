"""The MPI library as the MPI backend sees it: mpi4py initialised with full
thread support, and the checks every process of a job makes before it
allocates anything.

Imported only when a run selects the MPI backend (``transport/__init__``
imports transports lazily), so ``import tilecomm`` never loads MPI.

Thread support: the process that runs the HOST orchestrator also runs rank
0's worker in a thread, and every rank receives its dispatches on a reader
thread while kernels issue RMA calls, so MPI must be initialised with
``MPI_THREAD_MULTIPLE``.  mpi4py initialises MPI on its first import with the
level in ``mpi4py.rc``: set here before that import.  A program that
imported mpi4py itself with a lower level gets a typed error (TC451).
"""
from __future__ import annotations

import os
import sys

from ...errors import ConfigError
from ...transport.segments import sweep
from . import jobwatch
from .hydrafiles import unlink_topology_file

try:
    import mpi4py
    if "mpi4py.MPI" not in sys.modules:
        mpi4py.rc.thread_level = "multiple"
    from mpi4py import MPI
except ImportError as e:          # reported when the backend is chosen, not at import of tilecomm
    MPI = None
    _IMPORT_ERROR = e
else:
    _IMPORT_ERROR = None

__all__ = ["MPI", "check_job", "mpiexec_path", "on_one_node"]


def require_mpi():
    """The ``mpi4py.MPI`` module, initialised with thread support (TC451 if not)."""
    if MPI is None:
        raise ConfigError(f"the MPI backend needs mpi4py and an MPI library: {_IMPORT_ERROR}",
                          code="TC451", hint="pip install 'tilecomm[mpi]' (mpi4py + mpich)")
    level = MPI.Query_thread()
    if level < MPI.THREAD_MULTIPLE:
        raise ConfigError(f"MPI was initialised with thread level {level}; the MPI backend needs "
                          f"MPI_THREAD_MULTIPLE ({MPI.THREAD_MULTIPLE})", code="TC451",
                          hint="import tilecomm's MPI backend before mpi4py.MPI, or set "
                               "mpi4py.rc.thread_level = 'multiple' before importing it")
    if "pid" not in _SWEEPER:                     # this process's first use of MPI
        jobwatch.install(MPI)
        unlink_library_segments()
        unlink_topology_file(MPI)
        _SWEEPER["pid"] = start_sweeper() if MPI.COMM_WORLD.Get_rank() == 0 else None
    return MPI


# Process-wide, like the process itself: the sweeper of process 0 (see below).
_SWEEPER: dict = {}


def start_sweeper() -> int:
    """Fork a small process that removes this process's /dev/shm segments
    once this process is gone.  mpiexec ends a job whose process died with
    SIGKILL to every other process -- no handler runs, so process 0 cannot
    remove the host-tensor segments of the call in progress itself.  The
    sweeper blocks reading a pipe only this process can write to; end of
    file means this process ended, however.  It holds nothing else: no MPI
    descriptor, no stdio (mpiexec waits for its processes' output to close),
    and calls nothing of MPI.  It is forked twice, so it is no child of this
    process (which reaps the intermediate one at once)."""
    owner = os.getpid()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()                           # not in the job's process group
            if os.fork() != 0:
                os._exit(0)
            # the sweeper
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            keep = sorted({0, 1, 2, r})
            for lo, hi in zip(keep, keep[1:] + [os.sysconf("SC_OPEN_MAX")]):
                os.closerange(lo + 1, hi)
            while os.read(r, 1):
                pass
            sweep(owner)
        finally:
            os._exit(0)
    os.close(r)
    os.waitpid(pid, 0)
    _SWEEPER["pipe"] = w                          # open until this process ends
    return pid


def on_one_node(comm) -> bool:
    """Whether every process of ``comm`` shares one node's memory (collective)."""
    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    try:
        return node.Get_size() == comm.Get_size()
    finally:
        node.Free()


def check_job(comm, world: int) -> None:
    """The job's size must be the program's world size (TC450); every
    process raises the same error, so none is left waiting."""
    size = comm.Get_size()
    if size != world:
        raise ConfigError(f"the program runs on {world} rank(s) (DistributedConfig.device_ids) "
                          f"but the MPI job has {size} process(es)", code="TC450",
                          hint=f"run it with mpiexec -n {world}, or give device_ids {size} "
                               f"entries")


def mpiexec_path() -> str | None:
    """The ``mpiexec`` installed next to this Python (the MPI wheel's), if any."""
    path = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    return path if os.access(path, os.X_OK) else None


def _shm_files(addr: int | None = None) -> list:
    """/dev/shm files mapped in this process (not yet unlinked): all of them,
    or the one mapped at ``addr``."""
    found = []
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split(None, 5)
            if len(parts) < 6:
                continue
            path = parts[5].strip()
            if not path.startswith("/dev/shm/") or path.endswith("(deleted)"):
                continue
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            if addr is None or lo <= addr < hi:
                found.append(path)
    return sorted(set(found))


def _unlink_on_rank0(comm, paths: list) -> None:
    comm.Barrier()                    # every process has mapped them
    if comm.Get_rank() == 0:
        for path in paths:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
    comm.Barrier()


def unlink_backing_file(comm, addr: int) -> None:
    """Collective, after every process mapped a shared window: remove the
    /dev/shm file behind the mapping at ``addr`` (MPICH keeps it until the
    window is freed, so a killed job would leave it behind).  The mappings
    stay valid, as for any unlinked file; freeing the window later only
    unmaps them.  Nothing is removed where the memory is not such a file."""
    _unlink_on_rank0(comm, _shm_files(addr))


def unlink_library_segments() -> None:
    """On this process's first use of MPI: remove the /dev/shm files MPICH
    mapped at initialisation (``mpich_shm_*``: its intra-node queues, one
    file per node, or per process where it runs each as a node of its own),
    which it would otherwise unlink only in ``MPI_Finalize`` -- never, if the
    job is killed.  No collective step is needed: MPICH synchronises the
    processes of a node at initialisation through a barrier that lives in
    that very file, so once ``MPI_Init`` returned in any of them, every one
    has mapped it.  Each process unlinks what it maps (the first one to get
    there wins); the mappings stay valid."""
    for path in _shm_files():
        if os.path.basename(path).startswith("mpich"):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
