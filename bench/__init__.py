"""Benchmarks, run from the checkout: ``python -m bench`` compares shmq with the alternatives
(``bench.run``); the others are scripts (``python bench/store_bench.py --quick``)."""
