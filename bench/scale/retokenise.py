"""How long changing a dataset's language takes: ``set_language`` re-stems every current
episode's document, its thread's chunks and the dataset's events in one transaction
(SetDatasetPolicy waits for it, and so does every writer of the dataset).

    .venv/bin/python -m bench.scale.retokenise [--episodes 500] [--messages 20] [--url ADMIN_URL]

Builds a sealed dataset of ``--episodes`` episodes of ``--messages`` 25-word messages
(tests/recall/factory.py, as the Summariser leaves them), then times its switch from
English to French, per episode.
"""

from __future__ import annotations

import argparse
import os
import random
import time

from episodic.store.db import make_engine
from episodic.store.languages import set_language
from episodic.testing.database import scratch_database
from episodic.testing.keys import test_vault
from tests.recall.factory import make_episode

WORDS = [
    "pricing",
    "atlas",
    "budget",
    "meeting",
    "garden",
    "hiking",
    "dog",
    "car",
    "flight",
    "hotel",
    "museum",
    "piano",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--episodes", type=int, default=500)
    parser.add_argument("--messages", type=int, default=20)
    parser.add_argument("--url", help="an admin URL (default: an embedded server)")
    args = parser.parse_args()
    rnd = random.Random(2026)
    with scratch_database(args.url) as url:
        engine = make_engine(url)
        with engine.begin() as conn:
            for _ in range(args.episodes):
                messages = [
                    " ".join(rnd.choice(WORDS) for _ in range(25)) for _ in range(args.messages)
                ]
                make_episode(conn, "bench", messages)
        started = time.perf_counter()
        with engine.begin() as conn:
            set_language(conn, test_vault(), "bench", "french", origin="set")
        took = time.perf_counter() - started
        engine.dispose()
    print(
        f"set_language over {args.episodes} episodes of {args.messages} messages: "
        f"{took:.2f} s, {took / args.episodes * 1000:.2f} ms an episode "
        f"(load average {os.getloadavg()[0]:.1f})"
    )


if __name__ == "__main__":
    main()
