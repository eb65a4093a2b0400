"""Synthetic stores built inside PostgreSQL: threads, messages, episodes and chunks with random
unit vectors and Zipf-word documents, for the speed and capacity benchmarks.
"""

from __future__ import annotations

import time

import psycopg

from bench.harness.report import log


def build(conn: psycopg.Connection, episodes: int, datasets: int, dim: int) -> None:
    """Synthetic threads, messages, episodes and chunks, generated inside PostgreSQL."""
    per_message = 15
    log(f"building {episodes} episodes over {datasets} datasets …")
    started = time.monotonic()
    # Datasets in the clear (no data key): the text is stored as 0x00 || UTF-8.
    conn.execute(
        "INSERT INTO datasets (dataset) SELECT 'ds-' || lpad(g::text, 4, '0') "
        "FROM generate_series(0, %(datasets)s - 1) g",
        {"datasets": datasets},
    )
    conn.execute(
        """
        INSERT INTO threads (thread_id, dataset, label, last_sequence, captured_sequence,
                             last_message_at, last_activity_at)
        SELECT md5('t' || i)::uuid, 'ds-' || lpad(mod(i, %(datasets)s)::text, 4, '0'),
               '\\x00'::bytea || convert_to('thread-' || i, 'UTF8'), 8, 8, now(), now()
        FROM generate_series(1, %(n)s) i
        """,
        {"n": episodes, "datasets": datasets},
    )
    log(f"  threads {time.monotonic() - started:.0f}s")
    # Zipf-ish words: a few are common, most are rare (like real text).
    conn.execute(
        f"""
        INSERT INTO messages (dataset, thread_id, sequence, role, content, created_at)
        SELECT 'ds-' || lpad(mod(i, %(datasets)s)::text, 4, '0'), md5('t' || i)::uuid, s, CASE WHEN mod(s, 2) = 1 THEN 'user' ELSE 'assistant' END,
               '\\x00'::bytea || convert_to(
                   (SELECT string_agg('w' || (1 + floor(5000 * power(random(), 3)))::int, ' ')
                    FROM generate_series(1, {per_message}) k WHERE i > 0 AND s > 0), 'UTF8'),
               now() - interval '1 day' * mod(i, 365)
        FROM generate_series(1, %(n)s) i, generate_series(1, 8) s
        """,
        {"n": episodes, "datasets": datasets},
    )
    log(f"  messages {time.monotonic() - started:.0f}s")
    # The lexical document is computed in the same INSERT: a later UPDATE would rewrite
    # every row and its HNSW index entry.
    conn.execute(
        f"""
        INSERT INTO episodes (episode_id, thread_id, dataset, status, semantic_status, trigger,
                              start_sequence, end_sequence, message_count, started_at, ended_at,
                              summary, embedding, completed_at, search_vector, search_length)
        SELECT md5('e' || i)::uuid, md5('t' || i)::uuid,
               'ds-' || lpad(mod(i, %(datasets)s)::text, 4, '0'), 'completed', 'skipped',
               'explicit', 1, 8, 8, ended - interval '10 minutes', ended, d.first,
               (SELECT array_agg(random() - 0.5) FROM generate_series(1, {dim}) d
                WHERE i > 0)::vector,
               now(), d.v,
               (SELECT sum(coalesce(array_length(x.positions, 1), 1)) FROM unnest(d.v) x)
        FROM generate_series(1, %(n)s) i
        CROSS JOIN LATERAL (
            SELECT now() - interval '1 second' * floor(random() * 365 * 86400) AS ended
            WHERE i > 0
        ) t
        CROSS JOIN LATERAL (
            SELECT to_tsvector('english', string_agg(convert_from(substring(m.content FROM 2), 'UTF8'), E'\\n'
                                             ORDER BY m.sequence)) v,
                   min(m.content) FILTER (WHERE m.sequence = 1) AS first
            FROM messages m
            WHERE m.dataset = 'ds-' || lpad(mod(i, %(datasets)s)::text, 4, '0')
              AND m.thread_id = md5('t' || i)::uuid
        ) d
        """,
        {"n": episodes, "datasets": datasets},
    )
    log(f"  episodes and their lexical documents {time.monotonic() - started:.0f}s")
    conn.execute(
        f"""
        INSERT INTO message_chunks (thread_id, start_sequence, start_offset, end_sequence,
                                    dataset, embedding, search_vector, search_length)
        SELECT e.thread_id, c.s, 0, c.s + 3, e.dataset,
               (SELECT array_agg(random() - 0.5) FROM generate_series(1, {dim}) d
                WHERE c.s > 0 AND e.thread_id IS NOT NULL)::vector,
               tv.v, (SELECT sum(coalesce(array_length(x.positions, 1), 1)) FROM unnest(tv.v) x)
        FROM episodes e
        CROSS JOIN (VALUES (1), (3), (5)) c(s)
        CROSS JOIN LATERAL (
            SELECT to_tsvector('english', string_agg(convert_from(substring(m.content FROM 2), 'UTF8'), E'\\n'
                                             ORDER BY m.sequence)) v
            FROM messages m
            WHERE m.dataset = e.dataset AND m.thread_id = e.thread_id
              AND m.sequence BETWEEN c.s AND c.s + 3
        ) tv
        """
    )
    log(f"  chunks {time.monotonic() - started:.0f}s")
    conn.execute("ANALYZE")
    log(f"built in {time.monotonic() - started:.0f}s")
