"""Compatibility entry point (bench/README.md): ``python -m bench.heavy_path`` runs
``bench.scale.heavy_path``, which moved there; imported, this module is that one."""

import runpy
import sys

if __name__ == "__main__":
    runpy.run_module("bench.scale.heavy_path", run_name="__main__", alter_sys=True)
else:
    from bench.scale import heavy_path

    sys.modules[__name__] = heavy_path
