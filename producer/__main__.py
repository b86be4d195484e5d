"""``python -m producer``: the same entry point as the ``skill-eval`` command (producer/entry.py).

Prefer the ``skill-eval`` command inside a repo under evaluation: ``python -m`` puts the working
folder first on ``sys.path``, so a ``producer/`` package in that repo would run instead of this
one (``python -P -m producer`` does not). Everything this entry point starts runs with ``-P``.
"""

from producer.entry import main

main()
