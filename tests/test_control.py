"""ember.control against a real database, and examples/control.py end to end."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import psycopg
import pytest

from ember import control

ROOT = Path(__file__).resolve().parents[1]


def _example() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "example_control", ROOT / "examples" / "control.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # the example's dataclass resolves its annotations there
    spec.loader.exec_module(module)
    return module


def test_hot_document_fallback_through_the_host_helper(db: str, tmp_path: Path) -> None:
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("SELECT ember.create_thread('default', 'main', 'main')")
        never = control.identity_for_turn(conn, "main", tmp_path)
        assert [p.source for p in never.parts] == ["host", "built-in"]
        with pytest.raises(KeyError):
            never.text()
        assert never.text({"prompts/system.md": "base"}).startswith(
            "base\n\nYou are working in Main"
        )

        (tmp_path / "prompts").mkdir()
        (tmp_path / "prompts" / "system.md").write_text("base identity\n")
        (tmp_path / "prompts" / "main.md").write_text("role v1\n")
        first = control.identity_for_turn(conn, "main", tmp_path)
        assert [p.source for p in first.parts] == ["read", "read"]
        assert first.text() == "base identity\n\nrole v1"
        assert first.segment.opened and first.segment.ordinal == 2

        (tmp_path / "prompts" / "main.md").unlink()
        failed = control.identity_for_turn(conn, "main", tmp_path)
        assert failed.parts[1].source == "last-good"
        assert failed.text() == first.text()
        assert not failed.segment.opened, "a failed read keeps the segment"
        error = conn.execute(
            "SELECT last_error FROM ember.identity_documents WHERE file = 'prompts/main.md'"
        ).fetchone()
        assert error is not None and error[0].startswith("FileNotFoundError")


def test_refusals_surface_as_named_sqlstates(db: str) -> None:
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("SELECT ember.create_thread('default', 'main', 'main')")
        conn.execute("SELECT ember.create_thread('default', 'chat', 'side')")
        with pytest.raises(psycopg.Error) as stop:
            control.side_chat_message(conn, "c1", "chat", "stop", "Stop.")
        assert stop.value.sqlstate == "EM082"
        with pytest.raises(psycopg.Error) as steward:
            conn.execute("SELECT ember.ensure_steward_thread('default')")
            control.side_chat_inspect(conn, "memory-steward")
        assert steward.value.sqlstate == "EM027"
        assert "not an empty conversation" in str(steward.value)


def test_the_example_steers_a_side_chat(db: str) -> None:
    lines: list[str] = []
    outcome = _example().run(db, lines.append)
    main_tools = set(outcome.main_identity.tool_names)
    assert {
        "progress_board",
        "watch_thread",
        "side_chat_message",
        "side_chat_inspect",
    } <= main_tools
    assert not main_tools & {
        "write_fact",
        "merge_facts",
        "retire_fact",
        "finish",
        "report_progress",
    }
    assert [p.file for p in outcome.main_identity.parts] == ["prompts/system.md", "prompts/main.md"]
    assert {"report_progress", "shadow_memory_propose"} <= set(outcome.chat_identity.tool_names)
    assert [e.kind for e in outcome.at_main_boundary] == ["progress-report"]
    assert outcome.scene.running and outcome.scene.written_paths == ["app/models.py"]
    assert [c.outcome for c in outcome.scene.tool_calls] == ["ok", "no-result"]
    assert outcome.replay_result == outcome.stop_result
    assert [(e.kind, e.author) for e in outcome.at_safe_point] == [("main-message", "main")]
    assert "not the user's words" in outcome.at_safe_point[0].content
    assert [e.kind for e in outcome.at_chat_boundary] == ["task-result"]
    with psycopg.connect(db) as conn:
        actions = conn.execute("SELECT count(*) FROM ember.main_actions").fetchone()
        board = control.progress_board(conn)
    assert actions == (1,)
    assert [(r.thread_id, r.delivered) for r in board] == [("refactor", True), ("bench", None)]


def test_the_example_runs_as_a_script(server_url: str) -> None:
    env = {**os.environ, "DATABASE_URL": server_url}
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "control.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "side chat, safe point (main-message from main)" in done.stdout
    assert "side chat, turn boundary (task-result from bench)" in done.stdout


def test_the_registry_names_what_the_pipelines_send(db: str) -> None:
    """The tool names Ember's own pipelines put in their requests are the registry's."""
    tools = pytest.importorskip("ember.tools", reason="the pipelines' tool models are not here yet")
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("SELECT ember.create_thread('default', 'chat', 'side')")
        conn.execute("SELECT ember.ensure_steward_thread('default')")
        chat = control.turn_identity(conn, "chat").tool_names
        steward = control.turn_identity(conn, "memory-steward").tool_names
    # ember.tools is shared: it may hold another pipeline's tools before the shadow tool lands.
    if hasattr(tools, "shadow_tool_definition"):
        assert tools.shadow_tool_definition()["name"] in chat
    if hasattr(tools, "steward_tool_definitions"):
        assert [t["name"] for t in tools.steward_tool_definitions()] == steward


def test_a_queued_event_notifies_its_thread_at_commit(db: str) -> None:
    with (
        psycopg.connect(db, autocommit=True) as listener,
        psycopg.connect(db) as sender,
    ):
        listener.execute("LISTEN ember_event")
        sender.execute("SELECT ember.create_thread('default', 'main', 'main')")
        sender.execute("SELECT ember.create_thread('default', 'chat', 'side')")
        control.side_chat_message(sender, "c1", "chat", "nudge", "Carry on with the tests.")
        assert list(listener.notifies(timeout=0.2)) == [], "nothing is announced before commit"
        sender.commit()
        notes = listener.notifies(timeout=10, stop_after=1)
        assert [(n.channel, n.payload) for n in notes] == [("ember_event", "chat")]


def test_the_host_helper_steers_a_side_chat_through_the_control_plane(db: str) -> None:
    from ember.host import Host

    with psycopg.connect(db, autocommit=True) as conn:
        host = Host(conn)
        host.create_thread("main", "main")
        host.create_thread("chat", "side", title="A side chat")
        host.append_message("chat", "user", "Draft the plan.", author="human")
        host.turn_started("chat")
        scene = host.side_chat_inspect("chat")
        assert scene.running
        result = host.side_chat_message("toolu_1", "chat", "stop", "Stop here, please.")
        assert host.side_chat_message("toolu_1", "chat", "stop", "Stop here, please.") == result
        delivered = host.deliverable_events("chat", at_safe_point=True)
        assert [e.kind for e in delivered] == ["main-message"]
        assert "Stop here, please." in delivered[0].content
        assert {t.name for t in host.thread_tools("main")} >= {
            "side_chat_message",
            "side_chat_inspect",
        }


def test_the_control_plane_wrappers_run_as_ember_host(db: str, tmp_path: Path) -> None:
    # The host role has no table privileges: every wrapper must go through a granted function.
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("SELECT ember.create_thread('default', 'main', 'main')")
        conn.execute("SELECT ember.create_thread('default', 'chat', 'side')")
        conn.execute("SET ROLE ember_host")
        (tmp_path / "prompts").mkdir()
        (tmp_path / "prompts" / "system.md").write_text("base identity\n")
        (tmp_path / "prompts" / "main.md").write_text("role\n")
        assert control.identity_files(conn, "main") == ["prompts/system.md", "prompts/main.md"]
        assert control.identity_for_turn(conn, "main", tmp_path).text() == "base identity\n\nrole"
        assert "side_chat_inspect" in {t.name for t in control.tool_registry(conn)}
        assert not control.side_chat_inspect(conn, "chat").running
        with pytest.raises(psycopg.Error) as refused:
            control.identity_files(conn, "nobody")
        assert refused.value.sqlstate == "EM001"
