"""The pld.tensor.* collectives as HOST builtins, against numpy, at every
world size and on both transports.  Every program publishes its data with a
staging dispatch per rank, runs the collectives on window views in the
orchestrator, and reads the results (and the signals) back with a later
dispatch per rank:

* allreduce, FP32 and FP16, every ReduceOp, with an explicit rank-1 signal
  and with the signal omitted (synthesized); core_num = 3 lanes on a
  [ws, 4] signal with element counts that leave some lanes without data
  (also synthesized); mode="ring" on a [2*(NR-1)+1, NR] signal;
* broadcast from every root, allgather, all_to_all, reduce_scatter (rows a
  rank does not own keep what it staged), all_to_all_v with counts of 0,
  within and above MAX_RECV, and barrier ordering window writes of one
  dispatch against reads of the next;
* broadcast, reduce_scatter and allreduce with an explicit signal inside a
  host ``for`` loop, with fresh data every round;
* every explicit signal reads all zero afterwards."""
import functools

import numpy as np
import pytest

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.errors import RankFailure

from programs_collectives import (SLOTS, SUM_REAL, a2av_counts, check_a2av, check_reduced,
                                  reduce_inputs, reduce_reference)
from programs_prims import WORLD_SIZES, config_for

NR = pl.dynamic("NR")
NP = {pl.FP32: np.float32, pl.FP16: np.float16}


# --------------------------------------------------------------- window copies
@functools.lru_cache(maxsize=None)
def copy_chips(DT, R, C, CS=None):
    """Dispatches that publish a plain [R, CS] tensor's leading [R, C] into a
    window and read a window back into the leading [R, C] of an output."""
    CS = CS or C

    @pl.jit.incore
    def publish_kernel(x: pl.Tensor[[R, CS], DT], w: pl.InOut[pld.DistributedTensor[[R, C], DT]]):
        w = pl.store(pl.load(x, [0, 0], [R, C]), [0, 0], w)
        return w

    @pl.jit
    def publish(x: pl.Tensor[[R, CS], DT], w: pl.InOut[pld.DistributedTensor[[R, C], DT]]):
        return publish_kernel(x, w)

    @pl.jit.incore
    def consume_kernel(out: pl.Out[pl.Tensor[[R, CS], DT]],
                       w: pl.InOut[pld.DistributedTensor[[R, C], DT]]):
        out = pl.store(pl.load(w, [0, 0], [R, C]), [0, 0], out)
        return out

    @pl.jit
    def consume(out: pl.Out[pl.Tensor[[R, CS], DT]],
                w: pl.InOut[pld.DistributedTensor[[R, C], DT]]):
        return consume_kernel(out, w)

    return publish, consume


@pl.jit.incore
def read_cells_kernel(out: pl.Out[pl.Tensor[[NR], pl.INT32]],
                      sig: pl.InOut[pld.DistributedTensor[[NR], pl.INT32]]):
    for i in pl.range(pld.nranks(pld.get_comm_ctx(sig))):
        pl.write(out, [i], pl.read(sig, [i]))
    return out


@pl.jit
def read_cells(out: pl.Out[pl.Tensor[[NR], pl.INT32]],
               sig: pl.InOut[pld.DistributedTensor[[NR], pl.INT32]]):
    return read_cells_kernel(out, sig)


# --------------------------------------------------------------- allreduce
C32 = 4097                  # FP32 streams: not a multiple of the 256-element tile
H16 = (33, 65)              # FP16: a 2-D target, reduced as one stream
LANES, STRIDE = 3, 4        # core_num and the signal's lane stride
# core_num=3 element counts, one per slot: 1 and 300 elements are one and two
# 256-element tiles, fewer tiles than lanes, so some lanes have no data
LANE_SIZES = (1, 300, 700, 1000, 513)
CL = max(LANE_SIZES)
RING32, RING16 = 1200, 37   # ring: a count divisible by every NR, and one that is not


@functools.lru_cache(maxsize=None)
def make_host_allreduce(NR):
    """The ring signal [2*(NR-1)+1, NR] needs the rank count as a constant."""
    RS = [2 * (NR - 1) + 1, NR]
    pub32, con32 = copy_chips(pl.FP32, 1, C32)
    pub16, con16 = copy_chips(pl.FP16, *H16)
    pc1, cc1 = copy_chips(pl.FP32, 1, 1, CL)
    pc300, cc300 = copy_chips(pl.FP32, 1, 300, CL)
    pc700, cc700 = copy_chips(pl.FP32, 1, 700, CL)
    pc1000, cc1000 = copy_chips(pl.FP32, 1, 1000, CL)
    pc513, cc513 = copy_chips(pl.FP32, 1, 513, CL)
    pr32, cr32 = copy_chips(pl.FP32, 1, RING32)
    pr16, cr16 = copy_chips(pl.FP16, 1, RING16)
    HR, HC = H16

    @pl.jit.incore
    def read_signals_kernel(lanes_out: pl.Out[pl.Tensor[[NR, STRIDE], pl.INT32]],
                            ring_out: pl.Out[pl.Tensor[RS, pl.INT32]],
                            lanes: pl.InOut[pld.DistributedTensor[[NR, STRIDE], pl.INT32]],
                            ring: pl.InOut[pld.DistributedTensor[RS, pl.INT32]]):
        pl.store(pl.load(lanes, [0, 0], [NR, STRIDE]), [0, 0], lanes_out)
        ring_out = pl.store(pl.load(ring, [0, 0], RS), [0, 0], ring_out)
        return ring_out

    @pl.jit
    def read_signals(lanes_out: pl.Out[pl.Tensor[[NR, STRIDE], pl.INT32]],
                     ring_out: pl.Out[pl.Tensor[RS, pl.INT32]],
                     lanes: pl.InOut[pld.DistributedTensor[[NR, STRIDE], pl.INT32]],
                     ring: pl.InOut[pld.DistributedTensor[RS, pl.INT32]]):
        return read_signals_kernel(lanes_out, ring_out, lanes, ring)

    @pl.jit.host
    def host_allreduce_main(x32: pl.Tensor[[NR, SLOTS, 1, C32], pl.FP32],
                            x16: pl.Tensor[[NR, SLOTS, HR, HC], pl.FP16],
                            xc: pl.Tensor[[NR, SLOTS, 1, CL], pl.FP32],
                            xr32: pl.Tensor[[NR, 1, RING32], pl.FP32],
                            xr16: pl.Tensor[[NR, 1, RING16], pl.FP16],
                            o32: pl.Out[pl.Tensor[[NR, SLOTS, 1, C32], pl.FP32]],
                            o16: pl.Out[pl.Tensor[[NR, SLOTS, HR, HC], pl.FP16]],
                            oc: pl.Out[pl.Tensor[[NR, SLOTS, 1, CL], pl.FP32]],
                            or32: pl.Out[pl.Tensor[[NR, 1, RING32], pl.FP32]],
                            or16: pl.Out[pl.Tensor[[NR, 1, RING16], pl.FP16]],
                            s1_out: pl.Out[pl.Tensor[[NR, NR], pl.INT32]],
                            lanes_out: pl.Out[pl.Tensor[[NR, NR, STRIDE], pl.INT32]],
                            ring_out: pl.Out[pl.Tensor[[NR] + RS, pl.INT32]]):
        f0 = pld.alloc_window_buffer([1, C32], dtype=pl.FP32)
        f1 = pld.alloc_window_buffer([1, C32], dtype=pl.FP32)
        f2 = pld.alloc_window_buffer([1, C32], dtype=pl.FP32)
        f3 = pld.alloc_window_buffer([1, C32], dtype=pl.FP32)
        f4 = pld.alloc_window_buffer([1, C32], dtype=pl.FP32)
        h0 = pld.alloc_window_buffer([HR, HC], dtype=pl.FP16)
        h1 = pld.alloc_window_buffer([HR, HC], dtype=pl.FP16)
        h2 = pld.alloc_window_buffer([HR, HC], dtype=pl.FP16)
        h3 = pld.alloc_window_buffer([HR, HC], dtype=pl.FP16)
        h4 = pld.alloc_window_buffer([HR, HC], dtype=pl.FP16)
        c0 = pld.alloc_window_buffer([1, 1], dtype=pl.FP32)
        c1 = pld.alloc_window_buffer([1, 300], dtype=pl.FP32)
        c2 = pld.alloc_window_buffer([1, 700], dtype=pl.FP32)
        c3 = pld.alloc_window_buffer([1, 1000], dtype=pl.FP32)
        c4 = pld.alloc_window_buffer([1, 513], dtype=pl.FP32)
        r32 = pld.alloc_window_buffer([1, RING32], dtype=pl.FP32)
        r16 = pld.alloc_window_buffer([1, RING16], dtype=pl.FP16)
        s1 = pld.alloc_window_buffer([NR], dtype=pl.INT32)
        lanes = pld.alloc_window_buffer([NR, STRIDE], dtype=pl.INT32)
        ring = pld.alloc_window_buffer(RS, dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            pub32(x32[r][0], pld.window(f0, [1, C32], dtype=pl.FP32), device=r)
            pub32(x32[r][1], pld.window(f1, [1, C32], dtype=pl.FP32), device=r)
            pub32(x32[r][2], pld.window(f2, [1, C32], dtype=pl.FP32), device=r)
            pub32(x32[r][3], pld.window(f3, [1, C32], dtype=pl.FP32), device=r)
            pub32(x32[r][4], pld.window(f4, [1, C32], dtype=pl.FP32), device=r)
            pub16(x16[r][0], pld.window(h0, [HR, HC], dtype=pl.FP16), device=r)
            pub16(x16[r][1], pld.window(h1, [HR, HC], dtype=pl.FP16), device=r)
            pub16(x16[r][2], pld.window(h2, [HR, HC], dtype=pl.FP16), device=r)
            pub16(x16[r][3], pld.window(h3, [HR, HC], dtype=pl.FP16), device=r)
            pub16(x16[r][4], pld.window(h4, [HR, HC], dtype=pl.FP16), device=r)
            pc1(xc[r][0], pld.window(c0, [1, 1], dtype=pl.FP32), device=r)
            pc300(xc[r][1], pld.window(c1, [1, 300], dtype=pl.FP32), device=r)
            pc700(xc[r][2], pld.window(c2, [1, 700], dtype=pl.FP32), device=r)
            pc1000(xc[r][3], pld.window(c3, [1, 1000], dtype=pl.FP32), device=r)
            pc513(xc[r][4], pld.window(c4, [1, 513], dtype=pl.FP32), device=r)
            pr32(xr32[r], pld.window(r32, [1, RING32], dtype=pl.FP32), device=r)
            pr16(xr16[r], pld.window(r16, [1, RING16], dtype=pl.FP16), device=r)
        s = pld.window(s1, [NR], dtype=pl.INT32)
        # FP32 streams: one rank-1 signal shared by four calls; Min synthesizes its own
        pld.tensor.allreduce(pld.window(f0, [1, C32], dtype=pl.FP32), s, op=pld.ReduceOp.Sum)
        pld.tensor.allreduce(pld.window(f1, [1, C32], dtype=pl.FP32), s, op=pld.ReduceOp.Max)
        pld.tensor.allreduce(pld.window(f2, [1, C32], dtype=pl.FP32), op=pld.ReduceOp.Min)
        pld.tensor.allreduce(pld.window(f3, [1, C32], dtype=pl.FP32), s, op=pld.ReduceOp.Prod)
        pld.tensor.allreduce(pld.window(f4, [1, C32], dtype=pl.FP32), s)
        # FP16 2-D targets
        pld.tensor.allreduce(pld.window(h0, [HR, HC], dtype=pl.FP16), s, op=pld.ReduceOp.Sum)
        pld.tensor.allreduce(pld.window(h1, [HR, HC], dtype=pl.FP16), s, op=pld.ReduceOp.Max)
        pld.tensor.allreduce(pld.window(h2, [HR, HC], dtype=pl.FP16), s, op=pld.ReduceOp.Min)
        pld.tensor.allreduce(pld.window(h3, [HR, HC], dtype=pl.FP16), s, op=pld.ReduceOp.Prod)
        pld.tensor.allreduce(pld.window(h4, [HR, HC], dtype=pl.FP16))
        # lanes: core_num=3 over a [ws, 4] signal (lane 3 is never used)
        ln = pld.window(lanes, [NR, STRIDE], dtype=pl.INT32)
        pld.tensor.allreduce(pld.window(c0, [1, 1], dtype=pl.FP32), ln, op=pld.ReduceOp.Sum,
                             core_num=LANES)
        pld.tensor.allreduce(pld.window(c1, [1, 300], dtype=pl.FP32), ln, op=pld.ReduceOp.Max,
                             core_num=LANES)
        pld.tensor.allreduce(pld.window(c2, [1, 700], dtype=pl.FP32), ln, op=pld.ReduceOp.Min,
                             core_num=LANES)
        pld.tensor.allreduce(pld.window(c3, [1, 1000], dtype=pl.FP32), ln, op=pld.ReduceOp.Prod,
                             core_num=LANES)
        pld.tensor.allreduce(pld.window(c4, [1, 513], dtype=pl.FP32), core_num=LANES)
        # ring: FP32 Sum over a count NR divides is what a chip's ring builtin
        # runs; the CPU runs any op and dtype over any count
        rg = pld.window(ring, RS, dtype=pl.INT32)
        pld.tensor.allreduce(pld.window(r32, [1, RING32], dtype=pl.FP32), rg, mode="ring")
        pld.tensor.allreduce(pld.window(r16, [1, RING16], dtype=pl.FP16), rg, mode="ring",
                             op=pld.ReduceOp.Prod)
        for r in pl.range(pld.world_size()):
            con32(o32[r][0], pld.window(f0, [1, C32], dtype=pl.FP32), device=r)
            con32(o32[r][1], pld.window(f1, [1, C32], dtype=pl.FP32), device=r)
            con32(o32[r][2], pld.window(f2, [1, C32], dtype=pl.FP32), device=r)
            con32(o32[r][3], pld.window(f3, [1, C32], dtype=pl.FP32), device=r)
            con32(o32[r][4], pld.window(f4, [1, C32], dtype=pl.FP32), device=r)
            con16(o16[r][0], pld.window(h0, [HR, HC], dtype=pl.FP16), device=r)
            con16(o16[r][1], pld.window(h1, [HR, HC], dtype=pl.FP16), device=r)
            con16(o16[r][2], pld.window(h2, [HR, HC], dtype=pl.FP16), device=r)
            con16(o16[r][3], pld.window(h3, [HR, HC], dtype=pl.FP16), device=r)
            con16(o16[r][4], pld.window(h4, [HR, HC], dtype=pl.FP16), device=r)
            cc1(oc[r][0], pld.window(c0, [1, 1], dtype=pl.FP32), device=r)
            cc300(oc[r][1], pld.window(c1, [1, 300], dtype=pl.FP32), device=r)
            cc700(oc[r][2], pld.window(c2, [1, 700], dtype=pl.FP32), device=r)
            cc1000(oc[r][3], pld.window(c3, [1, 1000], dtype=pl.FP32), device=r)
            cc513(oc[r][4], pld.window(c4, [1, 513], dtype=pl.FP32), device=r)
            cr32(or32[r], pld.window(r32, [1, RING32], dtype=pl.FP32), device=r)
            cr16(or16[r], pld.window(r16, [1, RING16], dtype=pl.FP16), device=r)
            read_cells(s1_out[r], pld.window(s1, [NR], dtype=pl.INT32), device=r)
            read_signals(lanes_out[r], ring_out[r], pld.window(lanes, [NR, STRIDE], dtype=pl.INT32),
                         pld.window(ring, RS, dtype=pl.INT32), device=r)
        return o32

    return host_allreduce_main


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_host_allreduce_ops_dtypes_lanes_and_ring(n):
    rng = np.random.default_rng(3000 + n)
    x32 = reduce_inputs(rng, n, 1, C32, np.float32).reshape(n, SLOTS, 1, C32)
    x16 = reduce_inputs(rng, n, *H16, np.float16).reshape(n, SLOTS, *H16)
    xc = reduce_inputs(rng, n, 1, CL, np.float32).reshape(n, SLOTS, 1, CL)
    xr32 = rng.integers(-8, 9, (n, 1, RING32)).astype(np.float32)
    xr16 = rng.choice([-2, -1, 1, 2], (n, 1, RING16)).astype(np.float16)
    o32, o16, oc = (np.full_like(x, np.nan) for x in (x32, x16, xc))
    or32, or16 = np.full_like(xr32, np.nan), np.full_like(xr16, np.nan)
    s1 = np.full((n, n), -1, np.int32)
    lanes = np.full((n, n, STRIDE), -1, np.int32)
    ring = np.full((n, 2 * (n - 1) + 1, n), -1, np.int32)
    make_host_allreduce(n)(x32, x16, xc, xr32, xr16, o32, o16, oc, or32, or16, s1, lanes, ring,
                           config=config_for(n))
    check_reduced(o32.reshape(n, SLOTS, C32), x32.reshape(n, SLOTS, C32), 1, "FP32")
    check_reduced(o16.reshape(n, SLOTS * H16[0], H16[1]), x16.reshape(n, SLOTS * H16[0], H16[1]),
                  H16[0], "FP16")
    ref = reduce_reference(xc.reshape(n, SLOTS, CL), 1)
    for r in range(n):
        for k, size in enumerate(LANE_SIZES):
            got = oc[r, k, 0]
            if k == SUM_REAL:
                np.testing.assert_allclose(got[:size], ref[k][0, :size], rtol=1e-5, atol=1e-5)
            else:
                np.testing.assert_array_equal(got[:size], ref[k][0, :size], f"lanes slot {k}")
            assert np.isnan(got[size:]).all()           # past the window: never written
        np.testing.assert_array_equal(or32[r], xr32.sum(0))
        np.testing.assert_array_equal(or16[r], xr16.astype(np.float32).prod(0).astype(np.float16))
    np.testing.assert_array_equal(s1, 0)
    np.testing.assert_array_equal(lanes, 0)
    np.testing.assert_array_equal(ring, 0)


# --------------------------------------------------------------- data movement
S = 517
ROOTS = 4


@pl.jit.incore
def publish_movement_kernel(x: pl.Tensor[[1, S], pl.FP32], rows: pl.Tensor[[NR, S], pl.FP32],
                            b0: pl.InOut[pld.DistributedTensor[[2, S], pl.FP32]],
                            b1: pl.InOut[pld.DistributedTensor[[2, S], pl.FP32]],
                            b2: pl.InOut[pld.DistributedTensor[[2, S], pl.FP32]],
                            b3: pl.InOut[pld.DistributedTensor[[2, S], pl.FP32]],
                            local: pl.InOut[pld.DistributedTensor[[1, S], pl.FP32]],
                            inp: pl.InOut[pld.DistributedTensor[[NR, S], pl.FP32]],
                            scattered: pl.InOut[pld.DistributedTensor[[NR, S], pl.FP32]]):
    t = pl.load(x, [0, 0], [1, S])
    # every rank stages its own rows in every broadcast window: only the root's survive
    pl.store(t, [0, 0], b0)
    pl.store(pl.mul(t, 2.0), [1, 0], b0)
    pl.store(t, [0, 0], b1)
    pl.store(pl.mul(t, 3.0), [1, 0], b1)
    pl.store(t, [0, 0], b2)
    pl.store(pl.mul(t, 4.0), [1, 0], b2)
    pl.store(t, [0, 0], b3)
    pl.store(pl.mul(t, 5.0), [1, 0], b3)
    pl.store(t, [0, 0], local)
    pl.store(pl.load(rows, [0, 0], [NR, S]), [0, 0], inp)
    scattered = pl.store(pl.load(rows, [0, 0], [NR, S]), [0, 0], scattered)
    return scattered


@pl.jit
def publish_movement(x: pl.Tensor[[1, S], pl.FP32], rows: pl.Tensor[[NR, S], pl.FP32],
                     b0: pl.InOut[pld.DistributedTensor[[2, S], pl.FP32]],
                     b1: pl.InOut[pld.DistributedTensor[[2, S], pl.FP32]],
                     b2: pl.InOut[pld.DistributedTensor[[2, S], pl.FP32]],
                     b3: pl.InOut[pld.DistributedTensor[[2, S], pl.FP32]],
                     local: pl.InOut[pld.DistributedTensor[[1, S], pl.FP32]],
                     inp: pl.InOut[pld.DistributedTensor[[NR, S], pl.FP32]],
                     scattered: pl.InOut[pld.DistributedTensor[[NR, S], pl.FP32]]):
    return publish_movement_kernel(x, rows, b0, b1, b2, b3, local, inp, scattered)


SLOW = 2000                 # loop steps per rank index before a rank publishes its box


@pl.jit.incore
def publish_box_kernel(x: pl.Tensor[[1, S], pl.FP32],
                       box: pl.InOut[pld.DistributedTensor[[1, S], pl.FP32]]):
    me = pld.rank(pld.get_comm_ctx(box))
    # higher ranks publish later, so a reader that were not held back by the
    # barrier would find a box not written yet
    acc = pl.load(x, [0, 0], [1, S])
    for i, (a,) in pl.range(me * SLOW, init_values=(acc,)):
        done = pl.yield_(pl.add(a, 1.0))
    box = pl.store(done, [0, 0], box)
    return box


@pl.jit
def publish_box(x: pl.Tensor[[1, S], pl.FP32],
                box: pl.InOut[pld.DistributedTensor[[1, S], pl.FP32]]):
    return publish_box_kernel(x, box)


@pl.jit.incore
def consume_movement_kernel(bc: pl.Out[pl.Tensor[[ROOTS, 2, S], pl.FP32]],
                            moved: pl.Out[pl.Tensor[[3, NR, S], pl.FP32]],
                            peers: pl.Out[pl.Tensor[[NR, S], pl.FP32]],
                            b0: pl.InOut[pld.DistributedTensor[[2, S], pl.FP32]],
                            b1: pl.InOut[pld.DistributedTensor[[2, S], pl.FP32]],
                            b2: pl.InOut[pld.DistributedTensor[[2, S], pl.FP32]],
                            b3: pl.InOut[pld.DistributedTensor[[2, S], pl.FP32]],
                            gathered: pl.InOut[pld.DistributedTensor[[NR, S], pl.FP32]],
                            exchanged: pl.InOut[pld.DistributedTensor[[NR, S], pl.FP32]],
                            scattered: pl.InOut[pld.DistributedTensor[[NR, S], pl.FP32]],
                            box: pl.InOut[pld.DistributedTensor[[1, S], pl.FP32]]):
    n = pld.nranks(pld.get_comm_ctx(box))
    pl.store(pl.load(b0, [0, 0], [2, S]), [0, 0, 0], bc)
    pl.store(pl.load(b1, [0, 0], [2, S]), [1, 0, 0], bc)
    pl.store(pl.load(b2, [0, 0], [2, S]), [2, 0, 0], bc)
    pl.store(pl.load(b3, [0, 0], [2, S]), [3, 0, 0], bc)
    pl.store(pl.load(gathered, [0, 0], [NR, S]), [0, 0, 0], moved)
    pl.store(pl.load(exchanged, [0, 0], [NR, S]), [1, 0, 0], moved)
    pl.store(pl.load(scattered, [0, 0], [NR, S]), [2, 0, 0], moved)
    # what each peer published in its previous dispatch: only the HOST barrier
    # between the two dispatches orders those writes before these reads
    for p in pl.range(n):
        pl.store(pld.tile.remote_load(box, peer=p, offsets=[0, 0], shape=[1, S]), [p, 0], peers)
    return moved


@pl.jit
def consume_movement(bc: pl.Out[pl.Tensor[[ROOTS, 2, S], pl.FP32]],
                     moved: pl.Out[pl.Tensor[[3, NR, S], pl.FP32]],
                     peers: pl.Out[pl.Tensor[[NR, S], pl.FP32]],
                     b0: pl.InOut[pld.DistributedTensor[[2, S], pl.FP32]],
                     b1: pl.InOut[pld.DistributedTensor[[2, S], pl.FP32]],
                     b2: pl.InOut[pld.DistributedTensor[[2, S], pl.FP32]],
                     b3: pl.InOut[pld.DistributedTensor[[2, S], pl.FP32]],
                     gathered: pl.InOut[pld.DistributedTensor[[NR, S], pl.FP32]],
                     exchanged: pl.InOut[pld.DistributedTensor[[NR, S], pl.FP32]],
                     scattered: pl.InOut[pld.DistributedTensor[[NR, S], pl.FP32]],
                     box: pl.InOut[pld.DistributedTensor[[1, S], pl.FP32]]):
    return consume_movement_kernel(bc, moved, peers, b0, b1, b2, b3, gathered, exchanged,
                                   scattered, box)


@pl.jit.incore
def read_pair_kernel(out: pl.Out[pl.Tensor[[2, NR], pl.INT32]],
                     s1: pl.InOut[pld.DistributedTensor[[NR], pl.INT32]],
                     s2: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
    for i in pl.range(pld.nranks(pld.get_comm_ctx(s1))):
        pl.write(out, [0, i], pl.read(s1, [i]))
        pl.write(out, [1, i], pl.read(s2, [i, 0]))
    return out


@pl.jit
def read_pair(out: pl.Out[pl.Tensor[[2, NR], pl.INT32]],
              s1: pl.InOut[pld.DistributedTensor[[NR], pl.INT32]],
              s2: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
    return read_pair_kernel(out, s1, s2)


def movement_roots(nr: int) -> list:
    """The root of each broadcast window: 0, 1, 2, 3, capped at the last rank,
    so every rank is a root at every world size."""
    return [min(k, nr - 1) for k in range(ROOTS)]


@functools.lru_cache(maxsize=None)
def make_host_movement(NR):
    """Broadcast roots must be ranks of the domain, so they are constants of
    a program built per rank count."""
    _, R1, R2, R3 = movement_roots(NR)

    @pl.jit.host
    def host_movement_main(xs: pl.Tensor[[NR, 1, S], pl.FP32],
                           rows: pl.Tensor[[NR, NR, S], pl.FP32],
                           bcs: pl.Out[pl.Tensor[[NR, ROOTS, 2, S], pl.FP32]],
                           moved: pl.Out[pl.Tensor[[NR, 3, NR, S], pl.FP32]],
                           peers: pl.Out[pl.Tensor[[NR, NR, S], pl.FP32]],
                           sigs: pl.Out[pl.Tensor[[NR, 2, NR], pl.INT32]]):
        b0 = pld.alloc_window_buffer([2, S], dtype=pl.FP32)
        b1 = pld.alloc_window_buffer([2, S], dtype=pl.FP32)
        b2 = pld.alloc_window_buffer([2, S], dtype=pl.FP32)
        b3 = pld.alloc_window_buffer([2, S], dtype=pl.FP32)
        local = pld.alloc_window_buffer([1, S], dtype=pl.FP32)
        gathered = pld.alloc_window_buffer([NR, S], dtype=pl.FP32)
        inp = pld.alloc_window_buffer([NR, S], dtype=pl.FP32)
        exchanged = pld.alloc_window_buffer([NR, S], dtype=pl.FP32)
        scattered = pld.alloc_window_buffer([NR, S], dtype=pl.FP32)
        box = pld.alloc_window_buffer([1, S], dtype=pl.FP32)
        s1 = pld.alloc_window_buffer([NR], dtype=pl.INT32)
        s2 = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            publish_movement(xs[r], rows[r], pld.window(b0, [2, S], dtype=pl.FP32),
                             pld.window(b1, [2, S], dtype=pl.FP32),
                             pld.window(b2, [2, S], dtype=pl.FP32),
                             pld.window(b3, [2, S], dtype=pl.FP32),
                             pld.window(local, [1, S], dtype=pl.FP32),
                             pld.window(inp, [NR, S], dtype=pl.FP32),
                             pld.window(scattered, [NR, S], dtype=pl.FP32), device=r)
        s = pld.window(s1, [NR], dtype=pl.INT32)
        s = pld.tensor.barrier(s)                         # rebind idiom; orders nothing here
        pld.tensor.broadcast(pld.window(b0, [2, S], dtype=pl.FP32), s, root=0)
        pld.tensor.broadcast(pld.window(b1, [2, S], dtype=pl.FP32), s, root=R1)
        pld.tensor.broadcast(pld.window(b2, [2, S], dtype=pl.FP32), s, root=R2)
        pld.tensor.broadcast(pld.window(b3, [2, S], dtype=pl.FP32), s, root=R3)
        t = pld.window(s2, [NR, 1], dtype=pl.INT32)       # [ws, 1] form of the mesh signal
        pld.tensor.allgather(pld.window(local, [1, S], dtype=pl.FP32),
                             pld.window(gathered, [NR, S], dtype=pl.FP32), t)
        pld.tensor.all_to_all(pld.window(inp, [NR, S], dtype=pl.FP32),
                              pld.window(exchanged, [NR, S], dtype=pl.FP32), t)
        pld.tensor.reduce_scatter(pld.window(scattered, [NR, S], dtype=pl.FP32), s,
                                  op=pld.ReduceOp.Sum)
        for r in pl.range(pld.world_size()):
            publish_box(xs[r], pld.window(box, [1, S], dtype=pl.FP32), device=r)
        pld.tensor.barrier(s)                             # bare statement
        for r in pl.range(pld.world_size()):
            consume_movement(bcs[r], moved[r], peers[r], pld.window(b0, [2, S], dtype=pl.FP32),
                             pld.window(b1, [2, S], dtype=pl.FP32),
                             pld.window(b2, [2, S], dtype=pl.FP32),
                             pld.window(b3, [2, S], dtype=pl.FP32),
                             pld.window(gathered, [NR, S], dtype=pl.FP32),
                             pld.window(exchanged, [NR, S], dtype=pl.FP32),
                             pld.window(scattered, [NR, S], dtype=pl.FP32),
                             pld.window(box, [1, S], dtype=pl.FP32), device=r)
            read_pair(sigs[r], s, t, device=r)
        return moved

    return host_movement_main


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_host_movement_collectives_and_barrier_ordering(n):
    rng = np.random.default_rng(4000 + n)
    xs = rng.integers(-50, 50, (n, 1, S)).astype(np.float32)
    rows = rng.integers(-50, 50, (n, n, S)).astype(np.float32)
    bcs = np.full((n, ROOTS, 2, S), np.nan, np.float32)
    moved = np.full((n, 3, n, S), np.nan, np.float32)
    peers = np.full((n, n, S), np.nan, np.float32)
    sigs = np.full((n, 2, n), -1, np.int32)
    make_host_movement(n)(xs, rows, bcs, moved, peers, sigs, config=config_for(n))
    for r in range(n):
        for k, root in enumerate(movement_roots(n)):
            np.testing.assert_array_equal(bcs[r, k, 0], xs[root, 0], f"rank {r} root {root}")
            np.testing.assert_array_equal(bcs[r, k, 1], (k + 2) * xs[root, 0])
        np.testing.assert_array_equal(moved[r, 0], xs[:, 0, :], f"allgather on rank {r}")
        np.testing.assert_array_equal(moved[r, 1], rows[:, r, :], f"all_to_all on rank {r}")
        want = rows[r].copy()
        want[r] = rows[:, r, :].sum(0)
        np.testing.assert_array_equal(moved[r, 2], want, f"reduce_scatter on rank {r}")
        np.testing.assert_array_equal(peers[r], xs[:, 0, :] + SLOW * np.arange(n)[:, None],
                                      f"box reads on rank {r}")
    np.testing.assert_array_equal(sigs, 0)


pub_row, con_row = copy_chips(pl.FP32, 1, S)


@pl.jit.host
def guarded_root_main(xs: pl.Tensor[[NR, 1, S], pl.FP32],
                      outs: pl.Out[pl.Tensor[[NR, 1, S], pl.FP32]]):
    b = pld.alloc_window_buffer([1, S], dtype=pl.FP32)
    sb = pld.alloc_window_buffer([NR], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        pub_row(xs[r], pld.window(b, [1, S], dtype=pl.FP32), device=r)
    pld.tensor.broadcast(pld.window(b, [1, S], dtype=pl.FP32),
                         pld.window(sb, [NR], dtype=pl.INT32), root=0)
    # only reached where rank 3 exists
    if pld.world_size() > 3:
        pld.tensor.broadcast(pld.window(b, [1, S], dtype=pl.FP32),
                             pld.window(sb, [NR], dtype=pl.INT32), root=3)
    for r in pl.range(pld.world_size()):
        con_row(outs[r], pld.window(b, [1, S], dtype=pl.FP32), device=r)
    return outs


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_host_broadcast_from_a_root_guarded_by_the_world_size(n):
    xs = np.random.default_rng(4500 + n).standard_normal((n, 1, S)).astype(np.float32)
    outs = np.full_like(xs, np.nan)
    guarded_root_main(xs, outs, config=config_for(n))
    # at 4 ranks the second broadcast runs too, from a root that already holds rank 0's row
    np.testing.assert_array_equal(outs, np.broadcast_to(xs[0], xs.shape))


@pl.jit.host
def unguarded_root_main(xs: pl.Tensor[[NR, 1, S], pl.FP32],
                        outs: pl.Out[pl.Tensor[[NR, 1, S], pl.FP32]]):
    b = pld.alloc_window_buffer([1, S], dtype=pl.FP32)
    sb = pld.alloc_window_buffer([NR], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        pub_row(xs[r], pld.window(b, [1, S], dtype=pl.FP32), device=r)
    pld.tensor.broadcast(pld.window(b, [1, S], dtype=pl.FP32),
                         pld.window(sb, [NR], dtype=pl.INT32), root=4)
    for r in pl.range(pld.world_size()):
        con_row(outs[r], pld.window(b, [1, S], dtype=pl.FP32), device=r)
    return outs


@pytest.mark.parametrize("n", [1, 3])
def test_host_broadcast_from_a_root_beyond_the_world_stops_the_run(n):
    """Never a silent no-op: where the compiler cannot rule the call out (the
    all-device domain of a program written for several world sizes), the run
    stops with the root and the domain size."""
    xs = np.zeros((n, 1, S), np.float32)
    with pytest.raises(RankFailure) as info:
        unguarded_root_main(xs, np.zeros_like(xs), config=config_for(n))
    assert info.value.error_code == "TC501"
    assert f"root 4 is not a rank of the comm domain of {n} rank(s)" in str(info.value)


# --------------------------------------------------------------- all_to_all_v
CAP = 3
V = 23


@functools.lru_cache(maxsize=None)
def make_host_a2av(NR):
    """The HOST all_to_all_v signal [NR, 1] needs the rank count as a constant."""

    @pl.jit.incore
    def publish_a2av_kernel(x: pl.Tensor[[NR * CAP, V], pl.FP32], counts: pl.Tensor[[NR], pl.INT32],
                            inp: pl.InOut[pld.DistributedTensor[[NR * CAP, V], pl.FP32]],
                            cnt: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
        pl.store(pl.load(x, [0, 0], [NR * CAP, V]), [0, 0], inp)
        for i in pl.range(NR):
            pl.write(cnt, [i, 0], pl.read(counts, [i]))
        return inp

    @pl.jit
    def publish_a2av(x: pl.Tensor[[NR * CAP, V], pl.FP32], counts: pl.Tensor[[NR], pl.INT32],
                     inp: pl.InOut[pld.DistributedTensor[[NR * CAP, V], pl.FP32]],
                     cnt: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
        return publish_a2av_kernel(x, counts, inp, cnt)

    @pl.jit.incore
    def consume_a2av_kernel(out: pl.Out[pl.Tensor[[NR * CAP, V], pl.FP32]],
                            got: pl.Out[pl.Tensor[[NR, 1], pl.INT32]],
                            sig_out: pl.Out[pl.Tensor[[NR, 1], pl.INT32]],
                            target: pl.InOut[pld.DistributedTensor[[NR * CAP, V], pl.FP32]],
                            recv: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
                            sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
        pl.store(pl.load(target, [0, 0], [NR * CAP, V]), [0, 0], out)
        pl.store(pl.load(recv, [0, 0], [NR, 1]), [0, 0], got)
        sig_out = pl.store(pl.load(sig, [0, 0], [NR, 1]), [0, 0], sig_out)
        return out

    @pl.jit
    def consume_a2av(out: pl.Out[pl.Tensor[[NR * CAP, V], pl.FP32]],
                     got: pl.Out[pl.Tensor[[NR, 1], pl.INT32]],
                     sig_out: pl.Out[pl.Tensor[[NR, 1], pl.INT32]],
                     target: pl.InOut[pld.DistributedTensor[[NR * CAP, V], pl.FP32]],
                     recv: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
                     sig: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]]):
        return consume_a2av_kernel(out, got, sig_out, target, recv, sig)

    @pl.jit.host
    def host_a2av_main(xs: pl.Tensor[[NR, NR * CAP, V], pl.FP32],
                       counts: pl.Tensor[[NR, NR], pl.INT32],
                       outs: pl.Out[pl.Tensor[[NR, NR * CAP, V], pl.FP32]],
                       gots: pl.Out[pl.Tensor[[NR, NR, 1], pl.INT32]],
                       sigs: pl.Out[pl.Tensor[[NR, NR, 1], pl.INT32]]):
        inp = pld.alloc_window_buffer([NR * CAP, V], dtype=pl.FP32)
        cnt = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
        target = pld.alloc_window_buffer([NR * CAP, V], dtype=pl.FP32)
        sig = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
        recv = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            publish_a2av(xs[r], counts[r], pld.window(inp, [NR * CAP, V], dtype=pl.FP32),
                         pld.window(cnt, [NR, 1], dtype=pl.INT32), device=r)
        pld.tensor.all_to_all_v(pld.window(inp, [NR * CAP, V], dtype=pl.FP32),
                                pld.window(target, [NR * CAP, V], dtype=pl.FP32),
                                pld.window(sig, [NR, 1], dtype=pl.INT32),
                                pld.window(cnt, [NR, 1], dtype=pl.INT32),
                                pld.window(recv, [NR, 1], dtype=pl.INT32))
        for r in pl.range(pld.world_size()):
            consume_a2av(outs[r], gots[r], sigs[r],
                         pld.window(target, [NR * CAP, V], dtype=pl.FP32),
                         pld.window(recv, [NR, 1], dtype=pl.INT32),
                         pld.window(sig, [NR, 1], dtype=pl.INT32), device=r)
        return outs

    return host_a2av_main


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_host_all_to_all_v_counts_zero_within_and_above_max_recv(n):
    rng = np.random.default_rng(5000 + n)
    counts = a2av_counts(n, 3, CAP)
    xs = rng.standard_normal((3, n, n * CAP, V)).astype(np.float32)
    outs = np.full((n, n * CAP, V), np.nan, np.float32)
    gots = np.full((n, n, 1), -7, np.int32)
    sigs = np.full((n, n, 1), -1, np.int32)
    main = make_host_a2av(n)
    # a rank alone needs three calls to send 0, within and above the cap; one
    # set of ranks serves them all
    with main.compile(xs[0], counts[0], outs, gots, sigs, config=config_for(n)).prepare() as rt:
        for k in range(3 if n == 1 else 1):
            outs[:], gots[:], sigs[:] = np.nan, -7, -1
            rt(xs[k], counts[k], outs, gots, sigs)
            check_a2av(xs[k], counts[k], outs, gots, CAP, f"counts {counts[k].tolist()}")
            np.testing.assert_array_equal(sigs, 0)


# --------------------------------------------------------------- inside a host loop
ROUNDS = 3
L = 300                     # more than one 256-element tile per row


@pl.jit.incore
def publish_round_kernel(x: pl.Tensor[[1, L], pl.FP32], rows: pl.Tensor[[NR, L], pl.FP32],
                         bw: pl.InOut[pld.DistributedTensor[[1, L], pl.FP32]],
                         aw: pl.InOut[pld.DistributedTensor[[1, L], pl.FP32]],
                         rw: pl.InOut[pld.DistributedTensor[[NR, L], pl.FP32]]):
    t = pl.load(x, [0, 0], [1, L])
    pl.store(t, [0, 0], bw)
    pl.store(pl.mul(t, 0.5), [0, 0], aw)
    rw = pl.store(pl.load(rows, [0, 0], [NR, L]), [0, 0], rw)
    return rw


@pl.jit
def publish_round(x: pl.Tensor[[1, L], pl.FP32], rows: pl.Tensor[[NR, L], pl.FP32],
                  bw: pl.InOut[pld.DistributedTensor[[1, L], pl.FP32]],
                  aw: pl.InOut[pld.DistributedTensor[[1, L], pl.FP32]],
                  rw: pl.InOut[pld.DistributedTensor[[NR, L], pl.FP32]]):
    return publish_round_kernel(x, rows, bw, aw, rw)


@pl.jit.incore
def consume_round_kernel(out: pl.Out[pl.Tensor[[NR + 2, L], pl.FP32]],
                         sig_out: pl.Out[pl.Tensor[[NR], pl.INT32]],
                         bw: pl.InOut[pld.DistributedTensor[[1, L], pl.FP32]],
                         aw: pl.InOut[pld.DistributedTensor[[1, L], pl.FP32]],
                         rw: pl.InOut[pld.DistributedTensor[[NR, L], pl.FP32]],
                         sig: pl.InOut[pld.DistributedTensor[[NR], pl.INT32]]):
    pl.store(pl.load(bw, [0, 0], [1, L]), [0, 0], out)
    pl.store(pl.load(aw, [0, 0], [1, L]), [1, 0], out)
    pl.store(pl.load(rw, [0, 0], [NR, L]), [2, 0], out)
    # no peer can be in the next round's collectives on sig yet: the HOST
    # barrier on the other signal, after this dispatch, holds them back
    for i in pl.range(pld.nranks(pld.get_comm_ctx(sig))):
        pl.write(sig_out, [i], pl.read(sig, [i]))
    return out


@pl.jit
def consume_round(out: pl.Out[pl.Tensor[[NR + 2, L], pl.FP32]],
                  sig_out: pl.Out[pl.Tensor[[NR], pl.INT32]],
                  bw: pl.InOut[pld.DistributedTensor[[1, L], pl.FP32]],
                  aw: pl.InOut[pld.DistributedTensor[[1, L], pl.FP32]],
                  rw: pl.InOut[pld.DistributedTensor[[NR, L], pl.FP32]],
                  sig: pl.InOut[pld.DistributedTensor[[NR], pl.INT32]]):
    return consume_round_kernel(out, sig_out, bw, aw, rw, sig)


@pl.jit.host
def host_loop_main(xs: pl.Tensor[[NR, ROUNDS, 1, L], pl.FP32],
                   rows: pl.Tensor[[NR, ROUNDS, NR, L], pl.FP32],
                   outs: pl.Out[pl.Tensor[[NR, ROUNDS, NR + 2, L], pl.FP32]],
                   sigs: pl.Out[pl.Tensor[[NR, ROUNDS, NR], pl.INT32]],
                   gates: pl.Out[pl.Tensor[[NR, NR], pl.INT32]]):
    bw = pld.alloc_window_buffer([1, L], dtype=pl.FP32)
    aw = pld.alloc_window_buffer([1, L], dtype=pl.FP32)
    rw = pld.alloc_window_buffer([NR, L], dtype=pl.FP32)
    sb = pld.alloc_window_buffer([NR], dtype=pl.INT32)
    gb = pld.alloc_window_buffer([NR], dtype=pl.INT32)
    for rd in pl.range(ROUNDS):
        for r in pl.range(pld.world_size()):
            publish_round(xs[r][rd], rows[r][rd], pld.window(bw, [1, L], dtype=pl.FP32),
                          pld.window(aw, [1, L], dtype=pl.FP32),
                          pld.window(rw, [NR, L], dtype=pl.FP32), device=r)
        s = pld.window(sb, [NR], dtype=pl.INT32)
        pld.tensor.broadcast(pld.window(bw, [1, L], dtype=pl.FP32), s, root=0)
        pld.tensor.reduce_scatter(pld.window(rw, [NR, L], dtype=pl.FP32), s)
        pld.tensor.allreduce(pld.window(aw, [1, L], dtype=pl.FP32), s, op=pld.ReduceOp.Max)
        for r in pl.range(pld.world_size()):
            consume_round(outs[r][rd], sigs[r][rd], pld.window(bw, [1, L], dtype=pl.FP32),
                          pld.window(aw, [1, L], dtype=pl.FP32),
                          pld.window(rw, [NR, L], dtype=pl.FP32), s, device=r)
        pld.tensor.barrier(pld.window(gb, [NR], dtype=pl.INT32))
    for r in pl.range(pld.world_size()):
        read_cells(gates[r], pld.window(gb, [NR], dtype=pl.INT32), device=r)
    return outs


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_host_collectives_inside_a_host_loop(n):
    rng = np.random.default_rng(6000 + n)
    xs = rng.integers(-50, 50, (n, ROUNDS, 1, L)).astype(np.float32)
    rows = rng.integers(-50, 50, (n, ROUNDS, n, L)).astype(np.float32)
    outs = np.full((n, ROUNDS, n + 2, L), np.nan, np.float32)
    sigs = np.full((n, ROUNDS, n), -1, np.int32)
    gates = np.full((n, n), -1, np.int32)
    host_loop_main(xs, rows, outs, sigs, gates, config=config_for(n))
    for r in range(n):
        for rd in range(ROUNDS):
            got = outs[r, rd]
            np.testing.assert_array_equal(got[0], xs[0, rd, 0], f"broadcast rank {r} round {rd}")
            np.testing.assert_array_equal(got[1], (xs[:, rd, 0] * 0.5).max(0),
                                          f"allreduce rank {r} round {rd}")
            want = rows[r, rd].copy()
            want[r] = rows[:, rd, r].sum(0)
            np.testing.assert_array_equal(got[2:], want, f"reduce_scatter rank {r} round {rd}")
    np.testing.assert_array_equal(sigs, 0)
    np.testing.assert_array_equal(gates, 0)
