"""Comparing shadow with the steward: semantic judging and the `ember compare` report.

What is compared, and every figure, is SQL (functions/060-069); this package calls a model for
the semantic judge and renders the report.
"""
