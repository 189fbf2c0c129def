"""Rule evaluation: rows through the one evaluator, live and in backtests, into fires."""
