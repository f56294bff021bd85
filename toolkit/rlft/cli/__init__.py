"""The ``rlft`` command line (Typer). Command modules import heavy libraries inside the commands."""
