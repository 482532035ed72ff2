"""Shared memory and semaphores: segment lifecycle, rings, tables and idle strategies."""
