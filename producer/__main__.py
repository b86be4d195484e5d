"""``python -m producer``: the same entry point as the ``skill-eval`` command (producer/prestart.py)."""

from producer.prestart import main

main()
