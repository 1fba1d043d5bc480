"""The race check under ``mpiexec -n N`` (test_mpi_races.py) on the ring of
tests/ranks/programs_races.py, one mode per command-line argument:

  race   the notify comes before the data: every process catches the
         DataRaceError (the same races) and holds the call's outputs,
         written back on process 0; prints "RACED <rank> <races>"
  clean  the data, then the notify: no error, the data received; prints
         "CLEAN <rank>"
  nodes  the control block reached over RMA (TILECOMM_MPI_DIRECT=0, as
         across nodes, or processes on two hosts): every process gets the
         ConfigError saying why and what instead, before any rank runs;
         prints "REFUSED <rank>"
  unset  the race of "race" with RunConfig.detect_races left unset, so the
         environment decides (``tilecomm run --detect-races``): prints
         "RACED <rank> <races>" as "race" does, or "UNCHECKED <rank>"
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "ranks"))

import numpy as np  # noqa: E402

from tilecomm.errors import ConfigError, DataRaceError  # noqa: E402
from tilecomm.runtime import DistributedConfig, RunConfig  # noqa: E402

from programs_races import (reported_lines, ring_inputs, ring_main,  # noqa: E402
                            ring_race_lines)

mode, n = sys.argv[1], int(sys.argv[2])
from mpi4py import MPI  # noqa: E402  (after tilecomm: the backend initialises MPI)
me = MPI.COMM_WORLD.Get_rank()
cfg = RunConfig(distributed_config=DistributedConfig(list(range(n))),
                detect_races=None if mode == "unset" else True)
xs, ys, gots = ring_inputs(n)
if mode == "unset":
    try:
        ring_main(xs, ys, gots, 1, config=cfg)
        print("UNCHECKED", me, flush=True)
    except DataRaceError as e:
        print("RACED", me, len(e.races), flush=True)
elif mode == "race":
    try:
        ring_main(xs, ys, gots, 1, config=cfg)
        raise SystemExit("no race reported")
    except DataRaceError as e:
        np.testing.assert_array_equal(ys, 2 * xs)          # written back, on every process
        assert reported_lines(e) == ring_race_lines(n), (reported_lines(e), ring_race_lines(n))
        assert e.code == "TC601" and e.omitted == 0
        print("RACED", me, len(e.races), flush=True)
elif mode == "clean":
    ring_main(xs, ys, gots, 0, config=cfg)
    np.testing.assert_array_equal(gots, np.roll(xs, 1, axis=0))
    print("CLEAN", me, flush=True)
else:
    try:
        ring_main(xs, ys, gots, 0, config=cfg)
    except ConfigError as e:
        # why not (the sequencer and the logs), and what the user has instead
        text = str(e)
        assert e.code == "TC402", text
        for said in ("cannot check a job whose control block is reached over MPI RMA",
                     "a sequencer every rank takes with atomics in node-shared memory",
                     "access log from process 0's /dev/shm", "Nothing ran",
                     "protocol lint (TC7xx)", "every process on one node",
                     "across nodes with detect_races off"):
            assert said in text, (said, text)
        assert not ys.any()
        print("REFUSED", me, flush=True)
