"""Command-line entry points (``harness`` and its subcommands)."""
