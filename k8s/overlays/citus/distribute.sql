-- Distributes episodic's schema over a Citus cluster. Run once, on the coordinator, as a
-- superuser, after `episodic migrate` has reached revision 0010 (migrate with
-- EPISODIC_DATABASE_PARTITIONS=1: Citus shards by dataset itself) and before the services
-- start:   psql "$COORDINATOR_URL" -v ON_ERROR_STOP=1 -f distribute.sql
-- CI runs it this way on every test database of the Citus tier (`make test-citus`); the
-- schema test (tests/test_distribution_schema.py) checks the rules these calls rely on.

CREATE EXTENSION IF NOT EXISTS citus;  -- citus first in shared_preload_libraries

-- Global tables: api_keys is small and read on every call: copied to every node. leases
-- (the deployment-wide sweeps' leader) stays a plain table on the coordinator: a write to a
-- reference table needs every worker, and the Scheduler takes a lease on every pass, also
-- while a worker is down. The audit log outlives the datasets it mentions: it stays on the
-- coordinator too.
SELECT create_reference_table('api_keys');
SELECT citus_add_local_table_to_metadata('audit_events');

-- Dataset tables: sharded by dataset, one colocation group, so every statement that filters
-- one dataset (and every foreign key, which carries dataset) stays on one node. Referenced
-- tables before the tables that reference them.
SELECT create_distributed_table('datasets', 'dataset', shard_count := 64);
SELECT create_distributed_table('threads', 'dataset', colocate_with := 'datasets');
SELECT create_distributed_table('messages', 'dataset', colocate_with := 'datasets');
SELECT create_distributed_table('scheduled_episodes', 'dataset', colocate_with := 'datasets');
SELECT create_distributed_table('episodes', 'dataset', colocate_with := 'datasets');
SELECT create_distributed_table('facts', 'dataset', colocate_with := 'datasets');
SELECT create_distributed_table('message_chunks', 'dataset', colocate_with := 'datasets');
SELECT create_distributed_table('events', 'dataset', colocate_with := 'datasets');
SELECT create_distributed_table('entities', 'dataset', colocate_with := 'datasets');
SELECT create_distributed_table('entity_keys', 'dataset', colocate_with := 'datasets');
SELECT create_distributed_table('entity_aliases', 'dataset', colocate_with := 'datasets');
SELECT create_distributed_table('message_tool_calls', 'dataset', colocate_with := 'datasets');
SELECT create_distributed_table('outcomes', 'dataset', colocate_with := 'datasets');
SELECT create_distributed_table('procedure_candidates', 'dataset', colocate_with := 'datasets');
SELECT create_distributed_table('procedures', 'dataset', colocate_with := 'datasets');
SELECT create_distributed_table('kept_statistics', 'dataset', colocate_with := 'datasets');
SELECT create_distributed_table('kept_term_statistics', 'dataset', colocate_with := 'datasets');
SELECT create_distributed_table('episode_counts', 'dataset', colocate_with := 'datasets');
-- A database that already held rows (a single-node store moved to Citus): each call above
-- copied its table's rows to the shards and left the coordinator's local copy, unread but
-- on disk. Empty those copies (nothing on an empty table). audit_events stays local.
SELECT truncate_local_data_after_distributing_table(logicalrelid)
FROM pg_dist_partition WHERE logicalrelid <> 'audit_events'::regclass;
-- A table added later gets one line of the same form, in foreign-key order. This query
-- must return no row before the services start:
SELECT c.relname AS not_distributed
FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'dataset'
WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p')
  AND NOT c.relispartition AND c.relname <> 'audit_events'
  AND NOT EXISTS (SELECT 1 FROM pg_dist_partition p WHERE p.logicalrelid = c.oid);
