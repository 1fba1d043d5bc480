"""Names a package loads on first use (PEP 562), so that importing the
package stays cheap: ``tilecomm.ir``, ``tilecomm.runtime`` and
``tilecomm.testing`` each map a public name to the submodule that defines
it."""
from __future__ import annotations

import importlib


def lazy_names(package: str, homes: dict, namespace: dict) -> tuple:
    """(``__getattr__``, ``__dir__``) for ``package``: a name of ``homes``
    (name -> relative module) is imported when first asked for and kept in
    ``namespace`` (the package's globals), so later lookups never come back."""
    def __getattr__(name: str):
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home, package), name)
        namespace[name] = value
        return value

    def __dir__():
        return sorted(set(namespace) | set(homes))

    return __getattr__, __dir__
