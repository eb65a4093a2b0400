"""The routing index of events: a request that names an event by id alone.

ListEpisodes and Recall return events beside summaries, each under its id, and since
this revision GetEpisode and DeleteEpisode take such an id as they take a summary's
(``store.owners.require_record``). Like ``episodes_episode_id_routing_idx`` (0010), it
finds the event's dataset with one index probe per partition; every later statement of
the call names the dataset.

Revision ID: 0016_event_routing
Revises: 0015_language_origin
Create Date: 2026-12-02
"""

from alembic import op

revision = "0016_event_routing"
down_revision = "0015_language_origin"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("CREATE INDEX IF NOT EXISTS events_event_id_routing_idx ON events (event_id)")


def downgrade() -> None:
    op.execute("DROP INDEX IF EXISTS events_event_id_routing_idx")
