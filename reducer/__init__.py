"""Pure scoring: pass rates, infra tallies, gates, composite scores, old-vs-new diff; report rendering."""
