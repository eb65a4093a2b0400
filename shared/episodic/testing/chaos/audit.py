"""The write audit of the stale-write checks: triggers in a ``chaos`` schema of the run's
database (:func:`install_write_audit`) that record who wrote each claim and committed each
fact, and the process id in a summariser's worker id (:func:`claimant_pid`)."""

from __future__ import annotations

import psycopg

#: Installed in the run's own database before the services start, in a schema of its own
#: (the suite's schema checks look at ``public`` only). The claim audit records every
#: change of an episode's status or claimant with the writing session (pid and start,
#: which the harness ties to a process) and its application_name; the fact audit runs at
#: commit (a deferred constraint trigger) and records whether the committing transaction
#: is the one that finished the episode's extraction (it wrote the episode's row last).
#: Neither takes a lock on the suite's rows.
_AUDIT_DDL = r"""
CREATE SCHEMA chaos;
CREATE TABLE chaos.claim_writes (
    seq           bigserial PRIMARY KEY,
    at            timestamptz NOT NULL DEFAULT clock_timestamp(),
    dataset       text,
    episode_id    uuid,
    kind          text,
    old_status    text,
    new_status    text,
    old_claimant  text,
    new_claimant  text,
    backend_pid   int,
    backend_start timestamptz,
    app           text
);
CREATE TABLE chaos.fact_commits (
    seq               bigserial PRIMARY KEY,
    at                timestamptz NOT NULL DEFAULT clock_timestamp(),
    dataset           text,
    episode_id        uuid,
    source_sequence   bigint,
    semantic_status   text,
    semantic_claimant text,
    finished_here     boolean,
    backend_pid       int,
    backend_start     timestamptz,
    app               text
);
CREATE FUNCTION chaos.audit_claims() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    started timestamptz := (SELECT a.backend_start FROM pg_stat_get_activity(pg_backend_pid()) a);
BEGIN
    IF OLD.status IS DISTINCT FROM NEW.status OR OLD.claimed_by IS DISTINCT FROM NEW.claimed_by
    THEN
        INSERT INTO chaos.claim_writes (dataset, episode_id, kind, old_status, new_status,
            old_claimant, new_claimant, backend_pid, backend_start, app)
        VALUES (NEW.dataset, NEW.episode_id, 'summary', OLD.status::text, NEW.status::text,
            OLD.claimed_by, NEW.claimed_by, pg_backend_pid(), started,
            current_setting('application_name'));
    END IF;
    IF OLD.semantic_status IS DISTINCT FROM NEW.semantic_status
        OR OLD.semantic_claimed_by IS DISTINCT FROM NEW.semantic_claimed_by
    THEN
        INSERT INTO chaos.claim_writes (dataset, episode_id, kind, old_status, new_status,
            old_claimant, new_claimant, backend_pid, backend_start, app)
        VALUES (NEW.dataset, NEW.episode_id, 'semantic', OLD.semantic_status::text,
            NEW.semantic_status::text, OLD.semantic_claimed_by, NEW.semantic_claimed_by,
            pg_backend_pid(), started, current_setting('application_name'));
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER chaos_audit_claims AFTER UPDATE ON public.episodes FOR EACH ROW
    WHEN (OLD.status IS DISTINCT FROM NEW.status
        OR OLD.claimed_by IS DISTINCT FROM NEW.claimed_by
        OR OLD.semantic_status IS DISTINCT FROM NEW.semantic_status
        OR OLD.semantic_claimed_by IS DISTINCT FROM NEW.semantic_claimed_by)
    EXECUTE FUNCTION chaos.audit_claims();
CREATE FUNCTION chaos.audit_facts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO chaos.fact_commits (dataset, episode_id, source_sequence, semantic_status,
        semantic_claimant, finished_here, backend_pid, backend_start, app)
    SELECT NEW.dataset, NEW.episode_id, NEW.source_sequence, e.semantic_status::text,
        e.semantic_claimed_by, e.xmin = pg_current_xact_id()::xid, pg_backend_pid(),
        (SELECT a.backend_start FROM pg_stat_get_activity(pg_backend_pid()) a),
        current_setting('application_name')
    FROM (SELECT 1) one
    LEFT JOIN public.episodes e ON e.dataset = NEW.dataset AND e.episode_id = NEW.episode_id;
    RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER chaos_audit_facts AFTER INSERT ON public.facts
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION chaos.audit_facts();
"""


def install_write_audit(db_url: str) -> None:
    """Adds the audit triggers of the stale-write checks to the database at ``db_url``."""
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute(_AUDIT_DDL)


def claimant_pid(claimant: str | None) -> int | None:
    """The process id in a worker id (``host:pid:random``)."""
    try:
        return int(str(claimant).split(":")[1])
    except (IndexError, ValueError):
        return None
