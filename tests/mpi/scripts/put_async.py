"""Asynchronous puts under ``mpiexec -n N`` (test_mpi_put_async.py):
``put_async.py N``.  The ring, its tile form and rows to every peer compute
what numpy says on every process; with race detection the ring is clean and
the form that notifies before waiting the event raises DataRaceError on
every process.  Prints "ASYNC <rank>"."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "ranks"))

import numpy as np  # noqa: E402

from tilecomm.errors import DataRaceError  # noqa: E402
from tilecomm.runtime import DistributedConfig, RunConfig  # noqa: E402

from programs_async import S, make_rows, racy_ring, ring, ring_reference, tile_ring  # noqa: E402

n = int(sys.argv[1])
from mpi4py import MPI  # noqa: E402  (after tilecomm: the backend initialises MPI)
me = MPI.COMM_WORLD.Get_rank()
assert MPI.COMM_WORLD.Get_size() == n       # one process per rank: the MPI backend runs the calls


def cfg(**kw):
    return RunConfig(distributed_config=DistributedConfig(list(range(n))), **kw)


xs = np.random.default_rng(7).standard_normal((n, 1, S)).astype(np.float32)
for main in (ring, tile_ring):
    ys = np.zeros((n, 2, S), np.float32)
    main(xs, ys, config=cfg())
    np.testing.assert_array_equal(ys, ring_reference(xs))
rows = np.zeros((n, n, S), np.float32)
make_rows(n)(xs, rows, config=cfg())
for r in range(n):
    np.testing.assert_array_equal(rows[r], xs[:, 0, :])
ys = np.zeros((n, 2, S), np.float32)
ring(xs, ys, config=cfg(detect_races=True))
np.testing.assert_array_equal(ys, ring_reference(xs))
try:
    racy_ring(xs, np.zeros((n, 2, S), np.float32), config=cfg(detect_races=True))
    raise SystemExit("the early-published put_async was not reported")
except DataRaceError as e:
    assert any(r.first.op == "pld.tensor.put_async" and r.second.op == "pl.load"
               for r in e.races), str(e)
print("ASYNC", me, flush=True)
