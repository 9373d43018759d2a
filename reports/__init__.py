"""Renders stored results (the SQLite store and reports/runs/*.jsonl) as a static report.

It reads records only; it never imports or runs kernels."""
