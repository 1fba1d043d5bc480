"""HOST all_to_all_v: the variable all-to-all as a builtin between dispatches.

Same layouts and result as all_to_all_v.py (the kernel form): CAP rows
reserved per peer, input and target [NR*CAP, SIZE], send_counts [NR],
recv_counts and signal [NR, 1]; only the first recv_counts[src, 0] rows of
slot src of the target are valid.  What changes on the HOST path:
  * all five operands are pld.window views of five different
    alloc_window_buffer allocations; input and send_counts are windows too,
    so a stage dispatch fills them first;
  * NR must still be a compile-time constant (build(nr) from --ranks), and
    the call may not sit inside a host for/while loop -- to exchange
    repeatedly, call the program again (or prepare it once and call the
    prepared worker).
The call becomes one builtin dispatch per rank; the read dispatch after it
sees the received rows and counts, and a signal that is all zeros again.
Run: python examples/all_to_all_v_host.py --ranks 4
"""
import argparse

import numpy as np

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.runtime import DistributedConfig, RunConfig

SIZE = 6
CAP = 3                    # rows reserved per peer (MAX_RECV)


def build(nr: int):
    @pl.jit.incore
    def stage_kernel(inp: pl.Tensor[[nr * CAP, SIZE], pl.FP32], counts: pl.Tensor[[nr], pl.INT32],
                     send: pl.InOut[pld.DistributedTensor[[nr * CAP, SIZE], pl.FP32]],
                     send_counts: pl.InOut[pld.DistributedTensor[[nr], pl.INT32]]):
        send = pl.store(pl.load(inp, [0, 0], [nr * CAP, SIZE]), [0, 0], send)
        for i in pl.range(nr):
            pl.write(send_counts, [i], pl.read(counts, [i]))
        return send

    @pl.jit
    def stage(inp: pl.Tensor[[nr * CAP, SIZE], pl.FP32], counts: pl.Tensor[[nr], pl.INT32],
              send: pl.InOut[pld.DistributedTensor[[nr * CAP, SIZE], pl.FP32]],
              send_counts: pl.InOut[pld.DistributedTensor[[nr], pl.INT32]]):
        return stage_kernel(inp, counts, send, send_counts)

    @pl.jit.incore
    def read_kernel(out: pl.Out[pl.Tensor[[nr * CAP, SIZE], pl.FP32]],
                    got: pl.Out[pl.Tensor[[nr, 1], pl.INT32]],
                    cells: pl.Out[pl.Tensor[[nr, 1], pl.INT32]],
                    target: pl.InOut[pld.DistributedTensor[[nr * CAP, SIZE], pl.FP32]],
                    recv_counts: pl.InOut[pld.DistributedTensor[[nr, 1], pl.INT32]],
                    signal: pl.InOut[pld.DistributedTensor[[nr, 1], pl.INT32]]):
        out = pl.store(pl.load(target, [0, 0], [nr * CAP, SIZE]), [0, 0], out)
        got = pl.store(pl.load(recv_counts, [0, 0], [nr, 1]), [0, 0], got)
        cells = pl.store(pl.load(signal, [0, 0], [nr, 1]), [0, 0], cells)
        return out

    @pl.jit
    def read(out: pl.Out[pl.Tensor[[nr * CAP, SIZE], pl.FP32]],
             got: pl.Out[pl.Tensor[[nr, 1], pl.INT32]],
             cells: pl.Out[pl.Tensor[[nr, 1], pl.INT32]],
             target: pl.InOut[pld.DistributedTensor[[nr * CAP, SIZE], pl.FP32]],
             recv_counts: pl.InOut[pld.DistributedTensor[[nr, 1], pl.INT32]],
             signal: pl.InOut[pld.DistributedTensor[[nr, 1], pl.INT32]]):
        return read_kernel(out, got, cells, target, recv_counts, signal)

    @pl.jit.host
    def main(inps: pl.Tensor[[nr, nr * CAP, SIZE], pl.FP32], counts: pl.Tensor[[nr, nr], pl.INT32],
             outs: pl.Out[pl.Tensor[[nr, nr * CAP, SIZE], pl.FP32]],
             gots: pl.Out[pl.Tensor[[nr, nr, 1], pl.INT32]],
             cells: pl.Out[pl.Tensor[[nr, nr, 1], pl.INT32]]):
        send_buf = pld.alloc_window_buffer([nr * CAP, SIZE], dtype=pl.FP32)
        send_counts_buf = pld.alloc_window_buffer([nr], dtype=pl.INT32)
        target_buf = pld.alloc_window_buffer([nr * CAP, SIZE], dtype=pl.FP32)
        recv_counts_buf = pld.alloc_window_buffer([nr, 1], dtype=pl.INT32)
        sig_buf = pld.alloc_window_buffer([nr, 1], dtype=pl.INT32)
        send = pld.window(send_buf, [nr * CAP, SIZE], dtype=pl.FP32)
        send_counts = pld.window(send_counts_buf, [nr], dtype=pl.INT32)
        target = pld.window(target_buf, [nr * CAP, SIZE], dtype=pl.FP32)
        recv_counts = pld.window(recv_counts_buf, [nr, 1], dtype=pl.INT32)
        signal = pld.window(sig_buf, [nr, 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            stage(inps[r], counts[r], send, send_counts, device=r)
        target = pld.tensor.all_to_all_v(send, target, signal, send_counts, recv_counts)
        for r in pl.range(pld.world_size()):
            read(outs[r], gots[r], cells[r], target, recv_counts, signal, device=r)
        return outs

    return main


def check(inps, counts, outs, gots):
    """What all_to_all_v promises, rank by rank and slot by slot."""
    nr = inps.shape[0]
    for r in range(nr):
        for src in range(nr):
            k = min(counts[src, r], CAP)
            assert gots[r, src, 0] == k, (r, src, gots[r, src, 0], k)
            np.testing.assert_array_equal(outs[r, src * CAP:src * CAP + k],
                                          inps[src, r * CAP:r * CAP + k])


def run(nr: int):
    rng = np.random.default_rng(nr)
    # inps[src, dest*CAP + i] = 1000*src + 100*dest + 10*i + column
    slot = np.arange(nr * CAP)
    tag = slot // CAP * 100 + slot % CAP * 10                      # 100*dest + 10*i
    inps = (np.arange(nr)[:, None, None] * 1000 + tag[None, :, None]
            + np.arange(SIZE)).astype(np.float32)
    counts = rng.integers(0, CAP + 2, (nr, nr)).astype(np.int32)   # 0 .. CAP+1: some clamp
    outs = np.full_like(inps, np.nan)
    gots = np.full((nr, nr, 1), -1, np.int32)
    cells = np.full((nr, nr, 1), -1, np.int32)
    build(nr)(inps, counts, outs, gots, cells,
              config=RunConfig(distributed_config=DistributedConfig(device_ids=list(range(nr)))))
    check(inps, counts, outs, gots)
    np.testing.assert_array_equal(cells, 0)
    return counts, gots


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=4)
    args = ap.parse_args()
    counts, gots = run(args.ranks)
    print(f"HOST all_to_all_v over {args.ranks} ranks: rank 0 sent {counts[0].tolist()} rows, "
          f"received {gots[0, :, 0].tolist()} (cap {CAP})")
    print("OK")
