"""The CPU of AddMessages' parts, in-process, at one batch size: what a 100-message call
spends where (and what binding the statement's values in binary saves).

Starts its own embedded PostgreSQL, creates one sealed thread and measures, with
``time.thread_time`` (CPU of this thread only: a loaded machine inflates wall times, not
these), the median over many repetitions of:

- parsing the request's bytes; ``_new_messages`` (protobuf → NewMessage, Structs →
  dicts); ``check_new_messages``; ``_append`` (sealing and the parameters) and the
  sealing alone;
- the routed statement through ``fetch_one_autocommitted`` (the pool's checkout included);
  ``write_messages``; the whole servicer ``AddMessages`` (no gRPC);
- what each call costs around the servicer: the server's guarded parse (the Struct
  checks of ``episodic.requests``), the response serialised, the call metric
  (``metrics.rpc_finished`` with the Prometheus reader the services configure), the
  messages-ingested tally, the guard's ``admit`` (anonymous, as on loopback);
- the same statement on a bare psycopg connection in four forms: every value as text
  (psycopg's default), the sealed values and arrays in binary (``%(…)b``, what Ingest
  sends), the same with the row read in binary (``binary=True``, what Ingest does), and
  every parameter in binary.

Not part of pytest:

    .venv/bin/python -m bench.speed.ingest_parts [--batch 100] [--repeats 200] [--keyed]

``--keyed``: every message carries an idempotency key as the Python SDK makes them, a new
one per call for the parts that write (``fresh keys`` is what making them costs here).

Then the same parts **inside real calls**: the servicer's ``AddMessages`` called again and
again, each part's CPU taken by a wrapper while it runs there. The parts above run in a
hot loop, their code and data in the CPU's caches; inside a call each runs after the
thread slept in the statement's wait, while PostgreSQL ran on the same cores — and costs
several times more (at batch 1 on a 2-core machine: 4–6× for building, checking and
sealing one message). What a call costs is closer to the second figure: what a change
saves shows in the first only as a lower bound.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from dataclasses import replace

import psycopg
from google.protobuf import struct_pb2

from bench.speed import ingest_bench as bench
from episodic import access, metrics, requests, telemetry
from episodic.config import IngestSettings
from episodic.services.ingest import domain, writes
from episodic.services.ingest import servicer as servicer_module
from episodic.services.ingest.servicer import IngestServicer, _new_messages
from episodic.serving.guard import Guard
from episodic.store.db import make_engine
from episodic.store.raw_statement import fetch_one_autocommitted
from episodic.testing.database import test_server
from episodic.testing.keys import test_vault
from episodic.v1 import episode_pb2 as e
from episodic.v1 import ingest_service_pb2 as pb


class _NoNotices:
    def record_activity(self, thread_id: str) -> None:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--keyed", action="store_true", help="the SDK's idempotency keys")
    args = parser.parse_args()
    n, repeats = args.batch, args.repeats

    def cpu(work: Callable[[], object], times: int = repeats) -> float:
        """Median CPU µs of one ``work()``."""
        spent = []
        for _ in range(times):
            started = time.thread_time()
            work()
            spent.append(time.thread_time() - started)
        return statistics.median(spent) * 1e6

    print(f"load average before: {bench.loadavg()}")
    settings = IngestSettings()
    rows: list[tuple[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="ingest-parts-") as tmp, test_server(Path(tmp)) as dbs:
        url = dbs.create()
        engine = make_engine(url)
        vault = test_vault(encrypt=True)
        with engine.begin() as conn:
            key = vault.for_write(conn, "bench")
            thread_id = domain.create_thread(
                conn, vault, dataset="bench", thread_id=None, label="", metadata_json="{}"
            )["thread_id"]
        metadata = struct_pb2.Struct()
        metadata.update(bench.METADATA)
        request = pb.AddMessagesRequest(
            thread_id=str(thread_id),
            messages=[
                pb.NewMessage(
                    role=e.ROLE_USER,
                    content=bench.CONTENT,
                    metadata=metadata,
                    idempotency_key=bench.sdk_keys(1)[0] if args.keyed else "",
                )
                for _ in range(n)
            ],
        )
        data = request.SerializeToString()
        rows.append(("parse the request", cpu(lambda: pb.AddMessagesRequest.FromString(data))))
        guarded = requests.guarded_deserializer(pb.AddMessagesRequest.FromString)
        assert guarded is not None
        rows.append(("  the server's guarded parse (+ Struct checks)", cpu(lambda: guarded(data))))
        rows.append(("  of which the Struct checks", cpu(lambda: requests.check_structs(request))))
        build = cpu(lambda: _new_messages(request, str(thread_id)))
        rows.append(("_new_messages", build))

        def build_and_check() -> None:
            domain.check_new_messages(_new_messages(request, str(thread_id)), settings)

        rows.append(("check_new_messages", cpu(build_and_check) - build))
        messages = _new_messages(request, str(thread_id))
        domain.check_new_messages(messages, settings)
        rows.append(
            (
                "append_statement (seal, parameters)",
                cpu(
                    lambda: domain.append_statement(
                        key, "bench", thread_id, messages, check_route=True
                    )
                ),
            )
        )
        rows.append(
            (
                "  of which sealing",
                cpu(
                    lambda: (
                        key.seal_many([m.content for m in messages], "c"),
                        key.seal_many([m.metadata_json or "" for m in messages], "m"),
                    )
                ),
            )
        )
        statement, params = domain.append_statement(
            key, "bench", thread_id, messages, check_route=True
        )

        def fresh_keys() -> None:
            """New SDK keys for the next write (a stored key would make it a replay)."""
            if args.keyed:
                new = bench.sdk_keys(n)
                params["ikey" if n == 1 else "keys"] = new[0] if n == 1 else new
                messages[:] = [
                    replace(m, idempotency_key=k, metadata_json=m.metadata_json)
                    for m, k in zip(messages, new, strict=True)
                ]
                for m, k in zip(request.messages, new, strict=True):
                    m.idempotency_key = k

        rows.append(("fresh keys", cpu(fresh_keys)))

        def statement_alone() -> None:
            fresh_keys()
            assert fetch_one_autocommitted(engine, statement, params) is not None

        rows.append(("fetch_one_autocommitted", cpu(statement_alone, repeats // 2)))
        routes = domain.ThreadRoutes()
        routes.remember(thread_id, "bench", key)

        def write() -> domain.AddResult:
            fresh_keys()
            result = domain.write_messages(
                engine, vault, thread_id, messages, settings, routes=routes
            )
            assert result.stored_count == n  # the routed path, not a replay
            return result

        rows.append(("write_messages", cpu(write, repeats // 2)))
        servicer = IngestServicer(engine, settings, _NoNotices(), vault)  # type: ignore[arg-type]
        servicer.routes = routes
        answers = []

        def serve() -> None:
            fresh_keys()
            answers.append(servicer.AddMessages(request, None))  # type: ignore[arg-type]

        with access.running_as(access.ANONYMOUS):
            rows.append(("servicer AddMessages (no gRPC)", cpu(serve, repeats // 2)))
            in_call = parts_in_calls(serve, repeats)
        answer = answers[-1]
        assert answer.stored_count == n
        rows.append(("  the response serialised", cpu(answer.SerializeToString)))
        telemetry.setup_metrics("ingest-parts", host="127.0.0.1", port=0)
        method = "/episodic.v1.IngestService/AddMessages"
        rows.append(
            (
                "call metric (rpc_finished, Prometheus)",
                cpu(lambda: metrics.rpc_finished(method, "OK", 0.001)),
            )
        )
        rows.append(
            ("messages-ingested tally", cpu(lambda: metrics.messages_ingested(["user"] * n)))
        )
        guard = Guard(None, ["episodic.v1.IngestService"], required=False)
        rows.append(("guard admit (anonymous)", cpu(lambda: guard.admit(method, (), len(data)))))
        as_text = re.sub(r"%\((\w+)\)b", r"%(\1)s", statement)
        all_binary = re.sub(r"%\((\w+)\)s", r"%(\1)b", statement)
        with psycopg.connect(url, autocommit=True) as bare:
            for name, sql, binary in (
                ("statement, every value as text", as_text, False),
                ("statement, sealed values and arrays binary", statement, False),
                ("  + the row read in binary (Ingest's)", statement, True),
                ("statement, every parameter binary", all_binary, True),
            ):

                def send(sql: str = sql, binary: bool = binary) -> Any:
                    return bare.execute(sql, params, prepare=True, binary=binary).fetchone()  # type: ignore[call-overload]

                send()
                rows.append((name, cpu(send, repeats // 2)))
        engine.dispose()
    print(f"load average after: {bench.loadavg()}\n")
    print(f"AddMessages of {n} message(s), in-process CPU per call (median µs, thread_time):")
    for name, spent in rows:
        print(f"  {name:<46} {spent:9.0f}")
    print(
        f"\nThe same parts inside {len(in_call['servicer AddMessages'])} servicer calls "
        "(median µs, thread_time; each after the statement's wait, as in the service):"
    )
    for name, spent in in_call.items():
        print(f"  {name:<46} {statistics.median(spent) * 1e6:9.0f}")


#: What :func:`parts_in_calls` times inside the servicer's calls: (module, function).
IN_CALL = (
    (servicer_module, "_new_messages"),
    (domain, "check_new_messages"),
    (writes, "append_statement"),
    (writes, "fetch_one_autocommitted"),
    (writes, "_receipts"),
    (domain, "write_messages"),
)


def parts_in_calls(serve: Callable[[], object], calls: int) -> dict[str, list[float]]:
    """CPU seconds of each :data:`IN_CALL` part, one per call, over ``calls`` calls of
    ``serve`` (a servicer AddMessages), and of the whole call: each part wrapped where the
    servicer and the domain look it up, for as long as this runs."""
    spent: dict[str, list[float]] = {name: [] for _, name in IN_CALL}
    originals = [(module, name, getattr(module, name)) for module, name in IN_CALL]

    def timed(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            started = time.thread_time()
            try:
                return function(*args, **kwargs)
            finally:
                spent[name].append(time.thread_time() - started)

        return run

    try:
        for module, name, function in originals:
            setattr(module, name, timed(name, function))
        whole = []
        for _ in range(calls):
            started = time.thread_time()
            serve()
            whole.append(time.thread_time() - started)
    finally:
        for module, name, function in originals:
            setattr(module, name, function)
    return {**spent, "servicer AddMessages": whole}


if __name__ == "__main__":
    main()
