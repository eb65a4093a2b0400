"""Benchmarks run by hand (bench/README.md): grouped by what they measure around one harness.

Nothing here is installed or run by pytest; ``python -m bench.<group>.<script>`` from the
repository's root runs one.
"""
