"""A run's results on the client: the reports written to the output folder, the commands on a
stored run (``status``, ``report``), the status tables and the Inspect AI export."""
