"""Fleet Rules: CEL rules over the journal, evaluated live and in backtests alike.

Three sub-packages, each importing only the ones below it (the layers
contract in pyproject.toml):

- :mod:`engine.rules.authority`: what a fire may do to a harness: the
  lifecycle (disable, cooldown, shadow, the enforce cap), holds, run stops,
  actions, and the lease that lets one process act;
- :mod:`engine.rules.evaluation`: running rules over journal rows: the one
  evaluator, its primitive hosts (window index, SQL), backtest and replay,
  fires and the hooks the lifecycle plugs into;
- :mod:`engine.rules.language`: what a rule is: the rule model, the CEL
  environment, AST and load-time checks, what a rule can match (prefilter,
  aggregate gates), the loader and which rule files a process loads.

Above them, :mod:`engine.rules.metrics` and :mod:`engine.rules.doctor` report
on all three.
"""
