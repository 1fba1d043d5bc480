"""Programs the DistributedWorker tests run (module level: the front end reads
their source)."""
import tilecomm.language as pl
import tilecomm.language.distributed as pld

NR = pl.dynamic("NR")
W = pl.dynamic("W")
S = pl.dynamic("S")


# ---- accumulate: every rank atomically adds its row into rank 0's window and
# counts itself into rank 0's signal row; rank 0 waits until every row reached
# ``expected`` and copies the window out.  Fresh or zeroed windows: expected 1
# every call and y = this call's sum.  Kept windows: the k-th call waits for k
# and y = the sum of every call so far (a monotonic counter protocol).
@pl.jit.incore
def accumulate(x: pl.Tensor[[1, W], pl.FP32], y: pl.Out[pl.Tensor[[1, W], pl.FP32]],
               acc: pl.InOut[pld.DistributedTensor[[1, W], pl.FP32]],
               sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
               expected: pl.Scalar[pl.INT32]) -> pl.Tensor[[1, W], pl.FP32]:
    me = pld.rank(pld.get_comm_ctx(acc))
    n = pld.nranks(pld.get_comm_ctx(acc))
    pld.tile.remote_store(pl.load(x, [0, 0], [1, W]), acc, 0, [0, 0], atomic=pld.AtomicType.Add)
    pld.system.notify(sig, 0, [me, 0], 1, op=pld.NotifyOp.AtomicAdd)
    if me == 0:
        for src in pl.range(n):
            pld.system.wait(sig, [src, 0], expected, cmp=pld.WaitCmp.Ge)
    y = pl.store(pl.load(acc, [0, 0], [1, W]), [0, 0], y)
    return y


@pl.jit
def accumulate_chip(x: pl.Tensor[[1, W], pl.FP32], y: pl.Out[pl.Tensor[[1, W], pl.FP32]],
                    acc: pl.InOut[pld.DistributedTensor[[1, W], pl.FP32]],
                    sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
                    expected: pl.Scalar[pl.INT32]):
    return accumulate(x, y, acc, sig, expected)


@pl.jit.host
def accumulate_main(xs: pl.Tensor[[NR, 1, W], pl.FP32], ys: pl.Out[pl.Tensor[[NR, 1, W], pl.FP32]],
                    expected: pl.Scalar[pl.INT32]):
    acc_buf = pld.alloc_window_buffer([1, W], dtype=pl.FP32)
    sig_buf = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        accumulate_chip(xs[r], ys[r], pld.window(acc_buf, [1, W], dtype=pl.FP32),
                        pld.window(sig_buf, [NR, 1], dtype=pl.INT32), expected, device=r)
    return ys


# ---- allreduce with the self-clearing collective: correct on kept windows too
@pl.jit.incore
def allreduce_kernel(x: pl.Tensor[[1, W], pl.FP32], y: pl.Out[pl.Tensor[[1, W], pl.FP32]],
                     data: pl.InOut[pld.DistributedTensor[[1, W], pl.FP32]],
                     sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]
                     ) -> pl.Tensor[[1, W], pl.FP32]:
    data = pl.store(pl.load(x, [0, 0], [1, W]), [0, 0], data)
    data = pld.tensor.allreduce(data, sig, op=pld.ReduceOp.Sum)
    y = pl.store(pl.load(data, [0, 0], [1, W]), [0, 0], y)
    return y


@pl.jit
def allreduce_chip(x: pl.Tensor[[1, W], pl.FP32], y: pl.Out[pl.Tensor[[1, W], pl.FP32]],
                   data: pl.InOut[pld.DistributedTensor[[1, W], pl.FP32]],
                   sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
    return allreduce_kernel(x, y, data, sig)


@pl.jit.host
def allreduce_main(xs: pl.Tensor[[NR, 1, W], pl.FP32], ys: pl.Out[pl.Tensor[[NR, 1, W], pl.FP32]]):
    data_buf = pld.alloc_window_buffer([1, W], dtype=pl.FP32)
    sig_buf = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        allreduce_chip(xs[r], ys[r], pld.window(data_buf, [1, W], dtype=pl.FP32),
                       pld.window(sig_buf, [NR, 1], dtype=pl.INT32), device=r)
    return ys


# ---- resident weights: y[r] = x[r] + w[r] with w a (stacked) device tensor
@pl.jit.incore
def add_kernel(x: pl.Tensor[[1, W], pl.FP32], w: pl.Tensor[[1, W], pl.FP32],
               y: pl.Out[pl.Tensor[[1, W], pl.FP32]]) -> pl.Tensor[[1, W], pl.FP32]:
    y = pl.store(pl.add(pl.load(x, [0, 0], [1, W]), pl.load(w, [0, 0], [1, W])), [0, 0], y)
    return y


@pl.jit
def add_chip(x: pl.Tensor[[1, W], pl.FP32], w: pl.Tensor[[1, W], pl.FP32],
             y: pl.Out[pl.Tensor[[1, W], pl.FP32]]):
    return add_kernel(x, w, y)


@pl.jit.host
def add_main(xs: pl.Tensor[[NR, 1, W], pl.FP32], ws: pl.Tensor[[NR, 1, W], pl.FP32],
             ys: pl.Out[pl.Tensor[[NR, 1, W], pl.FP32]]):
    for r in pl.range(pld.world_size()):
        add_chip(xs[r], ws[r], ys[r], device=r)
    return ys


# one rank's weight (a DeviceTensor on one worker) added on rank ``device`` only
def add_on(device: int):
    @pl.jit.host
    def add_on_device(x: pl.Tensor[[1, W], pl.FP32], w: pl.Tensor[[1, W], pl.FP32],
                      y: pl.Out[pl.Tensor[[1, W], pl.FP32]]):
        add_chip(x, w, y, device=device)
        return y
    return add_on_device


# ---- prefill / decode sharing a KV cache: prefill writes kv[r] = x[r] * 2,
# decode reads it: y[r] = kv[r] + q[r]
@pl.jit.incore
def prefill_kernel(x: pl.Tensor[[1, W], pl.FP32], kv: pl.Out[pl.Tensor[[1, W], pl.FP32]]
                   ) -> pl.Tensor[[1, W], pl.FP32]:
    t = pl.load(x, [0, 0], [1, W])
    kv = pl.store(pl.add(t, t), [0, 0], kv)
    return kv


@pl.jit
def prefill_chip(x: pl.Tensor[[1, W], pl.FP32], kv: pl.Out[pl.Tensor[[1, W], pl.FP32]]):
    return prefill_kernel(x, kv)


@pl.jit.host
def prefill(xs: pl.Tensor[[NR, 1, W], pl.FP32], kv: pl.Out[pl.Tensor[[NR, 1, W], pl.FP32]]):
    for r in pl.range(pld.world_size()):
        prefill_chip(xs[r], kv[r], device=r)
    return kv


@pl.jit.host
def decode(kv: pl.Tensor[[NR, 1, W], pl.FP32], qs: pl.Tensor[[NR, 1, W], pl.FP32],
           ys: pl.Out[pl.Tensor[[NR, 1, W], pl.FP32]]):
    for r in pl.range(pld.world_size()):
        add_chip(qs[r], kv[r], ys[r], device=r)
    return ys


# ---- tuple results through every level, and return-style calls (static shapes)
N2, WS = 2, 4


@pl.jit.incore
def sum_diff(a: pl.Tensor[[1, WS], pl.FP32], b: pl.Tensor[[1, WS], pl.FP32],
             s: pl.Out[pl.Tensor[[1, WS], pl.FP32]], d: pl.Out[pl.Tensor[[1, WS], pl.FP32]]
             ) -> tuple[pl.Tensor[[1, WS], pl.FP32], pl.Tensor[[1, WS], pl.FP32]]:
    x = pl.load(a, [0, 0], [1, WS])
    y = pl.load(b, [0, 0], [1, WS])
    s = pl.store(pl.add(x, y), [0, 0], s)
    d = pl.store(pl.sub(x, y), [0, 0], d)
    return s, d


@pl.jit
def sum_diff_chip(a: pl.Tensor[[1, WS], pl.FP32], b: pl.Tensor[[1, WS], pl.FP32],
                  s: pl.Out[pl.Tensor[[1, WS], pl.FP32]], d: pl.Out[pl.Tensor[[1, WS], pl.FP32]]):
    return sum_diff(a, b, s, d)                  # a tuple-returning kernel's result


@pl.jit
def sum_diff_unpacking_chip(a: pl.Tensor[[1, WS], pl.FP32], b: pl.Tensor[[1, WS], pl.FP32],
                            s: pl.Out[pl.Tensor[[1, WS], pl.FP32]],
                            d: pl.Out[pl.Tensor[[1, WS], pl.FP32]]):
    s2, d2 = sum_diff(a, b, s, d)
    return s2, d2


@pl.jit.host
def sum_diff_main(a: pl.Tensor[[N2, 1, WS], pl.FP32], b: pl.Tensor[[N2, 1, WS], pl.FP32],
                  s: pl.Out[pl.Tensor[[N2, 1, WS], pl.FP32]],
                  d: pl.Out[pl.Tensor[[N2, 1, WS], pl.FP32]]
                  ) -> tuple[pl.Tensor[[N2, 1, WS], pl.FP32], pl.Tensor[[N2, 1, WS], pl.FP32]]:
    for r in pl.range(pld.world_size()):
        s1, d1 = sum_diff_chip(a[r], b[r], s[r], d[r], device=r)
        s2, d2 = sum_diff_unpacking_chip(s1, d1, s[r], d[r], device=r)
    return s, d


@pl.jit.host
def dynamic_out_main(xs: pl.Tensor[[NR, 1, W], pl.FP32], ws: pl.Tensor[[NR, 1, W], pl.FP32],
                     ys: pl.Out[pl.Tensor[[NR, 1, W], pl.FP32]]) -> pl.Tensor[[NR, 1, W], pl.FP32]:
    for r in pl.range(pld.world_size()):
        add_chip(xs[r], ws[r], ys[r], device=r)
    return ys


# ---- a class-form program with two orchestration functions sharing a kernel
@pl.program
class TwoEntries:
    @pl.function(type=pl.FunctionType.InCore)
    def double(self, x: pl.Tensor[[1, W], pl.FP32], y: pl.Out[pl.Tensor[[1, W], pl.FP32]]
               ) -> pl.Tensor[[1, W], pl.FP32]:
        t = pl.load(x, [0, 0], [1, W])
        y = pl.store(pl.add(t, t), [0, 0], y)
        return y

    @pl.function(type=pl.FunctionType.Orchestration)
    def chip(self, x: pl.Tensor[[1, W], pl.FP32], y: pl.Out[pl.Tensor[[1, W], pl.FP32]]):
        return self.double(x, y)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def forward(self, xs: pl.Tensor[[NR, 1, W], pl.FP32], ys: pl.Out[pl.Tensor[[NR, 1, W], pl.FP32]]):
        for r in pl.range(pld.world_size()):
            self.chip(xs[r], ys[r], device=r)
        return ys

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def backward(self, xs: pl.Tensor[[NR, 1, W], pl.FP32],
                 ys: pl.Out[pl.Tensor[[NR, 1, W], pl.FP32]]):
        for r in pl.range(pld.world_size()):       # each rank doubles its neighbour's row
            self.chip(xs[(r + 1) % pld.world_size()], ys[r], device=r)
        return ys


# ---- HOST SubWorkers: Python in the controller between dispatches
@pl.program
class WithSubWorkers:
    @pl.function(type=pl.FunctionType.InCore)
    def twice(self, x: pl.Tensor[[1, W], pl.FP32], y: pl.Out[pl.Tensor[[1, W], pl.FP32]]
              ) -> pl.Tensor[[1, W], pl.FP32]:
        t = pl.load(x, [0, 0], [1, W])
        y = pl.store(pl.add(t, t), [0, 0], y)
        return y

    @pl.function(type=pl.FunctionType.Orchestration)
    def chip(self, x: pl.Tensor[[1, W], pl.FP32], y: pl.Out[pl.Tensor[[1, W], pl.FP32]]):
        return self.twice(x, y)

    @pl.function(level=pl.Level.HOST, role=pl.Role.SubWorker)
    def total(doubled: pl.Tensor[[NR, 1, W], pl.FP32], out: pl.Out[pl.Tensor[[NR, 1, W], pl.FP32]]):
        # real Python on the host tensors: every row becomes the sum of all rows
        out[:] = doubled.sum(axis=0)

    @pl.function(level=pl.Level.HOST, role=pl.Role.SubWorker)
    def inspect(values: pl.Tensor[[NR, 1, W], pl.FP32]):
        """Bound at prepare(callbacks={"inspect": fn})."""
        ...

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def main(self, xs: pl.Tensor[[NR, 1, W], pl.FP32], mid: pl.Out[pl.Tensor[[NR, 1, W], pl.FP32]],
             summed: pl.Out[pl.Tensor[[NR, 1, W], pl.FP32]],
             ys: pl.Out[pl.Tensor[[NR, 1, W], pl.FP32]]):
        for r in pl.range(pld.world_size()):
            self.chip(xs[r], mid[r], device=r)
        self.total(mid, summed)              # after every rank's dispatch wrote mid
        self.inspect(summed)
        for r in pl.range(pld.world_size()):
            self.chip(summed[r], ys[r], device=r)
        return ys


# ---- a call that only a later call can release: rank 0 waits for a count that
# the last rank adds in the call where ``send`` is 1
@pl.jit.incore
def relay_kernel(sig: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]],
                 y: pl.Out[pl.Tensor[[1, 1], pl.INT32]], send: pl.Scalar[pl.INT32],
                 expected: pl.Scalar[pl.INT32]) -> pl.Tensor[[1, 1], pl.INT32]:
    me = pld.rank(pld.get_comm_ctx(sig))
    n = pld.nranks(pld.get_comm_ctx(sig))
    if me == n - 1:
        if send == 1:
            pld.system.notify(sig, 0, [0, 0], 1, op=pld.NotifyOp.AtomicAdd)
    if me == 0:
        pld.system.wait(sig, [0, 0], expected, cmp=pld.WaitCmp.Ge)
    y = pl.store(pl.load(sig, [0, 0], [1, 1]), [0, 0], y)
    return y


@pl.jit
def relay_chip(sig: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]],
               y: pl.Out[pl.Tensor[[1, 1], pl.INT32]], send: pl.Scalar[pl.INT32],
               expected: pl.Scalar[pl.INT32]):
    return relay_kernel(sig, y, send, expected)


@pl.jit.host
def relay_main(ys: pl.Out[pl.Tensor[[NR, 1, 1], pl.INT32]], send: pl.Scalar[pl.INT32],
               expected: pl.Scalar[pl.INT32]):
    buf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        relay_chip(pld.window(buf, [1, 1], dtype=pl.INT32), ys[r], send, expected, device=r)
    return ys
