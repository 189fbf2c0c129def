"""Fleet Rules: CEL rules over the journal, evaluated live and in backtests alike."""
