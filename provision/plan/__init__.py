"""Planner: a pure function of (spec, facts, catalog) to an ordered Plan."""
