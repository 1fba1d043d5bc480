"""Builds on disk: every specialisation of a program is kept under its
``output_dir``, and ``CompiledProgram.from_dir(output_dir)`` runs them again
in a later process without parsing, verifying or lowering anything.

Layout: ``<output_dir>/distributed_meta.json`` (what was built: the entry,
the world size, the platform, one record per specialisation) and
``<output_dir>/build/<hash of the signature>.pkl`` (one executable each: the program tables, the
lowered source and line map, the rank image, parameter directions).  The
lowered source is executed again on load; the user's source files are not
read.  A reloaded build is specialised only for the argument signatures that
were built (others are refused with the list of those that exist) and takes
in-place calls (its outputs passed as arguments).
"""
from __future__ import annotations

import builtins
import hashlib
import json
import os
import pickle
import threading
from pathlib import Path

import numpy as np

from ...errors import ArgumentError, ConfigError
from ..config import DistributedConfig, RunConfig
from .device_tensors import DeviceTensor, StackedDeviceTensor
from ..executable import EntryInfo, Executable, Param, fresh_image_key, to_numpy
from ..controller.run import launch
from .distributed_worker import DistributedWorker

META = "distributed_meta.json"
FORMAT = 1
_SAVE_LOCK = threading.Lock()


def signature(args) -> str:
    """A specialisation's key from its arguments alone (what the compiler's
    argument types are made of: each tensor's dtype and shape, each scalar's
    kind)."""
    parts = []
    for a in args:
        if isinstance(a, (bool, np.bool_)):
            parts.append("bool")
        elif isinstance(a, (int, np.integer)):
            parts.append("int")
        elif isinstance(a, (float, np.floating)):
            parts.append("float")
        elif isinstance(a, (DeviceTensor, StackedDeviceTensor)):
            parts.append(f"{np.dtype(a.dtype).name}{list(a.shape)}")
        else:
            arr = to_numpy(a)
            parts.append(f"{arr.dtype.name}{list(arr.shape)}" if arr is not None
                         else type(a).__name__)
    return "(" + ", ".join(parts) + ")"


class LoadedSource:
    """The lowered module of a reloaded build (executed again on load)."""

    def __init__(self, source, filename, linemap):
        self.source = source
        self.filename = filename
        self.linemap = linemap
        self.namespace: dict = {}
        exec(builtins.compile(source, filename, "exec"), self.namespace)


def save(output_dir: str, entry_name: str, key: str, exe: Executable, names: list) -> None:
    """Keep ``exe`` (the specialisation ``key``) under ``output_dir``."""
    with _SAVE_LOCK:
        os.makedirs(os.path.join(output_dir, "build"), exist_ok=True)
        meta_path = os.path.join(output_dir, META)
        meta = _read_meta(meta_path) if os.path.exists(meta_path) else None
        cfg = exe.config
        if meta is None or meta.get("entry") != entry_name or meta.get("world") != exe.world:
            meta = {"format": FORMAT, "entry": entry_name, "world": exe.world,
                    "platform": cfg.platform, "device_ids": list(cfg.dist.device_ids),
                    "specialisations": {}}
        specs = meta["specialisations"]
        # named by the key: processes building other signatures into the same
        # directory never write one file, and a record names its own key
        fname = hashlib.sha1(key.encode()).hexdigest()[:16] + ".pkl"
        entry = exe.entry_info
        record = {
            "key": key, "prog": exe.prog, "config": cfg, "directions": exe.directions,
            "image": exe.image, "source": exe.lowered.source,
            "filename": exe.lowered.filename, "linemap": exe.lowered.linemap,
            "entry": entry.name, "params": [(n, p.span) for n, p in zip(names, entry.params)],
            # SubWorker bodies by reference; a body pickle cannot find comes back
            # as one that needs a callback
            "sub_workers": {n: _picklable_sub(v) for n, v in exe.sub_workers.items()},
        }
        # every file is written under a name of this process and renamed into
        # place: the processes of an MPI job build the same program at once
        # (the last meta written wins; a signature it lacks is rebuilt later)
        _write_atomically(os.path.join(output_dir, "build", fname), "wb",
                          lambda f: pickle.dump(record, f, pickle.HIGHEST_PROTOCOL))
        specs[key] = fname
        _write_atomically(meta_path, "w", lambda f: json.dump(meta, f, indent=1))


def _write_atomically(path: str, mode: str, write) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, mode) as f:
        write(f)
    os.replace(tmp, path)


def _picklable_sub(v):
    name, fn, abstract = v
    try:
        pickle.dumps(fn)
    except Exception:
        return name, None, True
    return name, fn, abstract


def _read_meta(path):
    with open(path) as f:
        return json.load(f)


class LoadedProgram:
    """A build reloaded from its output directory (``CompiledProgram.from_dir``)."""

    def __init__(self, output_dir, config: RunConfig, meta: dict):
        self.output_dir = Path(output_dir).resolve()     # a Path, as a compiled program's
        self.config = config
        self.meta = meta
        self.key = ("loaded", os.path.abspath(output_dir))
        self._cache: dict = {}

    @property
    def world(self) -> int:
        return self.config.dist.world_size

    @property
    def sub_workers(self) -> dict:
        return {}

    def signatures(self) -> list:
        return sorted(self.meta["specialisations"])

    def _check_args(self, args):
        params = self._any().entry_info.params
        if len(args) != len(params):
            raise ArgumentError(f"{self.meta['entry']} expects {len(params)} arguments "
                                f"(in-place, one per parameter), got {len(args)}. Parameters: "
                                f"{[p.name for p in params]}")
        return [p.name for p in params]

    def complete_args(self, args) -> tuple:
        return tuple(args)

    def _any(self) -> Executable:
        """Any loadable specialisation (for the entry's parameter names)."""
        error = None
        for key in self.meta["specialisations"]:
            try:
                return self._load(key)
            except (OSError, pickle.UnpicklingError, KeyError) as e:
                error = e                  # a stale record: try the next
        raise FileNotFoundError(f"no loadable build record in '{self.output_dir}': {error}")

    def _load(self, key) -> Executable:
        exe = self._cache.get(key)
        if exe is None:
            with open(os.path.join(self.output_dir, "build",
                                   self.meta["specialisations"][key]), "rb") as f:
                rec = pickle.load(f)
            if rec.get("key") != key:
                raise FileNotFoundError(f"the build record of {key} in '{self.output_dir}' "
                                        f"was overwritten; compile the program again")
            lowered = LoadedSource(rec["source"], rec["filename"], rec["linemap"])
            rec["image"].key = fresh_image_key()    # keys are per process
            params = tuple(Param(n, s) for n, s in rec["params"])
            exe = Executable(prog=rec["prog"], lowered=lowered, config=self.config,
                             entry=lowered.namespace[f"f_{rec['entry']}"],
                             entry_info=EntryInfo(rec["entry"], params), image=rec["image"],
                             directions=rec["directions"],
                             program_key=self.key, sub_workers=rec["sub_workers"])
            exe.output_dir = self.output_dir          # where its run artefacts go
            self._cache[key] = exe
        return exe

    def specialise(self, args) -> Executable:
        self._check_args(args)
        key = signature(args)
        if key not in self.meta["specialisations"]:
            raise ArgumentError(f"this build of {self.meta['entry']} was not compiled for "
                                f"arguments {key}; it has {self.signatures()}", code="TC410",
                                hint="compile the program for these arguments (its source is "
                                     "not read when a build is reloaded)")
        return self._load(key)

    def executables(self) -> list:
        return list(self._cache.values())

    def __call__(self, *args, config=None):
        for a in args:
            if isinstance(a, (DeviceTensor, StackedDeviceTensor)):
                raise ArgumentError("One-shot calls cannot accept DeviceTensor or "
                                    "StackedDeviceTensor arguments", code="TC414")
        exe = self.specialise(args)
        unbound = [v[0] for v in exe.sub_workers.values() if v[2]]
        if unbound:
            raise ConfigError(f"SubWorkers {sorted(unbound)} of this reloaded build need "
                              f"callbacks: prepare(callbacks={{...}})", code="TC425")
        return launch(exe, list(args), config or self.config)

    def prepare(self, config=None, **options) -> DistributedWorker:
        return DistributedWorker(self, config, **options)


def from_dir(output_dir, *, platform=None, backend_type=None, distributed_config=None,
             detect_races=None):
    """A build kept under ``output_dir``, ready to run without recompiling.
    ``platform`` / ``distributed_config``, when given, must match the build;
    ``detect_races``: ``RunConfig.detect_races`` of its calls."""
    output_dir = os.fspath(output_dir)
    meta_path = os.path.join(output_dir, META)
    if not os.path.exists(meta_path):
        raise FileNotFoundError(f"no tilecomm build in {output_dir!r} (no {META})")
    meta = _read_meta(meta_path)
    if meta.get("format") != FORMAT or not meta.get("specialisations"):
        raise FileNotFoundError(f"{meta_path} describes no build this version can load")
    if platform is not None and platform != meta["platform"]:
        raise ConfigError(f"the build in {output_dir!r} is for platform {meta['platform']!r}, "
                          f"not {platform!r}", code="TC402")
    if backend_type is not None and backend_type not in ("cpu", meta["platform"]):
        raise ConfigError(f"backend_type {backend_type!r} is not available here; builds run "
                          f"on the CPU", code="TC402")
    dc = distributed_config or DistributedConfig(device_ids=tuple(meta["device_ids"]))
    if dc.world_size != meta["world"]:
        raise ConfigError(f"the build in {output_dir!r} is for {meta['world']} rank(s); "
                          f"distributed_config has {dc.world_size}", code="TC401")
    loaded = LoadedProgram(output_dir, RunConfig(platform=meta["platform"],
                                                 distributed_config=dc,
                                                 detect_races=detect_races), meta)
    return loaded


def execute_distributed_compiled(output_dir, args, config=None, *, platform=None,
                                 distributed_config=None, detect_races=None):
    """``from_dir(output_dir)`` and one call with ``args``."""
    program = from_dir(output_dir, platform=platform, distributed_config=distributed_config,
                       detect_races=detect_races)
    return program(*args, config=config)


__all__ = ["LoadedProgram", "execute_distributed_compiled", "from_dir", "save", "signature"]
