"""A rank's process: executes the dispatches sent to its rank, in order."""
from __future__ import annotations

import ctypes
import linecache
import os
import signal
import traceback
from typing import Callable, NamedTuple

import numpy as np

from ...dfx.hostfaults import user_spans
from ...errors import UserError
from ...transport.base import WindowKey
from .. import control as C
from .. import messages as M
from .artefacts import RankArtefacts
from .collective_calls import BUILTINS
from .context import RankAborted, RankContext
from .inbox import Inbox
from ..values import HostRef, WindowRef, WindowView

_PR_SET_PDEATHSIG = 1

# descriptors a prepared worker's rank knows the window view of by identity
# (``_materialize``): emptied when full, as new descriptor objects keep coming
REF_MEMO = 1024

# How long an idle rank polls its channel before it blocks in a read
# (``inbox.py``): long enough to cover a prepared call's return to the
# caller and the caller's next call, short enough that a worker left idle
# stops using its CPU at once.
IDLE_SPIN_NS = 300_000


class RankSetup(NamedTuple):
    """What a rank's process takes from the controller's set of ranks
    (``controller.ranks.Ranks.setup``): a forked rank inherits it, an MPI
    process builds its own.  (A named tuple: a record, and cheap to define
    on the import path, unlike a dataclass of this many fields.)"""

    world: int
    owner: int                # the controller's pid: a forked rank whose parent is gone exits
    forked: bool              # a child forked for this rank (not a process serving in place)
    images: dict              # specialisations known when the rank started
    control: object           # the control plane (``attach()`` gives the rank's handle)
    transport: object         # the transport host (``in_child``, ``endpoint``)
    config: object            # the RunConfig the ranks were started with
    keep_prefix: str | None   # a prepared worker's pooled argument segments stay mapped
    persistent: bool          # windows kept across runs (prepare(persistent=True))
    host_tensors: Callable    # keep_prefix -> how the rank reaches host tensors
    serving: Callable         # (rank, context, inbox): the launcher's hook once serving


def _die_with_parent():
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def idle_spin_ns(setup: RankSetup) -> int:
    """How long this rank polls its channel when idle: only a forked rank's
    pipe can be polled, waits that do not spin (``spin_iters=0``) ask for no
    polling either, and with more ranks than CPUs the pollers would take
    the CPU from the ranks and the caller that have work."""
    if not setup.forked or setup.config.spin_iters == 0:
        return 0
    return IDLE_SPIN_NS if setup.world <= len(os.sched_getaffinity(0)) else 0


def rank_main(rank: int, setup: RankSetup, conn) -> int:
    """Serve one rank until told to shut down: run dispatches in order; an
    ``EndRun`` closes one run of the host orchestrator (ranks may serve many).
    Returns the process's exit code (``messages.EXIT_*``)."""
    if setup.forked:
        # Ctrl-C reaches the whole process group; the controller alone handles it
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        _die_with_parent()
        if os.getppid() != setup.owner:
            return M.EXIT_FAILED
    setup.transport.in_child(rank)
    images = dict(setup.images)             # inherited; later ones arrive by message
    try:
        control = setup.control.attach()
        transport = setup.transport.endpoint(rank, setup.world)
    except Exception as e:                  # say why, not just die: the caller reports it
        M.send(conn, _start_up_failure(rank, e))
        return M.EXIT_FAILED
    # host tensors: mapped by name, or (an MPI process sharing no memory with
    # process 0) fetched over RMA per dispatch and written back before the
    # dispatch's completion is published (backends/mpi/hosts.py)
    hosts = setup.host_tensors(setup.keep_prefix)
    rma = hosts if hosts.over_rma else None
    # and run artefacts, then written where process 0 cannot read them: sent
    # to it, handled there before this rank is seen finished or gone
    ship = (lambda files: conn.send_bytes_received(M.encode(files))) if rma is not None \
        else None
    # a prepared worker's persistent windows: one WindowView per (image,
    # buffer, view) kept across runs, so its cell handles and collective plans
    # are resolved once for the worker's lifetime, not once per dispatch
    views = {} if setup.persistent else None
    refs = {} if setup.persistent else None    # the same by descriptor object (_materialize)
    rc = RankContext(rank, setup.world, control, transport, setup.config)
    # see inbox.py: who reads the channel, and when
    inbox = Inbox(conn, idle_spin_ns(setup))
    setup.serving(rank, rc, inbox)
    # (image key, function name) -> (function id, parameter shapes, function)
    entries: dict = {}
    finished = False                        # between the end of a run and the next one
    dfx = None                              # this run's artefacts, when its config asks
    while True:
        if not finished and not inbox.pending():
            control.set_state(rank, C.IDLE)   # a finished rank stays FINISHED for the monitor
        msg = inbox.next()
        if type(msg) is not M.Dispatch:     # a dispatch is by far the most frequent
            if type(msg) is M.EndRun:       # once per run: before the kinds once per worker
                finished = True
                if dfx is not None:             # written before the run is reported done
                    control.set_state(rank, C.RUNNING)
                    try:
                        dfx.finish()
                    except BaseException as e:
                        control.set_state(rank, C.FAILED)
                        M.send(conn, M.Failed(rank, "run artefacts", f"{type(e).__name__}: {e}",
                                              f"{type(e).__name__}: {e}", type(e).__name__,
                                              getattr(e, "code", None), None))
                        control.wake_controller()   # the message is read now, not a slice later
                        return M.EXIT_FAILED
                    dfx = None
                control.set_state(rank, C.FINISHED)
                control.finish_run(rank)        # the last rank to finish wakes the controller
                if not msg.keep_windows:        # persistent windows stay mapped for the next run
                    transport.end_run()         # unmap this run's segments (being unlinked)
                hosts.close()
                continue
            if dfx is not None and isinstance(msg, (M.Disconnected, M.Shutdown)):
                dfx.close()                     # stopped mid-run: a shipping rank's directory
            if isinstance(msg, M.Disconnected):
                return M.EXIT_DISCONNECTED
            if isinstance(msg, M.Shutdown):
                return M.EXIT_OK
            if isinstance(msg, M.LoadImage):
                images[msg.image.key] = msg.image
                entries.clear()
                continue
            if isinstance(msg, M.BeginRun):
                if msg.knobs is not None:
                    rc.configure(msg.knobs)
                if msg.settings is not None:
                    dfx = RankArtefacts(rank, msg.settings, rc, ship)
                continue
        # a dispatch (or, as ever, a message of no kind above: it fails below)
        finished = False
        control.set_state(rank, C.RUNNING)
        if control.aborted():               # a peer failed: run nothing more
            if dfx is not None:
                dfx.salvage()
            return M.EXIT_ABORTED
        image = images[msg.image_key]
        fname = msg.fname
        try:
            rc.image = image
            builtin = BUILTINS.get(fname)
            if builtin is not None:          # a HOST collective's share of this rank
                rc.func_id = -1
                if rma is not None:
                    rma.fetch(msg.args)
                vals = [_materialize(a, rank, transport, hosts, None, views, image.key, refs)
                        for a in msg.args]
                if dfx is None:
                    builtin(rc, *vals, msg.loc, True)
                else:
                    dfx.dispatch(fname, builtin, (rc, *vals, msg.loc, True), vals, msg.loc, image,
                                 msg.seq)
            else:
                entry = entries.get((msg.image_key, fname))
                if entry is None:           # (an unknown name raises here, as a failure)
                    entry = entries[(msg.image_key, fname)] = (
                        image.func_names.index(fname), image.param_shapes[fname],
                        image.function(fname))
                rc.func_id, shapes, function = entry
                for dep_rank, dep_seq in msg.deps:
                    rc.wait_dispatch(dep_rank, dep_seq)
                if rma is not None:          # after the writers this dispatch depends on
                    rma.fetch(msg.args)
                vals = [_materialize(a, rank, transport, hosts, s, views, image.key, refs)
                        for a, s in zip(msg.args, shapes)]
                if dfx is None:
                    function(rc, *vals)
                else:
                    dfx.dispatch(fname, function, (rc, *vals), vals, msg.loc, image, msg.seq)
            if rma is not None:              # complete in process 0 before "done" is published
                rma.write_back()
        except RankAborted:
            if dfx is not None:             # what was recorded up to the abort
                dfx.salvage()
            return M.EXIT_ABORTED
        except BaseException as e:                       # report, then stop this rank
            control.set_state(rank, C.FAILED)
            summary, text, (etype, code, span) = format_failure(e, image, msg.loc)
            M.send(conn, M.Failed(rank, fname, summary, text, etype, code, span))
            control.wake_controller()
            if dfx is not None:
                dfx.salvage()
            return M.EXIT_FAILED
        # publish progress for host-tensor dependencies of other ranks
        rc.dispatch_done(msg.seq)


def _start_up_failure(rank: int, exc: Exception) -> M.Failed:
    """What a rank that could not reach the control block or its transport
    reports: a user error (out of descriptors or memory) by its message, any
    other exception -- a defect -- with its whole traceback."""
    if isinstance(exc, UserError):
        return M.Failed(rank, "start-up", f"{type(exc).__name__}: {exc.message}",
                        f"{type(exc).__name__}: {exc}", type(exc).__name__, exc.code, None)
    text = "".join(traceback.format_exception(exc)).rstrip()
    return M.Failed(rank, "start-up", f"{type(exc).__name__}: {exc}", text,
                    type(exc).__name__, None, None)


def _materialize(desc, rank, transport, hosts, shape, views=None, image_key=None,
                 refs=None):
    if isinstance(desc, HostRef):
        a = hosts.array(desc)
        return a.reshape(shape) if shape is not None and a.shape != shape else a
    if isinstance(desc, WindowRef):
        if views is not None:
            # the descriptor object itself first: a replayed or memoised
            # descriptor comes back as the same object (messages.decode),
            # and hashing its fields costs more than the lookup.  The entry
            # holds the descriptor, so its id is not reused while there.
            known = refs.get(id(desc))
            if known is not None and known[0] is desc and known[1] == shape and \
                    known[2] == image_key:
                return known[3]
            key = (image_key, desc.buffer, shape, desc.shape, desc.dtype)
            view = views.get(key)
            if view is None:
                view = views[key] = _materialize(desc, rank, transport, hosts, shape)
            if len(refs) >= REF_MEMO:
                refs.clear()
            refs[id(desc)] = (desc, shape, image_key, view)
            return view
        buf = desc.buffer
        if rank not in buf.devices:
            raise UserError(f"window '{buf.name}' was passed to rank {rank}, which is not in its "
                            f"comm domain {list(buf.devices)}", code="TC503")
        member = buf.domain_rank(rank)
        view_shape = tuple(shape if shape is not None else desc.shape)
        key = WindowKey(buf.segments, buf.devices, view_shape, np.dtype(desc.dtype))
        return WindowView(buf, view_shape, desc.dtype, transport.local(key, member), member)
    return desc


def format_failure(exc, image, loc):
    """(summary, traceback text in user terms, (type, code, span)) of a rank failure."""
    frames = user_spans(exc, image)        # the image is its lowered module
    lines = ["Traceback (program frames, most recent call last):"]
    dispatched = image.span(loc)
    if dispatched is not None:
        lines.append(f'  File "{dispatched.file}", line {dispatched.line}, in {dispatched.func} '
                     f'(dispatch)')
    for sp in frames:
        lines.append(f'  File "{sp.file}", line {sp.line}, in {sp.func}')
        src = linecache.getline(sp.file, sp.line).strip()
        if src:
            lines.append(f"    {src}")
    msg = exc.message if isinstance(exc, UserError) else str(exc)
    task = getattr(exc, "task_name", None)
    if task:                                # raised by a task of the rank's scheduler
        msg = f"in task '{task}': {msg}"
    code = getattr(exc, "code", None)
    lines.append(f"{type(exc).__name__}: {msg}" + (f" [{code}]" if code else ""))
    if not isinstance(exc, UserError):
        lines.append("-- full traceback --")
        lines.append("".join(traceback.format_exception(exc)).rstrip())
    where = frames[-1] if frames else dispatched
    summary = f"{type(exc).__name__}: {msg}" + (f" at {where}" if where else "")
    return summary, "\n".join(lines), (type(exc).__name__, code, where)
