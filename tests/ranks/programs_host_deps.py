"""The kernels of the host-tensor dependency tests (test_host_dependencies.py,
test_call_plans.py): rank r produces a [1, N] tensor ``steps`` additions
after loading it (slower the more steps), and a consumer doubles what another
rank produced -- a host tensor one rank writes and another reads, which only
the runtime's dispatch-to-dispatch edge orders."""
import tilecomm.language as pl
import tilecomm.language.distributed as pld

N = 8


@pl.jit.incore
def produce(x: pl.Tensor[[1, N], pl.FP32], tmp: pl.Out[pl.Tensor[[1, N], pl.FP32]],
            w: pld.DistributedTensor[[1, N], pl.FP32],
            steps: pl.Scalar[pl.INT32]) -> pl.Tensor[[1, N], pl.FP32]:
    acc = pl.load(x, [0, 0], [1, N])
    for i, (a,) in pl.range(steps, init_values=(acc,)):
        out = pl.yield_(pl.add(a, 1.0))
    tmp = pl.store(out, [0, 0], tmp)
    return tmp


@pl.jit.incore
def consume(tmp: pl.Tensor[[1, N], pl.FP32], y: pl.Out[pl.Tensor[[1, N], pl.FP32]],
            w: pld.DistributedTensor[[1, N], pl.FP32]) -> pl.Tensor[[1, N], pl.FP32]:
    y = pl.store(pl.mul(pl.load(tmp, [0, 0], [1, N]), 2.0), [0, 0], y)
    return y


@pl.jit
def chip_produce(x: pl.Tensor[[1, N], pl.FP32], tmp: pl.Out[pl.Tensor[[1, N], pl.FP32]],
                 w: pld.DistributedTensor[[1, N], pl.FP32], steps: pl.Scalar[pl.INT32]):
    return produce(x, tmp, w, steps)


@pl.jit
def chip_consume(tmp: pl.Tensor[[1, N], pl.FP32], y: pl.Out[pl.Tensor[[1, N], pl.FP32]],
                 w: pld.DistributedTensor[[1, N], pl.FP32]):
    return consume(tmp, y, w)
