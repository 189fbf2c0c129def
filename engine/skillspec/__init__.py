"""SkillSpec v0 contract checker: load, validate, imports, deps, decide, test, trace."""
