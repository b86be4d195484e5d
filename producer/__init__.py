"""The client side, in rooms: corpus loading and validation (``corpus``), planning (``plan``), launching a
run (``launch``), its results (``results``) and the command line (``commands``); ``entry`` is the console
entry point. docs/design/layout.md says what each room may import."""
