"""harness-console engine: everything that works without a screen.

Nothing under ``engine`` may import Textual or ``console``; the CLIs and the
evaluator run headless and must start fast.
"""
