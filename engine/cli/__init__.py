"""Both command-line programs, ``harness`` and ``skillspec``: one command table, one parser.

``harness.py`` and ``skillspec.py`` are the programs (and their fast paths);
``registry.py`` is the command table both are built from (each command: its
module, handler, help and arguments); ``cmd_*.py`` hold the commands;
``parser.py`` reads a command line (``--version``, usage errors, dispatch);
``options.py`` the argument types several commands share; ``common.py`` the
one set of exit codes, JSON printing and ``run_main``.
"""
