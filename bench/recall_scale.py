"""Compatibility entry point (bench/README.md): ``python -m bench.recall_scale`` runs
``bench.scale.recall_scale``, which moved there; imported, this module is that one."""

import runpy
import sys

if __name__ == "__main__":
    runpy.run_module("bench.scale.recall_scale", run_name="__main__", alter_sys=True)
else:
    from bench.scale import recall_scale

    sys.modules[__name__] = recall_scale
