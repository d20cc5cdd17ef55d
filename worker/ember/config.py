"""Where Ember finds its database: `DATABASE_URL`, else the embedded development server."""

from __future__ import annotations

import os
from urllib.parse import urlsplit, urlunsplit

from psycopg.conninfo import conninfo_to_dict, make_conninfo


def database_url() -> str:
    """`DATABASE_URL` when set (any PostgreSQL >= 15 with pgvector), else the embedded server."""
    url = os.environ.get("DATABASE_URL")
    if url:
        return url
    from ember.embedded import EmbeddedServer

    return EmbeddedServer().start()


def uses_embedded() -> bool:
    return not os.environ.get("DATABASE_URL")


def with_database(url: str, database: str) -> str:
    """The same server and credentials, another database."""
    if "://" in url:
        parts = urlsplit(url)
        return urlunsplit((parts.scheme, parts.netloc, f"/{database}", parts.query, ""))
    params = conninfo_to_dict(url)
    params["dbname"] = database
    return make_conninfo(**params)  # type: ignore[arg-type]
