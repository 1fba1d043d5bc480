"""The verifier: named, independent rules over a program's IR and its facts.

Every rule runs, and all their diagnostics are reported together with the
front end's, before any rank starts.  Per-call checks (operand kinds, shapes,
bounds, atomic dtypes, chunk arguments) live with their op records and run as
the front end types each call; the rules here need the whole program."""
from .base import RULES, Rule, VerifyContext, rule, verify
from .lint import LINT_MODES, LINT_RULES, lint
from . import collectives, placement, platform, windows  # noqa: F401  (rules register on import)
from . import protocol_rules, signal_rules  # noqa: F401  (lint rules register on import)

__all__ = ["LINT_MODES", "LINT_RULES", "RULES", "Rule", "VerifyContext", "lint", "rule", "verify"]
