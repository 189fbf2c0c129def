"""The rule language: rule files to compiled rules (model, CEL, checks, loader, sources)."""
