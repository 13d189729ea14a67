"""`make bench`: the benchmark of gitopsd against kubectl and the project's targets.

Run with `python -m tests.bench`; it holds no test_*.py, so pytest never collects it.
"""
