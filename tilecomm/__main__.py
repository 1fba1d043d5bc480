"""``python -m tilecomm``: the ``tilecomm`` command."""
from .cli import main

main(prog_name="tilecomm")
