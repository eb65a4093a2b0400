"""How fast: time per call and throughput of a path, each beside its baseline measured in the same run (the bare SQL, an echo server, an older checkout, the feature off), and where a call's time goes.

bench/README.md lists them.
"""
