"""HOST SubWorkers: Python between dispatches, as a real body or a callback.

Every rank squares its row; the SubWorker ``normalise`` (a real Python body,
run in the calling process once every rank's dispatch has produced its input)
divides the rows by their global maximum; the abstract SubWorker ``report``
(body ``...``) is bound at ``prepare(callbacks={"report": fn})`` and receives
one argument, the list of its tensors.  The ranks then add 1 to the
normalised rows.  Run: python examples/worker_subworker_callback.py --ranks 2
"""
import argparse

import numpy as np

import tilecomm
import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.runtime import DistributedConfig, runs_host_code

SIZE = 16


def build(nr: int):
    @pl.program
    class Normalise:
        @pl.function(type=pl.FunctionType.InCore)
        def square(self, x: pl.Tensor[[1, SIZE], pl.FP32], y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]]
                   ) -> pl.Tensor[[1, SIZE], pl.FP32]:
            t = pl.load(x, [0, 0], [1, SIZE])
            y = pl.store(pl.mul(t, t), [0, 0], y)
            return y

        @pl.function(type=pl.FunctionType.InCore)
        def shift(self, x: pl.Tensor[[1, SIZE], pl.FP32], y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]]
                  ) -> pl.Tensor[[1, SIZE], pl.FP32]:
            y = pl.store(pl.add(pl.load(x, [0, 0], [1, SIZE]), 1.0), [0, 0], y)
            return y

        @pl.function(type=pl.FunctionType.Orchestration)
        def square_chip(self, x: pl.Tensor[[1, SIZE], pl.FP32],
                        y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]]):
            return self.square(x, y)

        @pl.function(type=pl.FunctionType.Orchestration)
        def shift_chip(self, x: pl.Tensor[[1, SIZE], pl.FP32],
                       y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]]):
            return self.shift(x, y)

        @pl.function(level=pl.Level.HOST, role=pl.Role.SubWorker)
        def normalise(sq: pl.InOut[pl.Tensor[[nr, 1, SIZE], pl.FP32]]):
            sq /= sq.max()                   # plain numpy on the host tensor, in place

        @pl.function(level=pl.Level.HOST, role=pl.Role.SubWorker)
        def report(sq: pl.Tensor[[nr, 1, SIZE], pl.FP32]):
            ...

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def main(self, xs: pl.Tensor[[nr, 1, SIZE], pl.FP32],
                 sq: pl.Out[pl.Tensor[[nr, 1, SIZE], pl.FP32]],
                 ys: pl.Out[pl.Tensor[[nr, 1, SIZE], pl.FP32]]):
            for r in pl.range(pld.world_size()):
                self.square_chip(xs[r], sq[r], device=r)
            self.normalise(sq)
            self.report(sq)
            for r in pl.range(pld.world_size()):
                self.shift_chip(sq[r], ys[r], device=r)
            return ys

    return Normalise


def run(nr: int) -> float | None:
    program = tilecomm.ir.compile(build(nr),
                                  distributed_config=DistributedConfig(device_ids=list(range(nr))))
    rng = np.random.default_rng(2)
    xs = rng.uniform(-3, 3, size=(nr, 1, SIZE)).astype(np.float32)
    sq, ys = np.zeros_like(xs), np.zeros_like(xs)
    peaks = []
    with program.prepare(callbacks={"report": lambda args: peaks.append(float(args[0].max()))}) \
            as rt:
        rt(xs, sq, ys)
    expected = (xs * xs) / (xs * xs).max()
    np.testing.assert_allclose(sq, expected, rtol=1e-6)
    np.testing.assert_allclose(ys, expected + 1, rtol=1e-6)
    if not runs_host_code():         # under mpiexec, process 0 ran the callback for the job
        assert peaks == [], peaks
        return None
    assert peaks == [1.0], peaks
    return peaks[0]


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=2)
    args = ap.parse_args()
    peak = run(args.ranks)
    seen = f"callback saw max {peak}" if peak is not None else "the callback ran on process 0"
    print(f"{args.ranks} ranks: squared rows normalised on the host ({seen})")
    print("OK")
