"""Benchmarks, run as scripts from the checkout (``python bench/store_bench.py --quick``)."""
