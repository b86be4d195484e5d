"""The ``skill-eval`` command line: the Typer app and its one error path (``app``), the options
shared by the commands (``options``), and one module per group of commands. Thin: parses flags,
calls the other rooms, prints, exits. Nothing else in the producer imports this room."""
