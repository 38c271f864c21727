"""``python -m braid.cli``: the ``braid`` command."""

from . import main

main()
