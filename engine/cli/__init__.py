"""Both command-line programs, ``harness`` and ``skillspec``: every command module, one registry.

``harness.py`` and ``skillspec.py`` are the programs; ``cmd_*.py`` the command
modules; ``registry.py`` builds either program (``--version``, dispatch) and
``common.py`` holds the one set of exit codes, JSON printing and ``run_main``.
"""
