"""How the data's size weighs: bytes per row, Recall over a million episodes and on one heavy dataset, and the operations that rewrite a filled store (migrations, partitioning, re-stemming, re-embedding).

bench/README.md lists them.
"""
