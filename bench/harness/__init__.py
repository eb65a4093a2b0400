"""What the benchmarks share: LoCoMo loading, starting and driving the services, the
bare gRPC hop, synthetic stores, Recall's statement sent as Recall sends it, percentiles and
tables. A harness module imports no benchmark script (tests/test_bench_layout.py).
"""

from __future__ import annotations

from pathlib import Path

#: The repository's root (the benchmarks' checkout).
REPO = Path(__file__).resolve().parents[2]
#: The benchmarks' own data files (bench/data/README.md).
DATA = REPO / "bench" / "data"
