"""The happens-before shapes of tests/ranks/programs_hb.py under ``mpiexec
-n N`` (test_mpi_races.py): ``hb_races.py CASE N``.  The twin runs clean and
computes the reference; the racy form raises DataRaceError on every process,
naming one of the case's expected pairs.  Prints "HB <rank> <case>"."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "ranks"))

import numpy as np  # noqa: E402

from tilecomm.errors import DataRaceError  # noqa: E402
from tilecomm.runtime import DistributedConfig, RunConfig  # noqa: E402

from programs_hb import CASES, SENTINEL, YR, S, inputs  # noqa: E402

name, n = sys.argv[1], int(sys.argv[2])
from mpi4py import MPI  # noqa: E402  (after tilecomm: the backend initialises MPI)
me = MPI.COMM_WORLD.Get_rank()
case = CASES[name]
cfg = RunConfig(distributed_config=DistributedConfig(list(range(n))), detect_races=True)
xs = inputs(n)
ys = np.full((n, YR, S), SENTINEL, np.float32)
case.safe(xs, ys, 1, config=cfg)
np.testing.assert_array_equal(ys, case.reference(xs))
ys = np.full((n, YR, S), SENTINEL, np.float32)
try:
    case.racy(xs, ys, 1, config=cfg)
    raise SystemExit(f"{name}: no race reported")
except DataRaceError as e:
    found = {tuple(sorted((a.rank, int(a.line.rsplit(":", 1)[1])) for a in (r.first, r.second)))
             for r in e.races}
    want = {tuple(sorted(p)) for p in case.racy_pairs(n)}
    assert found & want, (found, want)
print("HB", me, name, flush=True)
