"""Real agents in: OTLP logs and Claude Code hooks become journal rows, holds and stops answer.

Layering: this package sits above :mod:`engine.rules` and :mod:`engine.journal`
and below :mod:`engine.cli`. The modules on the per-tool-call path
(:mod:`.canon`, :mod:`.hooks`, :mod:`.derive`, :mod:`.gate`, :mod:`.handler`)
import neither aiohttp nor CEL, so ``harness hook claude-code`` starts fast.
"""
