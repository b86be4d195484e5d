"""Planning a run before anything is sent: what was asked (``request``), the shards (``planning``),
the checks that refuse a run with no model call (``prechecks``, ``compare``, ``case_terms``) and the
``--dry-run`` plan. Imports the corpus and results rooms, never the launch or command rooms."""
