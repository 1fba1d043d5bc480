"""Testing tile programs: the pytest plugin (``plugin.py``, loaded by the
``pytest11`` entry point), its cases (``cases.py``) and the leak check
(``leaks.py``)."""
