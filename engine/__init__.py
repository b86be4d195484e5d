"""Shared ground: what the producer (client) and the workers both use.

The artifact store, the run and shard state in Redis and its keys, settings, repo
snapshots, host-side git, the private redis-server, reading stored results back,
importing recorded trajectories, and how a process makes its big imports (``heap``).
Nothing here imports ``worker`` or ``producer``.
"""
