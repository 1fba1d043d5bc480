"""Forking rank processes so that their lifetime and their descriptors belong
to the calling *process*, whatever thread asks for them.

Three Linux facts shape this module:

* ``PR_SET_PDEATHSIG`` (set by every rank, see ``rank/loop.py``) fires when the
  *thread* that forked the rank exits, not the process.  Ranks requested by
  the main thread are forked there: it lives as long as the process.  Ranks
  requested by any other thread are forked by a launcher thread that lives
  until those ranks are reaped, so a worker prepared in a short-lived thread
  survives that thread.
* The controller notices a rank's death as EOF on its end of the rank's pipe,
  which comes only once *every* copy of the rank's end is closed.  Creating
  the pipe, forking and closing the child's end in the parent happen under
  one process-wide lock, so no rank forked for a concurrent call can inherit
  another rank's end.
* A child inherits every descriptor of the parent, whatever its close-on-exec
  flag: other calls' pipe ends, the user's files and sockets.  Each child
  points every descriptor it does not need at ``/dev/null``.  It does not
  close them: objects inherited from the parent still hold those numbers and
  may close them when collected, which must not hit a descriptor the rank
  opened since.  Likewise a child inherits the parent's mappings of every
  segment alive at the fork -- other calls' windows, possibly GiBs that
  could not be freed until the rank exits.  A rank maps what it uses itself,
  so each inherited segment mapping is replaced by an inaccessible private
  one of the same range (the range stays reserved for the same reason).
"""
from __future__ import annotations

import ctypes
import mmap
import os
import queue
import re
import select
import signal
import threading
from multiprocessing.connection import Pipe

from ... import dtypes as D
from ...transport import segments as S

# Blocked around each fork so that a Ctrl-C or SIGTERM handler cannot run
# between the fork and recording the child's pid (the child would be lost to
# the caller's cleanup).  The child restores the caller's mask.
_DEFERRED = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}

_PROT_NONE = 0
_MAP_FIXED = 0x10                       # asm-generic: x86, Arm, RISC-V, PowerPC
_PLACEHOLDER = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | _MAP_FIXED
# descriptor tables up to this size are probed number by number in a child
_PROBE_LIMIT = 4096
# libc's mmap, set up here once rather than in every child
_MMAP = ctypes.CDLL(None, use_errno=True).mmap
_MMAP.restype = ctypes.c_void_p
_MMAP.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                  ctypes.c_long]


class _ForkState:
    """What one process needs to fork ranks.  Replaced in every forked child
    (the parent's threads do not exist there, and a lock may have been held
    when the fork happened)."""

    def __init__(self):
        self.lock = threading.Lock()        # pipe creation + fork + closing the child's end
        self.guard = threading.Lock()       # the three fields below
        self.launcher: _Launcher | None = None
        self.launched: set = set()          # pids the launcher forked, not reaped yet
        self.requests = 0                   # launcher requests in progress


class _Launcher:
    """A daemon thread that runs the fork requests of non-main threads.  It
    lives while any process it forked is unreaped (their death signal is tied
    to it) or a request is in progress, and is stopped when neither is left,
    so no thread outlives the calls that needed it."""

    _STOP = None

    def __init__(self):
        self.requests: queue.SimpleQueue = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._serve, name="tilecomm-launcher",
                                       daemon=True)
        self.thread.start()

    def _serve(self):
        while True:
            request = self.requests.get()
            if request is self._STOP:
                return
            fn, args, done, failure = request
            try:
                fn(*args)               # a forked child never returns from here
            except BaseException as e:  # handed to the requesting thread
                failure.append(e)
            done.set()

    def run(self, fn, *args):
        done, failure = threading.Event(), []
        self.requests.put((fn, args, done, failure))
        _wait_through_interrupts(done)
        if failure:
            raise failure[0]

    def stop(self):
        self.requests.put(self._STOP)
        if threading.current_thread() is not self.thread:
            self.thread.join(5.0)


_STATE = _ForkState()


def _after_fork_in_child():
    global _STATE
    _STATE = _ForkState()


os.register_at_fork(after_in_child=_after_fork_in_child)


def _wait_through_interrupts(done: threading.Event):
    """Wait for the launcher to finish even if the wait is interrupted (Ctrl-C):
    the caller's cleanup must see every process the request started."""
    interrupted = None
    while True:
        try:
            done.wait()
            break
        except BaseException as e:      # re-raised once the request has finished
            interrupted = interrupted or e
    if interrupted is not None:
        raise interrupted


def spawn(targets, started: list, keep=None) -> None:
    """Fork one process per callable in ``targets``; the child runs
    ``target(conn)`` and exits with its return value.  ``(pid, conn)`` of each
    child is appended to ``started`` as soon as it exists, so a failure part
    way leaves the caller a complete list to stop.  ``keep``: per target, the
    descriptors (besides stdio and its pipe) that child must keep open.  Every
    pid must be passed to :func:`reaped` once it has been waited for."""
    keep = [()] * len(targets) if keep is None else list(keep)
    if threading.current_thread() is threading.main_thread():
        _spawn(targets, started, keep)
        return
    state = _STATE
    with state.guard:
        if state.launcher is None:
            state.launcher = _Launcher()
        launcher = state.launcher
        state.requests += 1
    first = len(started)
    try:
        launcher.run(_spawn, targets, started, keep)
    finally:
        with state.guard:
            state.requests -= 1
            state.launched.update(pid for pid, _ in started[first:])
        _stop_idle_launcher(state)


def reaped(pids) -> None:
    """``pids`` have been waited for: the launcher may stop if they were its last."""
    state = _STATE
    with state.guard:
        state.launched.difference_update(pids)
    _stop_idle_launcher(state)


def _stop_idle_launcher(state: _ForkState) -> None:
    with state.guard:
        launcher = state.launcher
        if launcher is None or state.launched or state.requests:
            return
        state.launcher = None
    launcher.stop()


def _spawn(targets, started: list, keep: list) -> None:
    for target, fds in zip(targets, keep):
        with _STATE.lock:
            old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, _DEFERRED)
            try:
                try:
                    parent, child = Pipe(duplex=True)
                except OSError as e:
                    _raise_typed(e)
                try:
                    pid = os.fork()
                except BaseException as e:
                    parent.close()
                    child.close()
                    if isinstance(e, OSError):
                        _raise_typed(e)
                    raise
                if pid == 0:
                    _child(target, child, old_mask, fds)    # never returns
                child.close()
                started.append((pid, parent))
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)


def _raise_typed(e: OSError):
    """Out of processes, memory or descriptors: a typed error with a hint."""
    typed = S.resource_error(e, "cannot start a rank process")
    if typed is None:
        raise e
    raise typed from e


def _child(target, conn, mask, fds) -> None:
    code = 1
    try:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        _drop_inherited_descriptors(keep={conn.fileno(), *fds})
        _drop_inherited_segments()
        code = target(conn)
    finally:
        os._exit(code)


def _drop_inherited_descriptors(keep: set) -> None:
    """Point every descriptor but stdio (and its duplicates, e.g. a
    faulthandler's copy of stderr) and those in ``keep`` at /dev/null."""
    candidates = _open_descriptor_candidates()
    if candidates is None:
        return                          # no /proc: keep what was inherited
    stdio = set()
    for fd in (0, 1, 2):
        try:
            st = os.fstat(fd)
        except OSError:
            continue
        stdio.add((st.st_dev, st.st_ino))
    try:
        null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        null = -1                       # out of descriptors: close instead
    for fd in candidates:
        if fd <= 2 or fd == null or fd in keep:
            continue
        try:
            st = os.fstat(fd)
        except OSError:
            continue                    # not open (or closed since the listing)
        if (st.st_dev, st.st_ino) in stdio:
            continue
        try:
            os.dup2(null, fd, inheritable=False)
        except OSError:
            # no /dev/null, or ``fd`` lies above a lowered descriptor limit (where
            # dup2 cannot reach, and where no new descriptor can reuse it)
            os.close(fd)
    if null >= 0:
        os.close(null)


def _open_descriptor_candidates():
    """Numbers that may be open descriptors of this process (each is probed),
    or None without /proc.  Probing every number below the descriptor table's
    size (FDSize in /proc/self/status: every open descriptor is below it) is
    cheaper than listing /proc/self/fd, which makes the kernel build an inode
    and a dentry per descriptor and prune them when the process is reaped --
    and with n ranks each child holds the controller's ends of the ranks
    forked before it, so that cost grows with n^2.  A table grown very large
    (a process that once held many files) is listed instead."""
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"FDSize:"):
                    size = int(line.split()[1])
                    if size <= _PROBE_LIMIT:
                        return range(size)
                    break
        return [int(n) for n in os.listdir("/proc/self/fd")]
    except (OSError, ValueError, IndexError):
        return None


def _drop_inherited_segments() -> None:
    """Replace every inherited mapping of a segment by an inaccessible private
    mapping of the same range (MAP_FIXED: one step, the range never free).
    A range is replaced only if /proc/self/map_files shows it maps exactly a
    segment, so a stale entry can never hit memory the process still uses."""
    marker = os.path.join(S.SHM_DIR, S.PREFIX + "-")
    for addr, length in S.mapped_ranges():
        try:
            target = os.readlink(f"/proc/self/map_files/{addr:x}-{addr + length:x}")
        except OSError:
            continue                    # not exactly one mapping, or no /proc
        if target.startswith(marker):
            _MMAP(addr, length, _PROT_NONE, _PLACEHOLDER, -1, 0)


def idle_poller(workers):
    """A poll object on every worker's pipe, for ``ranks_alive`` (made once
    per set of workers: this runs before every prepared call), or None if a
    pipe is closed already."""
    poller = select.poll()
    for _, conn in workers:
        try:
            poller.register(conn.fileno(), select.POLLIN)
        except (OSError, ValueError):
            return None
    return poller


def ranks_alive(poller) -> bool:
    """Whether every worker of an idle set of ranks can still serve a call
    (``poller``: their ``idle_poller``).  An idle worker sends nothing, so a
    readable (or hung-up) pipe means it is gone or out of step; its pid is
    not reaped here (the caller's cleanup does)."""
    return poller is not None and not poller.poll(0)


def preload(images) -> None:
    """Resolve, before forking, the element types the ranks will use whose numpy
    type is imported lazily (BF16 -> ml_dtypes, about a second): imported once
    here instead of once per rank after the fork.  A dtype is looked up by its
    name in the lowered source, which names every dtype the program uses."""
    names = {d.name for d in D.ALL}
    for image in images:
        for name in set(re.findall(r"\b[A-Z][A-Z0-9_]*\b", image.source)) & names:
            D.by_name(name).np_dtype
