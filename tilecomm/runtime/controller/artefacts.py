"""The controller's part of run artefacts (the layout and the rank's part:
``rank/artefacts.py``): prepare ``dfx_outputs/`` before a run, tell each rank,
merge the ranks' swimlanes into one trace of the call (and give each dispatch
its part of it), and write the files a rank on another node sent
(``messages.Files``)."""
from __future__ import annotations

import glob
import itertools
import os
import re
import shutil
import sys
import time

from ...check.races import MAX_REPORTED, find_all_races, find_races
from ...dfx import trace as T
from ...errors import ConfigError, DataRaceError, RuntimeFault, TilecommWarning
from ..messages import Files
from ..rank.argdumps import unwritable
from ..rank.artefacts import (MERGED_TRACE, RANK_TRACE, DfxSettings, dfx_root, dispatch_dir,
                              dispatch_trace_name, poison_log_path, race_log_path,
                              step_log_path)
from ..rank.exploring import read_steps
from ..rank.racing import LogFile
from ..rank.unwritten import ITERATIONS_MAX, read_found, rows_text
from ..poison import SIGNAL_DTYPE
from .race_history import ChainedLog
from ..rank.tracing import pid_of




# the swimlane level a call traced only because of $TILECOMM_TRACE records
# (tasks and ops, as RunConfig(enable_chip_swimlane=2))
TRACE_LANE = 2


class RunArtefacts:
    """The controller's part of one run that writes artefacts."""

    def __init__(self, settings: DfxSettings, world: int, explore=None, trace_dir=None):
        self.settings = settings
        self.world = world
        self.explore = explore
        self.trace_dir = trace_dir      # every call's trace also goes there ($TILECOMM_TRACE)
        self.trace_path = None

    history = None                      # a RaceHistory this call's check joins
    earlier: tuple = ()                 # the race logs of that history's calls before it

    @classmethod
    def begin(cls, executable, config, control, logs: str = "", explore=None, history=None,
              checks=None):
        """``checks``: ``config.checks()`` if the caller has it already."""
        checks = checks if checks is not None else config.checks()
        if not cls.asked(config, checks, explore):
            return None                 # the common case, on every call's path
        made = cls._begin(executable, config, control, logs, explore, checks)
        if history is not None and made is not None and made.settings.races is not None:
            made.history = history
            made.earlier = history.join(made.settings.races)
        return made

    @staticmethod
    def asked(config, checks, explore) -> bool:
        """Whether a run with ``config`` may write or check anything
        (``checks``: ``config.checks()``): if not, ``begin`` returns None at
        once (``_begin`` decides the rest)."""
        return bool(checks.races or checks.poison or checks.trace_dir or explore is not None
                    or config.dfx_enabled)

    @classmethod
    def _begin(cls, executable, config, control, logs, explore, checks):
        """Before the run touches any rank: None when ``config`` asks for no
        artefact and no race check, and the run is not explored (the common
        case); otherwise clear the stale output (a directory that cannot be
        written fails here).  ``logs``: the path prefix of the ranks' race
        logs and step logs (files in /dev/shm named as the call's segments
        are, so whatever sweeps a dead caller's segments sweeps them too).
        ``explore``: an explored run's plan (``schedule``, ``limit``; its
        ``steps`` are set when the run ends)."""
        races = checks.races
        if explore is not None and not control.sequences:
            raise ConfigError("an explored run needs every rank on one machine (its ranks take "
                              "turns through the shared control block)", code="TC604")
        if races and not control.sequences:
            raise ConfigError("RunConfig.detect_races needs every rank on one machine: this "
                              "job's control block is reached over MPI RMA (ranks on several "
                              "nodes, or TILECOMM_MPI_DIRECT=0), where notifies cannot be "
                              "numbered in the order they take effect", code="TC402",
                              hint="check the program with its ranks on one node (or on the "
                                   "shm transport), then run it across nodes without "
                                   "detect_races")
        steps = None if explore is None else (f"{logs}-steps", tuple(explore.schedule),
                                              explore.limit, tuple(explore.picks))
        poison = None
        if checks.poison:
            # the windows the run may poison (runtime/poison.py): a run with
            # none records nothing for it
            candidates = frozenset(b.id for b in executable.prog.buffers
                                   if SIGNAL_DTYPE not in b.dtypes)
            poison = (f"{logs}-poison", candidates) if candidates else None
        trace_dir = checks.trace_dir
        if not config.dfx_enabled and not trace_dir:
            if not races and steps is None and poison is None:
                return None
            return cls(DfxSettings(None, 0, 0, False, False, 0, "", f"{logs}-races" if races
                                   else None, steps, poison), executable.world, explore)
        out = getattr(executable, "output_dir", None)
        if not out:
            raise RuntimeFault("run artefacts need the program's output directory, and this "
                               "program has none", code="TC443",
                               hint="compile(..., output_dir=) names one")
        root = dfx_root(out)
        try:
            for d in glob.glob(os.path.join(root, "rank*", "d*")):
                if re.fullmatch(r"rank\d+", os.path.basename(os.path.dirname(d))) and \
                        re.fullmatch(r"d\d+", os.path.basename(d)):
                    shutil.rmtree(d)
            if os.path.exists(os.path.join(root, MERGED_TRACE)):
                os.unlink(os.path.join(root, MERGED_TRACE))
            os.makedirs(root, exist_ok=True)
        except OSError as e:
            raise unwritable(root, e) from None
        lane = int(config.enable_chip_swimlane) or (TRACE_LANE if trace_dir else 0)
        settings = DfxSettings(root, lane, int(config.enable_dump_args),
                               bool(config.enable_dep_gen or lane), bool(config.enable_scope_stats),
                               time.perf_counter_ns(), os.path.basename(out),
                               f"{logs}-races" if races else None, steps, poison)
        return cls(settings, executable.world, explore, trace_dir)

    def races(self):
        """The run ended on every rank: the data races its ranks' logs show,
        as the ``DataRaceError`` to raise (None: no race, or no check)."""
        if self.settings.races is None:
            return None
        names: dict = {}
        if self.history is None:
            found, omitted = find_races({r: LogFile(race_log_path(self.settings, r), names)
                                         for r in range(self.world)}, names)
            return DataRaceError(found, omitted) if found else None
        # one history with the calls in flight before it (race_history.py)
        prefixes = self.earlier + (self.settings.races,)
        found = self.history.new_races(find_all_races(
            {r: ChainedLog([LogFile(f"{p}-{r}", names) for p in prefixes])
             for r in range(self.world)}, names))
        return DataRaceError(found[:MAX_REPORTED], max(0, len(found) - MAX_REPORTED)) \
            if found else None

    def unwritten(self) -> list:
        """The run ended on every rank: its reads of window elements that
        still held the poison sentinel, as ``TilecommWarning``s (TC606), one
        per (rank, window copy, source line)."""
        if self.settings.poison is None:
            return []
        out = []
        for r in range(self.world):
            for rank, name, owner, ops, line, its, who, span, rows in \
                    read_found(poison_log_path(self.settings, r)):
                copy = "its own copy" if owner == rank else f"rank {owner}'s copy"
                at = ""
                if its:
                    more = ", ..." if len(its) > ITERATIONS_MAX else ""
                    at = f" (iteration{'s' if len(its) > 1 else ''} " \
                         f"{'; '.join(its[:ITERATIONS_MAX])}{more})"
                out.append(TilecommWarning(
                    f"rank {rank}'s {' / '.join(ops)}{at} in {who} read row(s) "
                    f"{rows_text(rows)} of window "
                    f"'{name}' ({copy}) before anything wrote them: they still held the "
                    f"RunConfig.poison_windows sentinel", code="TC606", span=span,
                    hint="write every element before the notify that lets a reader in, or "
                         "read only the rows that were written"))
        return out

    def close(self) -> None:
        """Remove the race logs and step logs (the run is over, whichever
        way), giving an explored run's plan the steps its ranks made."""
        paths = []
        if self.settings.poison is not None:
            paths += [poison_log_path(self.settings, r) for r in range(self.world)]
        if self.history is not None:          # its logs go with the history's
            self.history.checked()
        elif self.settings.races is not None:
            paths += [race_log_path(self.settings, r) for r in range(self.world)]
        if self.settings.explore is not None:
            logs = [step_log_path(self.settings, r) for r in range(self.world)]
            self.explore.steps = sorted((s for p in logs for s in read_steps(p)),
                                        key=lambda s: s.index)
            paths += logs
        for path in paths:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass

    def salvage(self):
        """The run failed and its ranks are gone: merge what they wrote before
        they exited (the path, or None).  Never raises: the run's own error
        is what the caller reports."""
        try:
            return self.end()
        except Exception:
            return None

    def end(self):
        """Every rank reported the run done (its files are written): merge
        the swimlanes into one trace of the call, and write each dispatch's
        part of it beside that dispatch's records."""
        s = self.settings
        if not s.swimlane:
            return None
        parts, dirs = [], []          # dirs[j]: where part j came from (None: no dispatch)
        for r in range(self.world):
            k = 0
            while os.path.exists(os.path.join(dispatch_dir(s.root, r, k), RANK_TRACE)):
                parts.append(T.load(os.path.join(dispatch_dir(s.root, r, k), RANK_TRACE)))
                dirs.append(dispatch_dir(s.root, r, k))
                k += 1
            if k == 0:     # stopped before its first dispatch: still one (empty) track
                pid = pid_of(r)
                parts.append({"traceEvents": [
                    {"name": "process_name", "ph": "M", "pid": pid, "tid": pid,
                     "args": {"name": f"rank {r}"}},
                    {"name": "process_sort_index", "ph": "M", "pid": pid, "tid": pid,
                     "args": {"sort_index": r}}]})
                dirs.append(None)
        path = os.path.join(s.root, MERGED_TRACE)
        merged, views = merge_with_views(parts, s.title)
        name = dispatch_trace_name(time.time())
        try:
            T.write(path, merged)
            for d, view in zip(dirs, views):
                if d is not None:
                    T.write(os.path.join(d, name), view)
        except OSError as e:
            raise unwritable(path, e) from None
        self.trace_path = path
        if self.trace_dir:
            copy = self._copy_to_trace_dir(path)
            print(f"tilecomm: trace of this call of {s.title} written to {copy} "
                  f"(tilecomm trace {copy} summarises it)", file=sys.stderr)
        return path

    def _copy_to_trace_dir(self, path: str) -> str:
        """The merged trace copied into the trace directory under a name of its
        own: the program's build folder name and the next free call number."""
        try:
            os.makedirs(self.trace_dir, exist_ok=True)
            for n in itertools.count(1):
                dest = os.path.join(self.trace_dir, f"{self.settings.title}-{n}.json")
                try:                  # "x": two calls (or processes) never share a file
                    with open(dest, "xb") as out, open(path, "rb") as src:
                        shutil.copyfileobj(src, out)
                    return dest
                except FileExistsError:
                    continue
        except OSError as e:
            raise unwritable(self.trace_dir, e) from None


def merge_with_views(parts, title: str):
    """(the merged trace of ``parts``, the view of each part).  A dispatch's
    view is its own events as the merge left them -- its waits say which
    rank's notify released them (``released_by``) -- with its own arrows and
    metadata; an arrow between two dispatches (notify -> wait) belongs to the
    call's trace only."""
    # each event remembers its part through the merge (the key is removed after)
    tagged = [dict(tr, traceEvents=[dict(ev, _part=j) for ev in tr["traceEvents"]])
              for j, tr in enumerate(parts)]
    merged = T.merge(tagged, title=title)
    own: list = [[] for _ in parts]
    for ev in merged["traceEvents"]:
        j = ev.pop("_part", None)
        if j is not None and ev["ph"] != "M":     # metadata: each part's own, below
            own[j].append(ev)
    views = []
    for j in range(len(parts)):
        meta = [ev for ev in parts[j]["traceEvents"] if ev["ph"] == "M"]
        info = parts[j].get("otherData", {})
        views.append({"traceEvents": meta + own[j],
                      "otherData": {"schema": T.SCHEMA, "title": title,
                                    "rank": info.get("rank"), "dispatch": info.get("dispatch"),
                                    "function": info.get("function")}})
    return merged, views


def write_files(msg: Files) -> None:
    """The controller's side of ``messages.Files``: each file under its root.
    A path that would leave the root is refused (it came over a channel)."""
    root = os.path.realpath(msg.root)
    try:
        for rel, data in msg.files:
            path = os.path.realpath(os.path.join(root, rel))
            if os.path.isabs(rel) or os.path.commonpath([root, path]) != root:
                raise RuntimeFault(f"run artefact path {rel!r} leaves {root}", code="TC443")
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(data)
    except OSError as e:
        raise unwritable(root, e) from None


__all__ = ["RunArtefacts", "merge_with_views", "write_files"]
