"""Reusable by anyone: metrics now; the matrix, profiles and results store as they land."""
