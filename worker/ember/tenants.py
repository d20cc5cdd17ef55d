"""Tenants (docs/tenants.md): each person a deployment serves, the first argument of every call
that reads or writes that person's data."""

from __future__ import annotations

# The tenant a single-person database holds: the one `ember migrate` gives the rows of a database
# from before tenants (db/migrations/0051_tenants.sql), and the one a call means when it names none.
DEFAULT_TENANT = "default"
