"""`make bench`: the benchmark of gitopsd against kubectl and its targets (issue 16).

Run with `python -m tests.bench`; it holds no test_*.py, so pytest never collects it.
"""
