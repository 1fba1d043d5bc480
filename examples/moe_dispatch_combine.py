"""Expert-parallel mixture-of-experts: dispatch -> expert compute -> combine.

Every rank holds T tokens (hidden size H, BF16) and E experts; a token is
routed to K experts anywhere in the world (global expert g lives on rank
g // E as local expert g % E) with an FP32 routing weight per choice.  The
chip orchestration of each rank runs one kernel per phase, in order:

  dispatch   1. a histogram of this rank's assignments per (destination,
                expert) in a pl.array;
             2. each count is published with an AtomicAdd notify into cell
                [expert, my_rank] of the owner's count window;
             3. barrier -- every count has landed;
             4. slot offsets: this rank's first slot in expert e of rank d is
                the sum of d's counts for e from the ranks before it (a
                prefix over source ranks), so every source writes its own
                disjoint slots of each expert's receive buffer;
             5. each kept row is pushed with a one-row sub-region put; its
                routing weight and its home (source rank, k, token) are
                staged locally at the same slot and pushed after the loop
                with one put per (destination, expert) -- a source's kept
                slots of one expert are contiguous;
             6. barrier -- every row has landed;
  expert     each received row, BF16 -> FP32, is scaled by its routing weight
             and rounded back to BF16, to nearest with ties to even
             (mode="rint"; pl.cast's default "round" breaks ties away from
             zero), giving the weighted term;
  combine    the term is stored into row k*T + t of the home rank's return
             window; after a third barrier the home rank sums its K terms per
             token in FP32, in top-k order (k-major rows: one [T, H] block per
             k).

Capacity: an expert's receive buffer holds CAP rows.  An expert keeps the
first CAP rows in (source rank, token, k) order -- exactly the rows whose slot
(offset + running index) is below CAP -- and drops the rest: a dropped row is
not sent, contributes nothing to its token's sum, and is counted in the
source rank's stats.  Nothing is written outside the buffer; the numpy
reference applies the same rule, so over-capacity routings are checked too.

Shapes: SMALL is a faithful miniature for quick runs; DEEPSEEK is the layer
the workload is sized on (T=128, K=6, E=16 per rank, H=4096, CAP=192: a
24 MiB receive window per rank).  The program's shapes depend on the rank
count, so it is built by build(nr, shape).
Run: python examples/moe_dispatch_combine.py --ranks 4 [--shape deepseek]
"""
import argparse
from dataclasses import dataclass

import ml_dtypes
import numpy as np

import tilecomm.language as pl
import tilecomm.language.distributed as pld
from tilecomm.runtime import DistributedConfig, RunConfig

BF16 = ml_dtypes.bfloat16


@dataclass(frozen=True)
class MoEShape:
    tokens: int            # T, tokens per rank
    topk: int              # K, experts per token
    experts: int           # E, experts per rank
    hidden: int            # H, BF16 elements per token row
    capacity: int          # CAP, receive rows per expert


SMALL = MoEShape(tokens=16, topk=2, experts=4, hidden=64, capacity=12)
DEEPSEEK = MoEShape(tokens=128, topk=6, experts=16, hidden=4096, capacity=192)
SHAPES = {"small": SMALL, "deepseek": DEEPSEEK}


def build(nr: int, shape: MoEShape, phases: int = 3):
    """The MoE round for ``nr`` ranks: host entry ``main(xs, idxs, wts, ys, stats)``.
    ``phases`` < 3 stops after dispatch (1), expert compute (2) or before
    anything (0): the benchmark times each phase as the difference of
    consecutive prefixes."""
    PHASES = phases
    T, K, E, H, CAP = shape.tokens, shape.topk, shape.experts, shape.hidden, shape.capacity
    NE = nr * E
    STATS = E + 1          # rows kept by each local expert, then rows this rank dropped
    ROUTES = T * K
    ADD, SET = pld.NotifyOp.AtomicAdd, pld.NotifyOp.Set

    @pl.jit.incore
    def moe_dispatch(x: pl.Tensor[[T, H], pl.BF16], idx: pl.Tensor[[T, K], pl.INT32],
                     wts: pl.Tensor[[T, K], pl.FP32],
                     stats: pl.Out[pl.Tensor[[1, STATS], pl.INT32]],
                     recv: pl.InOut[pld.DistributedTensor[[E * CAP, H], pl.BF16]],
                     recv_w: pl.InOut[pld.DistributedTensor[[E * CAP, 1], pl.FP32]],
                     route: pl.InOut[pld.DistributedTensor[[E * CAP, 1], pl.INT32]],
                     counts: pl.InOut[pld.DistributedTensor[[E, nr], pl.INT32]],
                     sig: pl.InOut[pld.DistributedTensor[[nr, 1], pl.INT32]]):
        me = pld.rank(pld.get_comm_ctx(recv))
        # 1. histogram per (destination rank, expert) = per global expert
        hist = pl.array.create(NE, pl.INT32)
        for t in pl.range(T):
            for k in pl.range(K):
                g = pl.read(idx, [t, k])
                hist[g] = hist[g] + 1
        # 2. publish the counts into the owners' count windows
        for d in pl.range(nr):
            for e in pl.range(E):
                n = hist[d * E + e]
                if n > 0:
                    pld.system.notify(counts, peer=d, offsets=[e, me], value=n, op=ADD)
        # 3. every count has landed
        sig = pld.tensor.barrier(sig)
        # 4. first slot per (destination, expert) = prefix over the source ranks
        table = pl.create_tensor([E, nr], pl.INT32)
        first = pl.array.create(NE, pl.INT32)
        for d in pl.range(nr):
            pld.tensor.get(table, d, counts)
            for e in pl.range(E):
                base = 0
                for s in pl.range(me):
                    base = base + pl.read(table, [e, s])
                first[d * E + e] = base
        # 5. push the kept rows; their weights and homes are staged at the same
        #    slots of a local table and pushed with one put per (destination,
        #    expert): its kept slots are contiguous
        slot = first                 # arrays are values: advancing slot leaves first
        w_stage = pl.create_tensor([NE * CAP, 1], pl.FP32)
        home_stage = pl.create_tensor([NE * CAP, 1], pl.INT32)
        dropped = 0
        for t in pl.range(T):
            for k in pl.range(K):
                g = pl.read(idx, [t, k])
                j = slot[g]
                slot[g] = j + 1
                if j < CAP:
                    pld.tensor.put(recv, g // E, x, [(g % E) * CAP + j, 0], [t, 0], [1, H])
                    pl.write(w_stage, [g * CAP + j, 0], pl.read(wts, [t, k]))
                    pl.write(home_stage, [g * CAP + j, 0], me * ROUTES + k * T + t)
                else:
                    dropped = dropped + 1
        for g in pl.range(NE):
            lo = first[g]
            n = pl.min(slot[g], CAP) - lo
            if n > 0:
                d = g // E
                row = (g % E) * CAP + lo
                pld.tensor.put(recv_w, d, w_stage, [row, 0], [g * CAP + lo, 0], [n, 1],
                               chunk_rows=CAP)
                pld.tensor.put(route, d, home_stage, [row, 0], [g * CAP + lo, 0], [n, 1],
                               chunk_rows=CAP)
        pl.write(stats, [0, E], dropped)
        # 6. every row has landed
        sig = pld.tensor.barrier(sig)
        return stats

    @pl.jit.incore
    def moe_expert(stats: pl.Out[pl.Tensor[[1, STATS], pl.INT32]],
                   recv: pl.InOut[pld.DistributedTensor[[E * CAP, H], pl.BF16]],
                   recv_w: pl.InOut[pld.DistributedTensor[[E * CAP, 1], pl.FP32]],
                   route: pl.InOut[pld.DistributedTensor[[E * CAP, 1], pl.INT32]],
                   counts: pl.InOut[pld.DistributedTensor[[E, nr], pl.INT32]],
                   back: pl.InOut[pld.DistributedTensor[[K * T, H], pl.BF16]],
                   sig: pl.InOut[pld.DistributedTensor[[nr, 1], pl.INT32]]):
        # the weighted BF16 term of every kept row, stored into its home's return window
        for e in pl.range(E):
            total = 0
            for s in pl.range(nr):
                total = total + pl.read(counts, [e, s])
            kept = pl.min(total, CAP)
            pl.write(stats, [0, e], kept)
            for j in pl.range(kept):
                row = e * CAP + j
                home = pl.read(route, [row, 0])
                w = pl.read(recv_w, [row, 0])
                term = pl.cast(pl.mul(pl.cast(pl.load(recv, [row, 0], [1, H]), pl.FP32), w),
                               pl.BF16, mode="rint")
                pld.tile.remote_store(term, back, home // ROUTES, [home % ROUTES, 0])
        # every term has landed at its home
        sig = pld.tensor.barrier(sig)
        return stats

    @pl.jit.incore
    def moe_combine(y: pl.Out[pl.Tensor[[T, H], pl.FP32]],
                    back: pl.InOut[pld.DistributedTensor[[K * T, H], pl.BF16]]):
        # FP32 sum of the K terms of every token, in top-k order (k-major rows)
        acc = pl.cast(pl.load(back, [0, 0], [T, H]), pl.FP32)
        for k in pl.range(1, K):
            acc = pl.add(acc, pl.cast(pl.load(back, [k * T, 0], [T, H]), pl.FP32))
        y = pl.store(acc, [0, 0], y)
        return y

    @pl.jit
    def moe_chip(x: pl.Tensor[[T, H], pl.BF16], idx: pl.Tensor[[T, K], pl.INT32],
                 wts: pl.Tensor[[T, K], pl.FP32],
                 y: pl.Out[pl.Tensor[[T, H], pl.FP32]],
                 stats: pl.Out[pl.Tensor[[1, STATS], pl.INT32]],
                 recv: pl.InOut[pld.DistributedTensor[[E * CAP, H], pl.BF16]],
                 recv_w: pl.InOut[pld.DistributedTensor[[E * CAP, 1], pl.FP32]],
                 route: pl.InOut[pld.DistributedTensor[[E * CAP, 1], pl.INT32]],
                 counts: pl.InOut[pld.DistributedTensor[[E, nr], pl.INT32]],
                 back: pl.InOut[pld.DistributedTensor[[K * T, H], pl.BF16]],
                 sig: pl.InOut[pld.DistributedTensor[[nr, 1], pl.INT32]]):
        if PHASES >= 1:
            stats = moe_dispatch(x, idx, wts, stats, recv, recv_w, route, counts, sig)
        if PHASES >= 2:
            stats = moe_expert(stats, recv, recv_w, route, counts, back, sig)
        if PHASES >= 3:
            y = moe_combine(y, back)
        return y

    @pl.jit.host
    def main(xs: pl.Tensor[[nr, T, H], pl.BF16], idxs: pl.Tensor[[nr, T, K], pl.INT32],
             wts: pl.Tensor[[nr, T, K], pl.FP32],
             ys: pl.Out[pl.Tensor[[nr, T, H], pl.FP32]],
             stats: pl.Out[pl.Tensor[[nr, 1, STATS], pl.INT32]]):
        recv_buf = pld.alloc_window_buffer([E * CAP, H], dtype=pl.BF16)
        recv_w_buf = pld.alloc_window_buffer([E * CAP, 1], dtype=pl.FP32)
        route_buf = pld.alloc_window_buffer([E * CAP, 1], dtype=pl.INT32)
        count_buf = pld.alloc_window_buffer([E, nr], dtype=pl.INT32)
        back_buf = pld.alloc_window_buffer([K * T, H], dtype=pl.BF16)
        sig_buf = pld.alloc_window_buffer([nr, 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            moe_chip(xs[r], idxs[r], wts[r], ys[r], stats[r],
                     pld.window(recv_buf, [E * CAP, H], dtype=pl.BF16),
                     pld.window(recv_w_buf, [E * CAP, 1], dtype=pl.FP32),
                     pld.window(route_buf, [E * CAP, 1], dtype=pl.INT32),
                     pld.window(count_buf, [E, nr], dtype=pl.INT32),
                     pld.window(back_buf, [K * T, H], dtype=pl.BF16),
                     pld.window(sig_buf, [nr, 1], dtype=pl.INT32), device=r)
        return ys

    return main


# ------------------------------------------------------------------ inputs
def make_routing(rng, nr: int, shape: MoEShape, *, full=(), empty=(), over=()):
    """Top-K expert choices ``idx[nr, T, K]`` (distinct per token).  Global
    experts in ``empty`` get no row; each one in ``full`` gets exactly CAP
    rows in total; each one in ``over`` gets CAP + T // 2 (more than its
    buffer holds); every other choice is uniform over the remaining experts."""
    T, K, E, CAP = shape.tokens, shape.topk, shape.experts, shape.capacity
    ne = nr * E
    forced = {g: CAP for g in full}
    forced.update({g: CAP + T // 2 for g in over})
    if set(forced) & set(empty) or len(forced) + len(set(empty)) > ne - K:
        raise ValueError("full/over/empty experts overlap or leave fewer than K experts free")
    idx = np.full((nr, T, K), -1, np.int64)
    fill = np.zeros((nr, T), np.int64)               # choices already made per token
    for g, load in forced.items():
        if load > nr * T:
            raise ValueError(f"expert {g} cannot receive {load} rows from {nr * T} tokens")
        open_tokens = np.flatnonzero(fill.ravel() < K)
        # tokens with the fewest choices first, so no token runs out of places
        pick = open_tokens[np.argsort(fill.ravel()[open_tokens] + rng.random(open_tokens.size),
                                      kind="stable")[:load]]
        if pick.size < load:
            raise ValueError("too many forced rows for the tokens available")
        for flat in pick:
            r, t = divmod(int(flat), T)
            idx[r, t, fill[r, t]] = g
            fill[r, t] += 1
    free = np.array([g for g in range(ne) if g not in forced and g not in set(empty)])
    for r in range(nr):
        for t in range(T):
            n = K - fill[r, t]
            if n:
                idx[r, t, fill[r, t]:] = rng.choice(free, size=n, replace=False)
            rng.shuffle(idx[r, t])                   # forced experts at any k
    return idx.astype(np.int32)


def make_inputs(rng, nr: int, shape: MoEShape, **routing):
    T, K, H = shape.tokens, shape.topk, shape.hidden
    xs = rng.standard_normal((nr, T, H)).astype(BF16)
    logits = rng.standard_normal((nr, T, K))
    wts = (np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)).astype(np.float32)
    return xs, make_routing(rng, nr, shape, **routing), wts


# ------------------------------------------------------------------ reference
def reference(xs, idxs, wts, shape: MoEShape):
    """(y[nr, T, H] FP32, stats[nr, E + 1]) by the capacity rule of the module
    docstring, computed directly from the routing: stats[r, e] = rows kept by
    expert e of rank r, stats[r, E] = rows of rank r's tokens dropped."""
    nr, T, K = idxs.shape
    E, CAP = shape.experts, shape.capacity
    order = [(s, t, k) for s in range(nr) for t in range(T) for k in range(K)]
    taken = np.zeros(nr * E, np.int64)
    kept = np.zeros((nr, T, K), bool)
    for s, t, k in order:                             # (source, token, k) order
        g = idxs[s, t, k]
        if taken[g] < CAP:
            kept[s, t, k] = True
        taken[g] += 1
    y = np.zeros(xs.shape, np.float32)
    for k in range(K):                                # FP32 accumulation in k order
        term = (xs.astype(np.float32) * wts[:, :, k, None]).astype(BF16).astype(np.float32)
        y += np.where(kept[:, :, k, None], term, np.float32(0))
    stats = np.concatenate([np.minimum(taken, CAP).reshape(nr, E),
                            (~kept).sum(axis=(1, 2))[:, None]], axis=1)
    return y, stats.astype(np.int32)


def run(nr: int, shape: MoEShape = SMALL, seed: int = 0, config=None, **routing):
    rng = np.random.default_rng(seed)
    xs, idxs, wts = make_inputs(rng, nr, shape, **routing)
    ys = np.full(xs.shape, np.nan, np.float32)
    stats = np.full((nr, 1, shape.experts + 1), -1, np.int32)
    cfg = config or RunConfig(distributed_config=DistributedConfig(device_ids=list(range(nr))))
    build(nr, shape)(xs, idxs, wts, ys, stats, config=cfg)
    want, want_stats = reference(xs, idxs, wts, shape)
    np.testing.assert_array_equal(stats[:, 0], want_stats)
    np.testing.assert_allclose(ys, want, rtol=2 ** -6, atol=2 ** -6)
    return ys, stats


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--shape", choices=sorted(SHAPES), default="small")
    args = ap.parse_args()
    shape = SHAPES[args.shape]
    # expert 0 exactly full, the last expert empty, expert 1 over capacity
    ys, stats = run(args.ranks, shape, full=(0,), empty=(args.ranks * shape.experts - 1,),
                    over=(1,) if args.ranks * shape.tokens >= shape.capacity + shape.tokens // 2
                    else ())
    print(f"MoE over {args.ranks} ranks ({args.shape}): rows kept per expert "
          f"{stats[:, 0, :-1].tolist()}, rows dropped per rank {stats[:, 0, -1].tolist()}")
    print("OK")
