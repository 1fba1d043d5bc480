"""Primitive declarations (one registry record each)."""
from . import load_all  # noqa: F401
