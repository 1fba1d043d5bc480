"""Passes that compute facts about a program's IR (never mutating it)."""
from .facts import BufferFacts, ProgramFacts, compute_facts

__all__ = ["BufferFacts", "ProgramFacts", "compute_facts"]
