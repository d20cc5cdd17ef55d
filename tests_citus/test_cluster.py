"""What a real Citus cluster does with SQL of Ember's kind, measured rather than assumed.

The distribution by tenant (docs/citus.md) rests on these facts; ../shared/citus/README.md marks
some of them as read from the source only or untested, so each is checked here on the cluster.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from ember.citus import CITUS_VERSION, Cluster

ROOT = Path(__file__).resolve().parents[1]
EMBER = Path(sys.executable).with_name("ember")


def test_a_coordinator_and_two_workers_form_a_cluster(cluster: Cluster) -> None:
    with psycopg.connect(cluster.url(), autocommit=True) as conn:
        version = conn.execute("SELECT citus_version()").fetchone()
        nodes = conn.execute(
            "SELECT nodeport, groupid = 0, isactive FROM pg_dist_node ORDER BY groupid"
        ).fetchall()
    assert version is not None and version[0].startswith(f"Citus {CITUS_VERSION} ")
    assert [port for port, _, _ in nodes] == [n.port for n in cluster.nodes]
    assert [(coordinator, active) for _, coordinator, active in nodes] == [
        (True, True),
        (False, True),
        (False, True),
    ]


def test_every_node_wants_the_password(cluster: Cluster) -> None:
    for node in cluster.nodes:
        with pytest.raises(psycopg.OperationalError, match="password"):
            psycopg.connect(
                f"postgresql://postgres@127.0.0.1:{node.port}/ember", passfile="/dev/null"
            ).close()


def test_ember_migrate_applies_on_the_coordinator_and_again(cluster: Cluster) -> None:
    env = {**os.environ, "DATABASE_URL": cluster.url()}
    first = subprocess.run(
        [str(EMBER), "migrate"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    assert first.returncode == 0, first.stderr
    again = subprocess.run(
        [str(EMBER), "migrate"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    assert again.returncode == 0, again.stderr
    with psycopg.connect(cluster.url(), autocommit=True) as conn:
        functions = conn.execute(
            "SELECT count(*) FROM pg_proc WHERE pronamespace = 'ember'::regnamespace"
        ).fetchone()
    assert functions is not None and functions[0] > 300


@pytest.fixture
def tenant_table(cluster: Cluster) -> str:
    """A scratch table distributed by tenant: two tenants on different workers."""
    with psycopg.connect(cluster.url(), autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute("DROP TABLE IF EXISTS probe")
        conn.execute(
            "CREATE TABLE probe (tenant_id text, id bigint, body text, v halfvec(3),"
            " PRIMARY KEY (tenant_id, id))"
        )
        conn.execute("SELECT create_distributed_table('probe', 'tenant_id')")
        conn.execute("CREATE INDEX ON probe USING hnsw (v halfvec_cosine_ops)")
        conn.execute(
            "INSERT INTO probe SELECT 't' || (i % 8), i, 'row ' || i,"
            " ARRAY[i, i % 7 + 1, 1]::halfvec(3) FROM generate_series(1, 400) AS i"
        )
    return "probe"


def _tasks(conn: psycopg.Connection, query: str) -> int:
    plan = "\n".join(r[0] for r in conn.execute("EXPLAIN " + query).fetchall())
    counts = [line.split(":")[1] for line in plan.splitlines() if "Task Count:" in line]
    return int(counts[0])


def test_one_tenants_vector_search_runs_on_one_shard(cluster: Cluster, tenant_table: str) -> None:
    with psycopg.connect(cluster.url(), autocommit=True) as conn:
        query = (
            "SELECT id FROM probe WHERE tenant_id = 't3'"
            " ORDER BY v <=> '[1,2,3]'::halfvec(3) LIMIT 5"
        )
        assert _tasks(conn, query) == 1
        assert len(conn.execute(query).fetchall()) == 5
        everyone = "SELECT id FROM probe ORDER BY v <=> '[1,2,3]'::halfvec(3) LIMIT 5"
        assert _tasks(conn, everyone) == 32  # citus.shard_count's default


def test_skip_locked_works_for_one_tenant_and_not_across_tenants(
    cluster: Cluster, tenant_table: str
) -> None:
    claim = "SELECT id FROM probe WHERE tenant_id = 't5' ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED"
    with (
        psycopg.connect(cluster.url()) as first,
        psycopg.connect(cluster.url()) as second,
    ):
        a = first.execute(claim).fetchone()
        b = second.execute(claim).fetchone()
        assert a is not None and b is not None and a != b
        second.rollback()
        with pytest.raises(psycopg.errors.FeatureNotSupported, match="FOR UPDATE"):
            second.execute("SELECT id FROM probe ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED")
        first.rollback()


def _worker_of(conn: psycopg.Connection, tenant: str) -> int:
    row = conn.execute(
        "SELECT nodeport FROM citus_shards WHERE table_name = 'probe'::regclass"
        " AND shardid = get_shard_id_for_distribution_column('probe', %s::text)",
        (tenant,),
    ).fetchone()
    assert row is not None
    return int(row[0])


def _wake_trigger(conn: psycopg.Connection) -> None:
    """A row trigger on the shards that wakes listeners with the row's tenant."""
    conn.execute("SET citus.enable_unsafe_triggers = on")
    conn.execute(
        "CREATE OR REPLACE FUNCTION probe_wake() RETURNS trigger LANGUAGE plpgsql AS"
        " $$ BEGIN PERFORM pg_notify('probe_wake', NEW.tenant_id); RETURN NEW; END $$"
    )
    conn.execute(
        "CREATE TRIGGER probe_wake AFTER INSERT ON probe FOR EACH ROW EXECUTE FUNCTION probe_wake()"
    )


def test_notify_from_a_shard_trigger_reaches_only_that_workers_listeners(
    cluster: Cluster, tenant_table: str
) -> None:
    with psycopg.connect(cluster.url(), autocommit=True) as conn:
        _wake_trigger(conn)
        port = _worker_of(conn, "t1")
    listeners = {
        node.port: psycopg.connect(cluster.url(node), autocommit=True) for node in cluster.nodes
    }
    try:
        for listener in listeners.values():
            listener.execute("LISTEN probe_wake")
        with psycopg.connect(cluster.url(), autocommit=True) as conn:
            conn.execute("INSERT INTO probe (tenant_id, id, body) VALUES ('t1', 10001, 'x')")
        heard = {
            p: [n.payload for n in listener.notifies(timeout=2, stop_after=1)]
            for p, listener in listeners.items()
        }
    finally:
        for listener in listeners.values():
            listener.close()
    assert heard[port] == ["t1"]
    assert all(payloads == [] for p, payloads in heard.items() if p != port)


def test_a_notify_in_a_two_node_write_fails_its_commit(cluster: Cluster, tenant_table: str) -> None:
    with psycopg.connect(cluster.url(), autocommit=True) as conn:
        _wake_trigger(conn)
        ports = {t: _worker_of(conn, t) for t in (f"t{i}" for i in range(8))}
    a = next(iter(ports))
    b = next(t for t, p in ports.items() if p != ports[a])
    with psycopg.connect(cluster.url()) as conn:
        conn.execute("INSERT INTO probe (tenant_id, id, body) VALUES (%s, 20001, 'x')", (a,))
        conn.execute("INSERT INTO probe (tenant_id, id, body) VALUES (%s, 20002, 'x')", (b,))
        with pytest.raises(psycopg.Error, match="NOTIFY"):
            conn.commit()
    with psycopg.connect(cluster.url(), autocommit=True) as conn:
        kept = conn.execute("SELECT count(*) FROM probe WHERE id IN (20001, 20002)").fetchone()
    assert kept == (0,)


def _delegated(conn: psycopg.Connection, call: str) -> bool:
    """Whether Citus pushed a function call down to a worker whole (its DEBUG1 notice says so)."""
    notices: list[str] = []
    conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
    conn.execute("SET client_min_messages = debug1")
    try:
        conn.execute(call)
    finally:
        conn.execute("RESET client_min_messages")
    return any("pushing down the function call" in n for n in notices)


@pytest.fixture
def probe_write(cluster: Cluster, tenant_table: str) -> str:
    """A function that writes one tenant's row, distributed by its tenant argument."""
    with psycopg.connect(cluster.url(), autocommit=True) as conn:
        conn.execute(
            "CREATE OR REPLACE FUNCTION probe_write(p_tenant text, p_id bigint) RETURNS bigint"
            " LANGUAGE plpgsql AS $$ BEGIN"
            " INSERT INTO probe (tenant_id, id, body) VALUES (p_tenant, p_id, 'w');"
            " RETURN (SELECT count(*) FROM probe WHERE tenant_id = p_tenant); END $$"
        )
        conn.execute(
            "SELECT create_distributed_function('probe_write(text, bigint)', 'p_tenant',"
            " colocate_with := 'probe')"
        )
    return "probe_write"


def test_a_bare_call_is_delegated_whole_and_one_in_a_transaction_is_not(
    cluster: Cluster, probe_write: str
) -> None:
    with psycopg.connect(cluster.url(), autocommit=True) as conn:
        assert _delegated(conn, "SELECT probe_write('t2', 30001)")
        conn.execute("BEGIN")
        assert not _delegated(conn, "SELECT probe_write('t2', 30002)")
        conn.execute("COMMIT")
        rows = conn.execute("SELECT count(*) FROM probe WHERE id IN (30001, 30002)").fetchone()
    assert rows == (2,)


def test_a_shard_trigger_cannot_hand_its_row_to_a_function_of_the_tables_type(
    cluster: Cluster, tenant_table: str
) -> None:
    with psycopg.connect(cluster.url(), autocommit=True) as conn:
        conn.execute("SET citus.enable_unsafe_triggers = on")
        conn.execute(
            "CREATE OR REPLACE FUNCTION probe_body(r probe) RETURNS text LANGUAGE sql"
            " AS $$ SELECT r.body $$"
        )
        conn.execute(
            "CREATE OR REPLACE FUNCTION probe_check() RETURNS trigger LANGUAGE plpgsql AS"
            " $$ BEGIN PERFORM probe_body(NEW); RETURN NEW; END $$"
        )
        conn.execute(
            "CREATE TRIGGER probe_check BEFORE INSERT ON probe"
            " FOR EACH ROW EXECUTE FUNCTION probe_check()"
        )
        with pytest.raises(psycopg.errors.UndefinedFunction, match="probe_body"):
            conn.execute("INSERT INTO probe (tenant_id, id, body) VALUES ('t4', 40001, 'x')")
        # The same rule through jsonb, which has no row type of its own, works on the shard.
        conn.execute(
            "CREATE OR REPLACE FUNCTION probe_check() RETURNS trigger LANGUAGE plpgsql AS"
            " $$ BEGIN PERFORM probe_body(jsonb_populate_record(NULL::probe, to_jsonb(NEW)));"
            " RETURN NEW; END $$"
        )
        conn.execute("INSERT INTO probe (tenant_id, id, body) VALUES ('t4', 40001, 'x')")


def test_identity_values_drawn_on_a_worker_come_from_its_own_range(cluster: Cluster) -> None:
    with psycopg.connect(cluster.url(), autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS probe_ids")
        conn.execute(
            "CREATE TABLE probe_ids (tenant_id text,"
            " id bigint GENERATED ALWAYS AS IDENTITY, PRIMARY KEY (tenant_id, id))"
        )
        conn.execute("SELECT create_distributed_table('probe_ids', 'tenant_id')")
        conn.execute(
            "CREATE OR REPLACE FUNCTION probe_id(p_tenant text) RETURNS bigint LANGUAGE sql"
            " AS $$ INSERT INTO probe_ids (tenant_id) VALUES (p_tenant) RETURNING id $$"
        )
        conn.execute(
            "SELECT create_distributed_function('probe_id(text)', 'p_tenant',"
            " colocate_with := 'probe_ids')"
        )
        groups = dict(
            conn.execute(
                "SELECT s.shardid, n.groupid FROM citus_shards AS s"
                " JOIN pg_dist_node AS n ON n.nodeport = s.nodeport"
                " WHERE s.table_name = 'probe_ids'::regclass"
            ).fetchall()
        )
        for tenant in ("a", "b", "c", "d"):
            row = conn.execute("SELECT probe_id(%s)", (tenant,)).fetchone()
            shard = conn.execute(
                "SELECT get_shard_id_for_distribution_column('probe_ids', %s::text)", (tenant,)
            ).fetchone()
            assert row is not None and shard is not None
            assert row[0] >> 48 == groups[shard[0]], (tenant, row[0])


_RUN = """
import sys, time
from pathlib import Path
from ember.citus import Cluster
with Cluster(Path(sys.argv[1]), workers=1) as c:
    print(" ".join(str(n.pgdata) for n in c.nodes), flush=True)
    time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _postmasters(home: Path) -> set[int]:
    """The pids of the live postmasters of the cluster at `home`."""
    pids = set()
    for pid_file in home.glob(".ember/citus/nodes/*/postmaster.pid"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            pids.add(int(pid_file.read_text().split()[0]))
    return {pid for pid in pids if _alive(pid)}


def _cluster_process(cluster: Cluster, root: Path) -> subprocess.Popen[str]:
    assert cluster.bindir is not None
    env = {**os.environ, "CITUS_PG_CONFIG": str(cluster.bindir / "pg_config")}
    proc = subprocess.Popen(
        [sys.executable, "-c", _RUN, str(root)], env=env, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip(), "the cluster did not come up"
    return proc


def test_a_terminated_run_stops_its_nodes_and_a_killed_ones_are_stopped_next_time(
    cluster: Cluster, tmp_path: Path
) -> None:
    root = tmp_path / "checkout"
    root.mkdir()
    root.chmod(0o755)
    proc = _cluster_process(cluster, root)
    assert len(_postmasters(root)) == 2
    proc.terminate()
    assert proc.wait(timeout=120) == 128 + 15
    assert _postmasters(root) == set()

    proc = _cluster_process(cluster, root)
    proc.kill()
    proc.wait(timeout=30)
    left = _postmasters(root)
    assert len(left) == 2  # SIGKILL leaves the nodes running ...
    proc = _cluster_process(cluster, root)  # ... and the next start stops them first
    try:
        assert not any(_alive(pid) for pid in left)
        assert len(_postmasters(root)) == 2
    finally:
        proc.terminate()
        proc.wait(timeout=120)
    assert _postmasters(root) == set()
