"""The wait comparison, stated once.

A signal cell is an int32 and a condition is ``cell <cmp> expected``, ``cmp``
one of the native core's codes: ``CMP_EQ`` (``==``) and ``CMP_GE`` (``>=``,
signed) are ``pld.WaitCmp.Eq`` / ``Ge``; ``CMP_GE_U`` (``>=``, unsigned) is
the completion condition of a deferred wait, whose counter may pass 2**31.
The native core decides it in C for the waits it runs (``satisfied`` in
``native_core.c``); everything in Python that asks the same question -- a
polling transport, the scheduler's already-true check, the deadlock and task
reports, the trace's notify -> wait matching -- asks ``holds``.
"""
from . import _native_core as native

CMP_EQ, CMP_GE, CMP_GE_U = native.CMP_EQ, native.CMP_GE, native.CMP_GE_U
CMP_NAMES = {CMP_EQ: "Eq", CMP_GE: "Ge", CMP_GE_U: "GeU"}
CMP_CODES = {name: code for code, name in CMP_NAMES.items()}


def i32(v: int) -> int:
    """``v`` as the int32 a cell holds (values wrap as the cell's do)."""
    return ((int(v) + 2**31) % 2**32) - 2**31


def holds(cmp: int, value: int, expected: int) -> bool:
    """Whether a cell holding ``value`` satisfies ``cmp expected``."""
    if cmp == CMP_EQ:
        return i32(value) == i32(expected)
    if cmp == CMP_GE:
        return i32(value) >= i32(expected)
    if cmp == CMP_GE_U:
        return (int(value) & 0xFFFFFFFF) >= (int(expected) & 0xFFFFFFFF)
    raise ValueError(f"unknown wait comparison {cmp!r}")


__all__ = ["CMP_CODES", "CMP_EQ", "CMP_GE", "CMP_GE_U", "CMP_NAMES", "holds", "i32"]
