"""How reports name loop iterations (runtime/rank/iterations.py): what a
blocked wait publishes in its record's slots comes back as it was, and the
text reads as the loops are written."""
from types import SimpleNamespace

from tilecomm.lower.codegen import Loop
from tilecomm.runtime.control import WaitRecord
from tilecomm.runtime.rank import iterations as I


def image(*loops):
    return SimpleNamespace(loops=tuple(Loop(v, None, f) for v, f in loops))


def test_published_pairs_come_back_the_innermost_four():
    pairs = ((0, 1), (1, -3), (2, 2**31 - 1), (3, -2**31), (4, 7))
    slots = I.pack(pairs)
    assert len(slots) == I.PUBLISHED
    assert I.unpack(slots) == pairs[1:]                  # the outermost one is dropped
    assert I.unpack(I.pack(((0, 5),))) == ((0, 5),)
    assert I.pack(()) == (0,) * I.PUBLISHED and I.unpack(I.pack(())) == ()
    # an index that does not fit 32 bits is left out, the others kept
    assert I.unpack(I.pack(((0, 2**40), (1, 3)))) == ((1, 3),)
    record = WaitRecord(0, 0, 0, 1, -1, -1, 0, 1, 1, -1, 0, *I.pack(((1, 2),)))
    assert I.unpack(record.loops) == ((1, 2),)


def test_text_names_each_loop_and_whose_it_is_when_functions_differ():
    img = image(("r", "chip"), ("step", "kernel"), ("i", "kernel"))
    assert I.text(img, ()) == ""
    assert I.text(img, ((1, 2),)) == "step=2"
    assert I.text(img, ((1, 2), (2, 0))) == "step=2, i=0"
    assert I.text(img, ((0, 1), (1, 2))) == "r=1 in chip, step=2 in kernel"


def test_current_reads_the_indices_of_the_lowered_frames():
    src = "def f(_rt, n):\n    for k in range(n):\n        if k == n - 1:\n" \
          "            return _rt()\n"
    ns: dict = {}
    exec(compile(src, "<lowered-test>", "exec"), ns)
    img = SimpleNamespace(filename="<lowered-test>", loops=(Loop("k", None, "f"),),
                          line_loops={3: (0,), 4: (0,)})
    assert ns["f"](lambda: I.current(img), 3) == ((0, 2),)
    img.line_loops = {}                                  # no table: nothing read
    assert ns["f"](lambda: I.current(img), 3) == ()
