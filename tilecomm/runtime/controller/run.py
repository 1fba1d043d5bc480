"""One call on a set of ranks, as its phases.

A call is a ``Run``.  Its phases are its methods, called in this order:

=============  ===========================================================
(check)        before anything exists: outputs writable, room in /dev/shm
               (``arguments.check_arguments``, by ``launch`` and the worker)
``prepare``    the control block and persistent windows reset (only while
               every rank is idle), run artefacts prepared
``share``      host tensors copied into shared segments (``arguments``)
``start``      the ranks started if they are not, the transport's run begun,
               artefacts announced to the ranks
``orchestrate`` the HOST orchestrator runs (``orchestrator.HostRuntime``),
               or a prepared worker's repeated call sends what it sent the
               last time (``plans.py``); dispatches go out in batches of
               ``BATCH_MESSAGES``
``end``        every rank told the run is over (``EndRun``), and a last
               call's ``Shutdown``
``watch``      failures, deaths, quiescence, until every rank finished the
               run (``monitor``); artefacts merged
``collect``    outputs copied back, the result in the caller's objects
``release``    the run's segments unlinked
``fail``       on any failure: every rank stopped, the error given the ranks'
               exit codes and the salvaged trace
=============  ===========================================================

``begin`` is the phases up to ``end``, ``finish`` the rest: a prepared
worker begins a submitted call while the one before is still being
finished.  How a call is carried out on its processes is the backend's
(``Backend.execute``): the caller runs both halves; under MPI, process 0
does and the others serve a rank.

Guarantees: the first failure on any rank stops every rank and is raised with
that rank's traceback; peers blocked in waits are aborted (they return from
the wait with RankAborted and exit) rather than left to be killed; a killed
rank is noticed through its channel and exit status; a deadlock (every live
rank blocked, nothing able to release any of them) is reported with each
blocked wait; Ctrl-C stops everything.  No worker process or /dev/shm segment
outlives the call.
"""
from __future__ import annotations

import warnings

import numpy as np

from ...dfx import hostfaults
from ...errors import ConfigError, TilecommError, TilecommWarning, UserError
from ...transport import segments as S
from ..messages import Batch, BeginRun, EndRun, Shutdown
from .arguments import check_arguments, copy_back, map_result, share_arguments
from .artefacts import RunArtefacts
from .backend import runs_host_code
from .monitor import monitor
from .orchestrator import HostRuntime
from .. import poison
from .ranks import Ranks, next_id

__all__ = ["BATCH_MESSAGES", "Run", "execute", "launch", "runs_host_code"]

# dispatches to one rank are sent together once this many are queued (and at
# the end of the HOST orchestrator): one pickle and one write per batch
# instead of per message, while a long host loop still lets ranks start early
BATCH_MESSAGES = 32


def launch(executable, args: list, config):
    """One-shot call: start ranks, run once, tear everything down."""
    check_arguments(executable, args)      # bad outputs, no room: refused before anything
    ranks = Ranks(executable.world, config)
    try:
        return execute(ranks, executable, args, config, last=True)
    finally:
        ranks.close()


def execute(ranks: Ranks, executable, args: list, config, last: bool = False, callbacks=None,
            reset_control: bool = True, explore=None):
    """One whole call on ``ranks`` (started here if needed).  On any failure
    the ranks are stopped: the caller decides whether to restart.  ``last``:
    no run follows, so workers exit on their own once finished (their
    teardown then overlaps the controller's copy-back instead of following
    it).  ``explore``: run as an explored schedule (``RunArtefacts.begin``)."""
    def run_call(last):
        run = Run(ranks, executable, config, callbacks, explore)
        return run.begin(args, last=last, reset_control=reset_control).finish()
    return ranks.backend.execute(ranks, executable, args, config, run_call, last)


class Run:
    """One execution of the HOST orchestrator on a set of ranks."""

    def __init__(self, ranks: Ranks, executable, config, callbacks=None, explore=None,
                 race_history=None):
        self.ranks = ranks
        # the calls in flight with this one, checked as one history
        # (race_history.py; a worker's submitted calls on kept windows)
        self.race_history = race_history
        self.callbacks = callbacks or {}     # SubWorker name -> bound callback
        self.executable = executable
        self.config = config
        self.checks = config.checks()        # the environment read once per call
        self.world = executable.world
        self.owner = ranks.owner
        self.call_id = next_id()
        self.segments: list = []
        self.buffers: dict = {}
        self.done: set = set()
        self._outbox: list = [[] for _ in range(ranks.world)]
        self._pooled: list = []
        self.outcome = None                 # what finish() needs, once begin() succeeded
        self.index = 0                      # which run of the ranks this is (Ranks.runs)
        self.artefacts = None               # run artefacts (artefacts.RunArtefacts), if asked
        self.explore = explore              # an explored run's plan (testing/exploration.py)
        # device -> names of the functions dispatched to it; complete once the
        # HOST orchestrator has returned (``sent_all``).  A deadlock report names
        # these as notifiers, not every device a dispatch site could reach
        self.dispatched: dict = {}
        self.sent_all = False
        self._recording = None              # what the orchestrator sends, while a plan records

    # ------------------------------------------------------------ first half
    def begin(self, args: list, last: bool = False, idle: bool = True,
              reset_control: bool = True) -> "Run":
        """The phases up to ``end``: the HOST orchestrator has run and every
        dispatch is sent.  ``idle``: no earlier run is still in flight on
        these ranks (a pipelined run passes False); ``reset_control``: see
        ``prepare``."""
        # None unless the config asks; an unwritable directory fails here,
        # before anything touches the ranks
        self.artefacts = RunArtefacts.begin(self.executable, self.config, self.ranks.control,
                                            S.log_path(self.owner, self.call_id, "log"),
                                            self.explore, self.race_history, self.checks)
        try:
            self.prepare(idle, reset_control)
            host_vals, copies = self.share(args)
            self.start()
            result = self.orchestrate(host_vals)
            self.end(last)
            self.outcome = (result, args, host_vals, copies)
            return self
        except BaseException as e:
            self.fail(e)
            raise

    def prepare(self, idle: bool, reset_control: bool) -> None:
        """Persistent windows zeroed and (``reset_control``) the control block
        reset -- both need every rank idle.  A worker of one program needs no
        reset at all: dispatch numbers continue across runs, and every member
        of a domain enters the same collectives in every run, so the
        per-buffer counts stay equal among them.  Every rank learns the
        program's image first."""
        ranks = self.ranks
        ranks.know(self.executable.image)
        if idle:
            if reset_control:
                ranks.control.reset()
                ranks.runs = 0
            if ranks.persistent is not None and ranks.persistent.reset:
                ranks.persistent.zero()    # every rank is idle between runs

    def share(self, args: list):
        """(values for the HOST orchestrator, outputs to copy back)."""
        return share_arguments(self, args, self.executable)

    def start(self) -> None:
        ranks = self.ranks
        if not ranks.started:
            ranks.start()
        # after the fork: a transport's service threads must not be forked
        ranks.transport.start_run(self)
        # what the run asks of the ranks beyond its dispatches, in one record
        # (a config's knobs are its fields': the same config object as the
        # last run's asks nothing new)
        config = self.config
        changed = None
        if config is not ranks.knobs_of:
            knobs = config.rank_knobs()
            changed = knobs if knobs != ranks.knobs else None
            ranks.knobs, ranks.knobs_of = knobs, config
        settings = self.artefacts.settings if self.artefacts is not None else None
        if changed is not None or settings is not None:
            for r in range(ranks.world):
                ranks.send(r, BeginRun(settings, changed))

    def orchestrate(self, host_vals: list):
        """Run the HOST orchestrator, or replay its plan for these inputs;
        its result (in shared values)."""
        plans = self.ranks.plans
        key = plans.key(self, host_vals)
        if key is not None:
            plan = plans.find(key, self.executable)
            if plan is not None:
                result = plan.replay(self, host_vals)
                plans.replays += 1
                self.sent_all = True
                return result
            self._recording = []
            base = self.ranks.seq
        exe = self.executable
        hr = HostRuntime(self)
        try:
            result = exe.entry(hr, *host_vals)
        except UserError as e:             # a fault in the HOST orchestrator itself
            hostfaults.attach_span(e, exe.lowered)
            raise
        except Exception as e:             # the user's own host code raised: point at it
            hostfaults.locate(e, exe.lowered)
            raise
        self.ranks.seq = hr.seq            # dispatch numbers continue in the next run
        self.sent_all = True
        if key is not None:
            sent, self._recording = self._recording, None
            plans.record(key, self, base, sent, result, host_vals)
        return result

    def end(self, last: bool) -> None:
        ranks = self.ranks
        keep = ranks.persistent is not None
        ranks.runs += 1
        self.index = ranks.runs
        end = EndRun(keep)                  # one message object: nothing changes it
        for r in range(self.world):
            self.send(r, end)
        self.flush()
        if last:
            # a message of its own, never inside a Batch: a launcher may have
            # to recognise it (an MPI job's serving process stops reading there)
            for r in range(self.world):
                ranks.send(r, Shutdown())

    # ------------------------------------------------------------ second half
    def finish(self):
        """Wait for every rank to finish the run, copy outputs back, release
        the run's segments; the HOST orchestrator's result in the caller's
        objects."""
        try:
            self.watch()
            races = self.artefacts.races() if self.artefacts is not None else None
            unwritten = self.artefacts.unwritten() if self.artefacts is not None else []
            result = self.collect()
        except BaseException as e:
            self.fail(e)
            raise
        finally:
            self.release()
        for w in unwritten:                # RunConfig.poison_windows: after the results too
            span = w.span
            warnings.warn_explicit(w, TilecommWarning, span.file if span else "<program>",
                                   span.line if span else 0)
        if races is not None:              # raised after the results are written back
            raise races
        return result

    def watch(self) -> None:
        monitor(self)
        if self.artefacts is not None:
            self.artefacts.end()

    def collect(self):
        result, args, host_vals, copies = self.outcome
        copy_back(copies)
        return map_result(result, args, host_vals)

    def release(self):
        if self.artefacts is not None:
            self.artefacts.close()
        if self.ranks.persistent is None:   # persistent windows stay registered
            self.ranks.transport.end_run(self)
        if self._pooled:
            self.ranks.arguments.give_back(self._pooled)
            self._pooled = []
        for seg in self.segments:
            seg.close()
            seg.unlink()
        if self.segments:                   # catches one created but not yet recorded
            S.sweep(self.owner, self.call_id)
        self.segments = []


    def fail(self, e: BaseException) -> None:
        ranks = self.ranks
        codes = ranks.abort(self)          # stop every rank before its segments go
        ranks.failed = True
        if isinstance(e, TilecommError):
            e.exit_codes = codes           # how each rank ended (messages.EXIT_*, -signal)
            if self.artefacts is not None:  # the ranks wrote what they recorded: merge it
                e.trace_path = self.artefacts.salvage()
        if self.outcome is None:           # begin() failed: finish() will not release it
            self.release()

    # ------------------------------------------------ what the phases' helpers use
    def argument_segment(self, nbytes: int):
        """A segment for a host tensor argument: from the ranks' pool if they
        have one."""
        pool = self.ranks.arguments
        if pool is not None:
            seg = pool.take(nbytes)
            if seg is not None:
                self._pooled.append(seg)
                return seg
        return self.new_segment(nbytes)

    def new_segment(self, nbytes: int):
        name = S.segment_name(self.owner, self.call_id, len(self.segments))
        seg = S.Segment.create(name, max(int(nbytes), 1))
        self.segments.append(seg)
        return seg

    def allocate_window(self, nbytes: int, members: tuple, name: str = "",
                        poisoned=None) -> tuple:
        """A window of ``nbytes`` per member; ``poisoned``: the DataType whose
        sentinel fills it (``runtime/poison.py``), None to leave it zeroed."""
        persistent = self.ranks.persistent
        if persistent is not None:
            return persistent.allocate(self.executable.program_key, name, nbytes, members)
        first = len(self.segments)
        names = self.ranks.transport.allocate(self, nbytes, members)
        if poisoned is not None:
            made = self.segments[first:]
            if not made:
                raise ConfigError(f"RunConfig.poison_windows: the {self.ranks.transport.name} "
                                  f"transport does not place windows in memory the caller "
                                  f"fills", code="TC402",
                                  hint="poison windows on the shm or copy transport")
            # fresh segments no dispatch has named yet: no rank can have written them
            for seg in made:
                poison.fill_bytes(seg.ndarray(np.uint8, (seg.size,)), poisoned.np_dtype)
        return names

    def send(self, rank: int, msg) -> None:
        if self._recording is not None:
            self._recording.append((rank, msg))
        box = self._outbox[rank]
        box.append(msg)
        if len(box) >= BATCH_MESSAGES:
            self.flush(rank)

    def flush(self, rank: int | None = None) -> None:
        """Send what is queued (for one rank, or all)."""
        ready = []
        for r in range(self.world) if rank is None else (rank,):
            box = self._outbox[r]
            if box:
                self._outbox[r] = []
                ready.append((r, box[0] if len(box) == 1 else Batch(tuple(box))))
        for r, msg in ready:
            self.ranks.send(r, msg)
