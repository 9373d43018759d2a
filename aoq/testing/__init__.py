"""Reusable by anyone (tests, conformance, bench, reports): the configs to iterate (cases),
the float64 oracle and metrics, the matrix of cases (matrix), tolerance profiles (profiles),
the result schema (records) and the SQLite results store (store)."""
