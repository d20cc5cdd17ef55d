"""Main steering a side chat through Ember's control plane.

A side chat refactors some code and reports its progress. Main takes the report at its turn
boundary, inspects the chat's scene instead of reading its transcript, and sends a stop. The
stop reaches the running chat at its next safe point, while a task result that arrived at the
same moment waits for the chat's turn boundary.

    .venv/bin/python examples/control.py            # a scratch database on the embedded server
    DATABASE_URL=postgresql://... .venv/bin/python examples/control.py

The database is created for the run and dropped afterwards. The host's own statements
(threads, turns, rows) are plain SQL here; the control plane goes through `ember.control`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from ember import control
from ember.config import database_url
from ember.devsetup import drop_database, fresh_database

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Outcome:
    main_identity: control.Identity
    chat_identity: control.Identity
    at_main_boundary: list[control.Event]
    scene: control.Scene
    stop_result: str
    replay_result: str
    at_safe_point: list[control.Event]
    at_chat_boundary: list[control.Event]


def _tool_use(call_id: str, name: str, tool_input: dict[str, Any]) -> str:
    return json.dumps([{"type": "tool_use", "id": call_id, "name": name, "input": tool_input}])


def run(url: str, say: Callable[[str], None] = print) -> Outcome:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "SELECT ember.create_thread('default', 'main', 'main', NULL, NULL, 'open', %s)",
            ("claude-sonnet-4-5",),
        )
        conn.execute(
            "SELECT ember.create_thread("
            "'default', 'refactor', 'side', 'Refactor models', NULL, 'open', %s)",
            ("claude-sonnet-4-5",),
        )
        conn.execute("SELECT ember.create_thread('default', 'bench', 'task', 'Benchmarks')")

        # Each turn starts by asking for its identity; main's re-reads prompts/main.md.
        main_identity = control.identity_for_turn(conn, "main", ROOT)
        say(f"main's identity: {[(p.file, p.source) for p in main_identity.parts]}")
        say(f"main's tools: {', '.join(main_identity.tool_names)}")
        chat_identity = control.identity_for_turn(conn, "refactor", ROOT)
        say(f"the side chat's tools: {', '.join(chat_identity.tool_names)}")

        # The side chat's turn: it writes a file, runs the tests, and reports.
        conn.execute("SELECT ember.turn_started('default', 'refactor')")
        conn.execute(
            "SELECT ember.append_message("
            "'default', 'refactor', 'user', 'Move the models into app/models.py.')"
        )
        conn.execute(
            "SELECT ember.append_message('default', 'refactor', 'assistant', '', NULL, %s::json)",
            (_tool_use("toolu_w1", "write_file", {"path": "app/models.py", "content": "..."}),),
        )
        conn.execute(
            "SELECT ember.append_message('default', 'refactor', 'tool_result', 'written', NULL, "
            "NULL, 'toolu_w1', 'write_file', 'ok')"
        )
        conn.execute(
            "SELECT ember.append_message('default', 'refactor', 'assistant', "
            "'Models moved. Now the migration.', NULL, %s::json)",
            (_tool_use("toolu_s1", "shell", {"command": "make migrate"}),),
        )
        result = control.report_progress(
            conn, "toolu_r1", "refactor", "models moved; writing the migration"
        )
        say(f"side chat -> report_progress: {result}")

        # Main's turn boundary: the report comes in. Main looks at the scene, not the transcript.
        at_main_boundary = control.deliverable_events(conn, "main", at_safe_point=False)
        for event in at_main_boundary:
            say(f"main receives ({event.kind}): {event.content}")
        scene = control.side_chat_inspect(conn, "refactor")
        say(
            "main inspects: "
            + scene.model_dump_json(include={"running", "tool_calls", "written_paths"})
        )

        # The person wants the old schema kept: main stops the migration.
        stop_result = control.side_chat_message(
            conn,
            "toolu_m1",
            "refactor",
            "stop",
            "The person wants the old schema kept: no migration.",
        )
        say(f"main -> side_chat_message: {stop_result}")
        replay_result = control.side_chat_message(
            conn,
            "toolu_m1",
            "refactor",
            "stop",
            "The person wants the old schema kept: no migration.",
        )
        say(f"replayed call, same result: {replay_result == stop_result}")

        # Meanwhile the benchmark task finishes and tells the side chat.
        control.queue_event(
            conn, "refactor", "thread-event", "task-result", "benchmarks: 12% faster", "bench"
        )

        # The side chat's loop reaches a safe point between two model calls: the stop comes in
        # now; the task result waits for the turn boundary.
        at_safe_point = control.deliverable_events(conn, "refactor", at_safe_point=True)
        for event in at_safe_point:
            say(f"side chat, safe point ({event.kind} from {event.from_thread}): {event.content}")
        conn.execute(
            "SELECT ember.append_message('default', 'refactor', 'tool_result', "
            "'cancelled before running', NULL, NULL, 'toolu_s1', 'shell', 'error')"
        )
        conn.execute(
            "SELECT ember.append_message('default', 'refactor', 'assistant', "
            "'Stopped before the migration; app/models.py is moved, the schema is unchanged.')"
        )
        conn.execute("SELECT ember.turn_ended('default', 'refactor', true)")
        at_chat_boundary = control.deliverable_events(conn, "refactor", at_safe_point=False)
        for event in at_chat_boundary:
            say(
                f"side chat, turn boundary ({event.kind} from {event.from_thread}): {event.content}"
            )

    return Outcome(
        main_identity,
        chat_identity,
        at_main_boundary,
        scene,
        stop_result,
        replay_result,
        at_safe_point,
        at_chat_boundary,
    )


def main() -> None:
    server = database_url()
    name = f"ember_example_control_{os.getpid()}"
    url, _ = fresh_database(server, name, root=ROOT, pgtap=False)
    try:
        run(url)
    finally:
        drop_database(server, name)


if __name__ == "__main__":
    main()
