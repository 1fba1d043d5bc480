"""Enums shared by the language surface, the IR and the runtime (int payloads
match upstream's ABI)."""
import enum


class NotifyOp(enum.IntEnum):
    AtomicAdd = 0
    Set = 1


class WaitCmp(enum.IntEnum):
    Eq = 0
    Ge = 1


class AtomicType(enum.IntEnum):
    None_ = 0
    Add = 1


class ReduceOp(enum.IntEnum):
    Sum = 0
    Max = 1
    Min = 2
    Prod = 3


class FunctionType(enum.IntEnum):
    Opaque = 0
    Orchestration = 1
    InCore = 2
    AIC = 3
    AIV = 4
    Group = 5
    Spmd = 6
    Inline = 7
    Graph = 8


class Level(enum.IntEnum):
    AIV = 0
    AIC = 1
    CORE_GROUP = 2
    CHIP_DIE = 3
    CHIP = 4
    HOST = 5
    CLUSTER_0 = 6
    CLUSTER_1 = 7
    CLUSTER_2 = 8
    GLOBAL = 9
    L2CACHE = 3
    PROCESSOR = 4
    UMA = 4
    NODE = 5
    POD = 6
    CLOS1 = 7
    CLOS2 = 8


class ParamDirection(enum.IntEnum):
    """A parameter's direction as upstream's IR reports it (``Function.param_directions``)."""
    In = 0
    Out = 1
    InOut = 2


class Role(enum.IntEnum):
    Orchestrator = 0
    SubWorker = 1


class MemorySpace(enum.IntEnum):
    DDR = 0
    Vec = 1
    Mat = 2
    Left = 3
    Right = 4
    Acc = 5


class ScopeMode(enum.IntEnum):
    AUTO = 0
    MANUAL = 1


class TileLayout(enum.IntEnum):
    """Physical layout of a tile's blocks / scatter (``pl.move(blayout=, slayout=)``)."""
    none_box = 0
    row_major = 1
    col_major = 2


class PadValue(enum.IntEnum):
    """What fills a tile outside its valid region (``pl.slice(pad_value=)``):
    ``null`` leaves the elements as they are."""
    null = 0
    zero = 1
    max = 2
    min = 3


class SplitMode(enum.IntEnum):
    """How a ``pl.split_aiv`` region shares work between the two AIV lanes."""
    NONE = 0
    UP_DOWN = 1
    LEFT_RIGHT = 2
