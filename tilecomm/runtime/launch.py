"""The controller: start one worker process per rank, run the HOST orchestrator,
watch the ranks, and clean up whatever happens.

Guarantees: the first failure on any rank stops every rank and is raised with
that rank's traceback; a killed rank is noticed through its pipe and exit
status; a deadlock (every live rank blocked, nothing able to release any of
them) is reported with each blocked wait; Ctrl-C stops everything.  No worker
process or /dev/shm segment outlives the call.
"""
from __future__ import annotations

import functools
import itertools
import os
import signal
import time
from multiprocessing.connection import wait as mp_wait

import numpy as np

from ..errors import DeadlockError, RankFailure, UserError
from ..transport import segments as S
from . import cleanup, forking, hostargs, hostfaults, shmspace
from . import control as C
from .host import HostRuntime

_CALL_IDS = itertools.count(1)
_POLL_S = 0.02


class Ranks:
    """One worker process per rank and the control block they share.  Lives for
    one call (one-shot) or across calls (``DistributedWorker``)."""

    def __init__(self, world: int, config):
        # segments of controllers that were SIGKILLed: swept whenever ranks start
        # (one listdir), so a long-lived process also cleans up after peers
        # that died after its first call
        S.sweep_stale()
        cleanup.watch(self)                # killed and swept if SIGTERM / SIGHUP end us
        self.world = world
        self.config = config
        self.owner = os.getpid()
        self.id = next(_CALL_IDS)
        self.images: dict = {}             # specialisations the workers know
        self.workers: list = []            # (pid, conn)
        self.control_segment = S.Segment.create(S.segment_name(self.owner, self.id, 0),
                                                C.control_size(world))
        self.control = C.ControlBlock(self.control_segment, world)

    def start(self):
        from .worker import worker_main
        forking.preload(self.images.values())
        forking.spawn([functools.partial(worker_main, rank, self) for rank in range(self.world)],
                      self.workers)

    def know(self, image):
        """Make sure every worker has ``image`` (forked ones inherit it)."""
        if image.key in self.images:
            return
        self.images[image.key] = image
        for r in range(len(self.workers)):
            self.send(r, ("image", image))

    def send(self, rank: int, msg) -> None:
        try:
            self.workers[rank][1].send(msg)
        except (BrokenPipeError, ConnectionResetError, EOFError):
            pass                           # the monitor reports why the rank is gone

    def begin_run(self):
        """Between runs every worker is idle: reset what a run's monitor reads."""
        for r in range(self.world):
            self.control.set(r, C.STATE, C.IDLE)
            self.control.set(r, C.DONE_SEQ, 0)

    def kill(self):
        for pid, conn in self.workers:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self._reap()

    def shutdown(self, timeout: float = 1.0):
        """Ask idle workers to exit; kill whoever has not within ``timeout``."""
        for r in range(len(self.workers)):
            self.send(r, ("shutdown",))
        deadline = time.monotonic() + timeout
        for pid, _ in self.workers:
            while time.monotonic() < deadline:
                if os.waitpid(pid, os.WNOHANG)[0]:
                    break
                time.sleep(0.001)
        self.kill()

    def _reap(self):
        for pid, conn in self.workers:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
            conn.close()
        forking.reaped(pid for pid, _ in self.workers)    # the launcher thread may go
        self.workers = []

    def close(self, graceful: bool = False):
        try:
            self.shutdown() if graceful else self.kill()
        finally:
            self.control_segment.close()
            self.control_segment.unlink()
            S.sweep(self.owner, self.id)


class Run:
    """One execution of the HOST orchestrator on a set of ranks."""

    def __init__(self, ranks: Ranks, executable, config):
        self.ranks = ranks
        self.executable = executable
        self.config = config
        self.world = executable.world
        self.owner = ranks.owner
        self.call_id = next(_CALL_IDS)
        self.segments: list = []
        self.buffers: dict = {}
        self.done: set = set()

    @property
    def workers(self):
        return self.ranks.workers

    def new_segment(self, nbytes: int):
        name = S.segment_name(self.owner, self.call_id, len(self.segments))
        seg = S.Segment.create(name, max(int(nbytes), 1))
        self.segments.append(seg)
        return seg

    def send(self, rank: int, msg) -> None:
        self.ranks.send(rank, msg)

    def release(self):
        for seg in self.segments:
            seg.close()
            seg.unlink()
        self.segments = []
        S.sweep(self.owner, self.call_id)


def launch(executable, args: list, config):
    """One-shot call: start ranks, run once, tear everything down."""
    hostargs.check(executable, args)       # bad outputs, no room: refused before anything
    ranks = Ranks(executable.world, config)
    try:
        return execute(ranks, executable, args, config, last=True)
    finally:
        ranks.close()


def execute(ranks: Ranks, executable, args: list, config, last: bool = False):
    """Run the HOST orchestrator once on ``ranks`` (started here if needed).
    On any failure the ranks are killed: the caller decides whether to restart.
    ``last``: no run follows, so workers exit on their own once finished (their
    teardown then overlaps the controller's copy-back instead of following it)."""
    run = Run(ranks, executable, config)
    try:
        ranks.know(executable.image)
        ranks.begin_run()
        host_vals, copies = hostargs.share(run, args, executable)   # outputs copied back
        if not ranks.workers:
            ranks.start()
        hr = HostRuntime(run)
        try:
            result = executable.entry(hr, *host_vals)
        except UserError as e:             # a fault in the HOST orchestrator itself
            _attach_host_span(e, executable)
            raise
        except Exception as e:             # the user's own host code raised: point at it
            hostfaults.locate(e, executable.lowered)
            raise
        for r in range(run.world):
            run.send(r, ("end",))
            if last:
                run.send(r, ("shutdown",))
        _monitor(run, ranks.control)
        for user, shared in copies:
            np.copyto(user, shared.array)
        return _map_result(result, args, host_vals)
    except BaseException:
        ranks.kill()                       # stop every rank before its segments go
        raise
    finally:
        run.release()


def _attach_host_span(e, executable):
    import traceback
    if e.span is not None:
        return
    for fr in reversed(traceback.extract_tb(e.__traceback__)):
        if fr.filename == executable.lowered.filename:
            e.span = executable.lowered.linemap.get(fr.lineno)
            if e.span is not None:
                e.args = (str(e),)
                return


def _map_result(result, args, host_vals):
    def one(v):
        for a, h in zip(args, host_vals):
            if v is h:
                return a
        return None
    if isinstance(result, tuple):
        return tuple(one(v) for v in result)
    return one(result) if result is not None else None


# ------------------------------------------------------------------- monitor
def _monitor(call, control):
    conns = {conn: rank for rank, (pid, conn) in enumerate(call.workers)}
    quiet_since = None
    while len(call.done) < call.world:
        live = [c for c, r in conns.items() if r not in call.done]
        for conn in mp_wait(live, timeout=_POLL_S):
            rank = conns[conn]
            try:
                msg = conn.recv()
            except (EOFError, OSError):
                raise _died(call, rank) from None
            if msg[0] == "done":
                call.done.add(rank)
            elif msg[0] == "error":
                raise _rank_error(call, msg)
        report = _quiescent(call, control)
        if report is None:
            quiet_since = None
        elif quiet_since is None:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since >= call.config.deadlock_timeout_s:
            raise DeadlockError(_deadlock_text(call, report), report)


def _died(call, rank):
    pid = call.workers[rank][0]
    status, hint = "exited", ""
    try:
        _, st = os.waitpid(pid, 0)
        if os.WIFSIGNALED(st):
            status = f"was killed by {signal.Signals(os.WTERMSIG(st)).name}"
            hint = shmspace.death_hint(os.WTERMSIG(st))
        else:
            status = f"exited with status {os.WEXITSTATUS(st)}"
    except ChildProcessError:
        pass
    return RankFailure(f"rank {rank} {status} before finishing its dispatches{hint}", rank=rank)


def _rank_error(call, msg):
    _, rank, fname, summary, text, err = msg
    e = RankFailure(f"rank {rank} failed in {fname}: {summary}\n{text}", rank=rank,
                    traceback_text=text)
    e.error_type, e.error_code, e.span = err
    return e


def _quiescent(call, control):
    """Blocked waits if every live rank is blocked on a false condition, else None."""
    live = [r for r in range(call.world) if r not in call.done]
    before = [control.get(r, C.STATE) for r in live], [control.get(r, C.GEN) for r in live]
    if not live or any(s != C.BLOCKED for s in before[0]):
        return None
    blocked = []
    for rank in live:
        info = _wait_info(call, control, rank)
        if info is None or info["satisfied"]:
            return None
        blocked.append(info)
    after = [control.get(r, C.STATE) for r in live], [control.get(r, C.GEN) for r in live]
    if after != before:                    # someone moved while we looked
        return None
    return blocked


def _wait_info(call, control, rank):
    from .. import _native_core as native
    g = lambda slot: control.get(rank, slot)  # noqa: E731
    buf_id, index, cmp, expected = g(C.W_BUF), g(C.W_INDEX), g(C.W_CMP), g(C.W_EXPECTED)
    loc, peer, func = g(C.W_LOC), g(C.W_PEER), g(C.W_FUNC)
    cols, ndim = max(g(C.W_COLS), 1), g(C.W_NDIM)
    exe = call.executable
    names = exe.image.func_names
    fn = exe.prog.functions.get(names[func]) if 0 <= func < len(names) else None
    cell = [index // cols, index % cols] if ndim == 2 else [index]
    info = {"rank": rank, "cmp": "Eq" if cmp == 0 else "Ge", "expected": expected,
            "span": exe.span(loc), "cell": cell, "dispatch": fn.py_name if fn else None,
            "function": exe.span(loc).func if exe.span(loc) else None}
    if buf_id == C.DEP_WAIT:
        value = control.done_seq(peer)
        info.update(kind="dispatch", peer=peer, value=value, satisfied=value >= expected)
        return info
    buf = call.buffers.get(buf_id)
    if buf is None or rank not in buf.devices:
        return None
    seg = next((s for s in call.segments if s.name == buf.segments[buf.domain_rank(rank)]), None)
    if seg is None:
        return None
    value = native.load_i32(seg.addr + 4 * index)
    sat = value == expected if cmp == 0 else value >= expected
    rec = exe.prog.buffers[buf_id]
    info.update(kind="signal", buffer=buf.name, index=index, value=value, satisfied=sat,
                notifiers={d: sorted(f) for d, f in sorted(rec.notifiers.items())})
    return info


def _deadlock_text(call, blocked):
    lines = [f"deadlock: every live rank is blocked and no rank can release any of them "
             f"({len(blocked)} blocked, {call.world - len(blocked)} finished)"]
    finished = sorted(call.done)
    for b in blocked:
        where = f" at {b['span']}" if b["span"] else ""
        if b["kind"] == "dispatch":
            lines.append(f"  rank {b['rank']}: waits for rank {b['peer']} to finish dispatch "
                         f"#{b['expected']} (it has finished #{b['value']}): a host tensor "
                         f"dependency")
            continue
        op = "==" if b["cmp"] == "Eq" else ">="
        func = f" in {b['function']}" if b["function"] else ""
        if b["dispatch"] and b["dispatch"] != b["function"]:
            func += f" (dispatched as {b['dispatch']})"
        cell = ", ".join(map(str, b["cell"]))
        lines.append(f"  rank {b['rank']}: pld.system.wait{where}{func}")
        lines.append(f"      cell {b['buffer']}[{cell}] = {b['value']} on rank {b['rank']}, "
                     f"waiting for {op} {b['expected']} (WaitCmp.{b['cmp']})")
        if b["notifiers"]:
            who = ", ".join(f"rank {d} ({', '.join(fs)}, "
                            f"{'finished' if d in finished else 'blocked'})"
                            for d, fs in b["notifiers"].items())
            lines.append(f"      notifies into {b['buffer']!r} come from: {who}")
        else:
            lines.append(f"      no dispatch of this program notifies window '{b['buffer']}': "
                         f"nothing can ever release this wait")
    lines.append("  hint: every rank's notify must come before its wait, values must reach the "
                 "expected threshold, and hand-rolled signals are not self-clearing")
    return "\n".join(lines)


__all__ = ["launch", "UserError"]
