"""The policy repo: a git checkout whose ``rules/`` directory holds policy rules."""
