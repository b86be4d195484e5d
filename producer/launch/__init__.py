"""Launching a run: the embedded cluster and its worker started early (``prestart``, ``warm``),
the broker a run's tasks go to (``cluster``), submitting and delivering the shards, waiting with a
progress display, and concluding with the report (``drive``); the ``run``, ``grade`` and
``resubmit`` flows. The only room of the producer that imports the worker room, and only to enqueue."""
