"""Rules about HOST collectives that need the comm domain they run on.

A HOST ``pld.tensor.*`` call runs as one builtin dispatch per member of its
operands' comm domain (``ProgramFacts.host_collectives``).  A program is
compiled for one world size and its dispatches name their devices, so the
domain's device count is always known here: the checks the reference can
make only for an explicit device list apply to every HOST call."""
from __future__ import annotations

from ..errors import ProgramValueError
from ..ir.types import is_static
from ..ops.check import const_value
from .base import rule

# HOST builtins of the chip profiles handle at most this many ranks (with more
# they return without moving anything); the CPU runtime has no such limit
CHIP_HOST_MAX_RANKS = 16
# operand order of the messages: the signal is the domain every other operand joins
SIGNAL = "signal"


def _devices(devs) -> str:
    return "[" + ", ".join(str(d) for d in sorted(devs)) + "]"


def _complete(ctx, hc) -> bool:
    """Whether the facts about every operand of ``hc`` are whole: a statement
    the front end rejected may have been the dispatch that names its devices."""
    return not any(b.name in ctx.incomplete for b in hc.operands.values())


def _operand_domains(ctx, hc) -> dict:
    return {name: ctx.facts.buffer(b).devices for name, b in hc.operands.items()}


def _one_domain(ctx):
    """The HOST collectives whose operands agree on one comm domain, with its
    device count (those that do not are reported once, by ``collective-one-domain``)."""
    for hc in ctx.facts.host_collectives:
        if not _complete(ctx, hc):
            continue
        domains = set(map(frozenset, _operand_domains(ctx, hc).values()))
        if len(domains) <= 1:
            yield hc, len(hc.domain)


def _type(hc, name):
    a = hc.call.args.get(name)
    return getattr(a, "type", None)


def _span(hc, name):
    a = hc.call.args.get(name)
    return a.span if a is not None else hc.call.span


@rule("collective-one-domain")
def collective_one_domain(ctx):
    """Every window operand of one HOST collective must belong to one comm
    domain: the builtin is dispatched to the members of that domain, and a
    window of another domain has no copy on some of them."""
    for hc in ctx.facts.host_collectives:
        if not _complete(ctx, hc):
            continue
        doms = _operand_domains(ctx, hc)
        ref_name = SIGNAL if SIGNAL in doms else next(iter(doms), None)
        if ref_name is None:
            continue
        ref = doms[ref_name]
        for name, devs in doms.items():
            if devs != ref:
                op = hc.call.record.name
                yield ProgramValueError(
                    f"{op} operands must belong to one comm domain: {ref_name} "
                    f"'{hc.operands[ref_name].name}' is dispatched to devices {_devices(ref)}, "
                    f"but {name} '{hc.operands[name].name}' to devices {_devices(devs)}",
                    code="TC225", span=_span(hc, name),
                    hint="pass every window of the collective to the same dispatches "
                         "(the same device= ranks)")
                break


@rule("collective-signal-capacity")
def collective_signal_capacity(ctx):
    """A HOST collective's signal has one cell row per participating device:
    shape[0] at least the device count (a HOST ring signal is
    [2*(NR-1)+1, NR] with NR the device count; all_to_all_v on a device
    subset needs exactly one row per device of the subset)."""
    for hc, n in _one_domain(ctx):
        s = _type(hc, SIGNAL)
        shape = getattr(s, "shape", None)
        if not shape or not is_static(shape[0]):
            continue
        op = hc.call.record.name
        span = _span(hc, SIGNAL)
        ring = const_value(hc.call.args.get("mode")) == "ring"
        if ring and len(shape) == 2 and is_static(shape[1]) and shape[1] != n:
            yield ProgramValueError(
                f"{op} mode=\"ring\" signal must be [2*(NR-1)+1, NR] with NR the participating "
                f"device count ({n}), i.e. [{2 * (n - 1) + 1}, {n}]; got "
                f"{s.describe()}", code="TC226", span=span,
                hint="size the ring signal for the devices the collective runs on")
        elif shape[0] < n:
            yield ProgramValueError(
                f"collective signal shape[0] ({shape[0]}) must be at least the participating "
                f"device count ({n}); {op} got {s.describe()}", code="TC226", span=span,
                hint="size the signal [pld.world_size()] or [number of devices of its domain]")
        elif op == "pld.tensor.all_to_all_v" and n < ctx.prog.world and shape[0] != n:
            yield ProgramValueError(
                f"{op} on an explicit device subset of {n} device(s) needs signal.shape[0] "
                f"equal to the subset size ({n}); got {shape[0]} ({s.describe()})",
                code="TC226", span=span,
                hint="NR = signal.shape[0] fixes MAX_RECV = target.shape[0] // NR; size it "
                     "for the subset")


@rule("collective-broadcast-root")
def collective_broadcast_root(ctx):
    """The root of a HOST broadcast on an explicit device subset is a rank of
    that subset (rank indices are positions in the domain's device list).  On
    the all-device domain a root beyond the world is left to the run (TC501):
    a program written for several world sizes may guard such a call with
    ``if pld.world_size() > root``."""
    for hc, n in _one_domain(ctx):
        if hc.call.record.name != "pld.tensor.broadcast" or n >= ctx.prog.world:
            continue
        root = const_value(hc.call.args.get("root"))
        if isinstance(root, int) and root >= n:
            yield ProgramValueError(
                f"pld.tensor.broadcast root ({root}) must be a valid rank in [0, {n}) for this "
                f"explicit device subset",
                code="TC224", span=_span(hc, "root"),
                hint="root is a rank index within the domain (0 .. devices-1), not a device id")


@rule("collective-rows-per-device")
def collective_rows_per_device(ctx):
    """allgather / all_to_all / reduce_scatter on the HOST exchange one row
    of ``[NR, SIZE]`` per participating device, so NR is the device count;
    all_to_all_v's target is ``[NR*MAX_RECV, SIZE]``."""
    for hc, n in _one_domain(ctx):
        op = hc.call.record.name
        names = {"pld.tensor.allgather": ("target",), "pld.tensor.reduce_scatter": ("target",),
                 "pld.tensor.all_to_all": ("input", "target")}.get(op, ())
        for name in names:
            t = _type(hc, name)
            shape = getattr(t, "shape", None)
            if shape and is_static(shape[0]) and shape[0] != n:
                yield ProgramValueError(
                    f"{op} {name} must be [NR, SIZE] with NR the participating device count "
                    f"({n}); got {t.describe()}", code="TC208", span=_span(hc, name),
                    hint="one row per device of the domain")
                break
        s = getattr(_type(hc, SIGNAL), "shape", None)
        # on a subset the signal is sized for it (collective-signal-capacity), and the
        # op's own rule makes signal.shape[0] divide target.shape[0]
        if op == "pld.tensor.all_to_all_v" and n == ctx.prog.world and s and \
                is_static(s[0]) and s[0] >= n:
            t = _type(hc, "target")
            shape = getattr(t, "shape", None)
            if shape and is_static(shape[0]) and shape[0] % n:
                yield ProgramValueError(
                    f"{op} target.shape[0] ({shape[0]}) must be a multiple of the participating "
                    f"device count ({n}): target is [NR*MAX_RECV, SIZE]; got {t.describe()}",
                    code="TC208", span=_span(hc, "target"))


@rule("collective-chip-rank-limit")
def collective_chip_rank_limit(ctx):
    """On a chip profile the HOST builtins handle at most 16 ranks; above that
    they return without doing anything, so the program is rejected instead."""
    platform = ctx.prog.platform
    if platform is None or platform.name == "cpu":
        return
    for hc, n in _one_domain(ctx):
        if n > CHIP_HOST_MAX_RANKS:
            yield ProgramValueError(
                f"HOST {hc.call.record.name} supports at most {CHIP_HOST_MAX_RANKS} ranks on the "
                f"{platform.name} platform; its comm domain has {n} devices",
                code="TC215", span=hc.call.span,
                hint="platform=\"cpu\" lifts this limit; on a chip, call the collective inside "
                     "a kernel (the InCore composite) or split the domain")
