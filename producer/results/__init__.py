"""A run's results on the client: the reports written to the output folder, the commands on a
stored run (``status``, ``report``), the status tables and the Inspect AI export. May import the
corpus room; today it needs nothing else of the producer."""
