"""Agent harness formats: parsing the event streams of external agent CLIs into trajectories.

Pure logic shared by the worker (which runs a harness) and the client (which imports its
recordings for ``skill-eval grade``). No I/O.
"""
