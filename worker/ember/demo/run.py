"""`ember demo`: Ember's whole job on the sample corpus, offline, with the report at the end.

1. a fresh database `ember_demo` on the embedded server (or DATABASE_URL), migrated;
2. `ember sim` on a free port (8787 unless taken), with the heuristic responder;
3. the corpus played through the host API on an injected clock: a morning of conversations in
   seconds, each assistant row a real model call captured for the hot path;
4. `ember worker` (shadow and steward) as a sidecar process; the user interrupts a running shadow
   turn; a light model is tagged for the health category; the worker runs until no work is left;
5. the semantic judge, the summary tables, and the HTML report (what `ember compare` runs, called
   directly), whose path is printed last.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio.to_thread
import psycopg

from ember import queries
from ember.commands.base import EXIT_USAGE, CliError
from ember.demo.corpus import (
    HOST_RESPONDER,
    Corpus,
    DemoClock,
    Runtime,
    SliceError,
    load_corpus,
    parse_time,
)
from ember.sim import Heuristic, Scripted, SimServer
from ember.sim.responders import SHADOW_TOOL, Outcome, Responder, SimRequest

REPORT = "ember-demo-report.html"
HOLD_SECONDS = 60.0  # the longest the simulator holds the interrupted shadow turn
DRAIN_TIMEOUT = 150.0


# --- what the simulator answers ---------------------------------------------------------------


class HeldTurn:
    """The heuristic responder, except that it holds the first shadow turn of one thread open
    until the demo lets go, so that the user's next message arrives while that turn is running
    (a real model takes seconds to answer; the rule-based stand-in takes milliseconds)."""

    name = "heuristic"

    def __init__(self, inner: Responder, needle: str, unless: str) -> None:
        self.inner, self.needle, self.unless = inner, needle, unless
        self.arrived = threading.Event()
        self.release = threading.Event()

    def _matches(self, request: SimRequest) -> bool:
        if self.arrived.is_set() or SHADOW_TOOL not in request.tool_names:
            return False
        texts = list(request.texts())
        return any(self.needle in t for t in texts) and not any(self.unless in t for t in texts)

    async def respond(self, request: SimRequest) -> Outcome:
        if self._matches(request):
            self.arrived.set()
            await anyio.to_thread.run_sync(self.release.wait, HOLD_SECONDS)
        return await self.inner.respond(request)


def interrupt_texts(corpus: Corpus) -> tuple[str, str]:
    """(the interrupted thread's last answer before now, the user's message after now)."""
    rows = [m for m in corpus.messages if m["thread"] == corpus.interrupted_thread]
    before = [m for m in rows if parse_time(m["created_at"]) <= corpus.now]
    after = [m for m in rows if parse_time(m["created_at"]) > corpus.now]
    answer = next(m for m in reversed(before) if m["role"] == "assistant")
    said = next(m for m in after if m["role"] == "user")
    return str(answer["content"]), str(said["content"])


# --- progress on the terminal ------------------------------------------------------------------

COUNT_NAMES = (
    "hot runs",
    "cold runs",
    "cancelled",
    "running",
    "steward runs",
    "facts",
    "proposals",
    "rejected",
)


@dataclass
class Display:
    """Live progress (rich) on a terminal; plain timestamped lines otherwise."""

    live: bool
    started: float = field(default_factory=time.monotonic)
    counts: dict[str, int] = field(default_factory=dict)
    requests: int = 0
    status: str = "starting"
    _live: Any = None
    _printed: str = ""

    def __enter__(self) -> Display:
        if self.live:
            from rich.console import Console
            from rich.live import Live

            self._live = Live(self._render(), console=Console(), refresh_per_second=4)
            self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.pause()

    def pause(self) -> None:
        if self._live is not None:
            self._live.update(self._render())
            self._live.__exit__(None, None, None)
            self._live = None

    def _render(self) -> Any:
        from rich.console import Group
        from rich.text import Text

        status = Text.assemble((self.status, "bold"), (f"  {self.elapsed():.0f} s", "dim"))
        parts: list[tuple[str, str] | str] = []
        for name, n in [*self.counts.items(), ("model requests", self.requests)]:
            parts += [f"{name} ", (str(n), "bold cyan"), "   "]
        return Group(status, Text.assemble(*parts))

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def say(self, line: str) -> None:
        if self._live is not None:
            self._live.console.print(line, markup=False, highlight=False)
        else:
            print(f"[{self.elapsed():5.1f}s] {line}", flush=True)

    def step(self, status: str) -> None:
        self.status = status
        self.say(status)
        self.refresh()

    def update(self, counts: dict[str, int], requests: int) -> None:
        self.counts, self.requests = counts, requests
        line = ", ".join(f"{name} {n}" for name, n in counts.items() if n)
        if self._live is None and line and line != self._printed:
            self._printed = line
            print(f"[{self.elapsed():5.1f}s]   so far: {line}", flush=True)
        self.refresh()

    def refresh(self) -> None:
        if self._live is not None:
            self._live.update(self._render())


@contextlib.contextmanager
def watching(url: str, display: Display, sim: SimServer | None) -> Iterator[None]:
    """Refresh the figures twice a second from a connection of their own."""
    stop = threading.Event()

    def loop() -> None:
        # The figures are a view on the run, not the run: if the database goes away, the
        # demo's own next statement fails and says why; this thread just stops.
        with contextlib.suppress(psycopg.Error), psycopg.connect(url, autocommit=True) as conn:
            while not stop.wait(0.5):
                row = conn.execute(queries.DEMO_COUNTS).fetchone()
                if row is not None:
                    requests = len(sim.requests) if sim is not None else 0
                    display.update(dict(zip(COUNT_NAMES, map(int, row), strict=True)), requests)

    thread = threading.Thread(target=loop, name="ember-demo-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(5)


# --- helpers ----------------------------------------------------------------------------------


def wait_for(check: Callable[[], bool], timeout: float, pause: float = 0.2) -> bool:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(pause)
    return True


def keep_previous(path: Path) -> Path | None:
    """Move last run's report aside under a dated name; returns where it went."""
    if not path.exists():
        return None
    stamp = datetime.fromtimestamp(path.stat().st_mtime, UTC).strftime("%Y%m%d-%H%M%S")
    kept = path.with_name(f"{path.stem}-{stamp}{path.suffix}")
    path.replace(kept)
    return kept


def start_sim(
    responder: Responder, host: Scripted, clock: DemoClock, port: int, log: Path
) -> tuple[SimServer, str | None]:
    """The simulator on `port`, or on a free port when that one is taken (and a note saying so)."""
    named = {HOST_RESPONDER: host}
    sim = SimServer(responder=responder, named=named, clock=clock, port=port, log_path=log)
    try:
        return sim.start(), None
    except OSError as exc:
        sim = SimServer(responder=responder, named=named, clock=clock, port=0, log_path=log)
        sim.start()
        return sim, f"port {port} is taken ({exc.strerror}); using port {sim.port} instead"


@contextlib.contextmanager
def environment(env: dict[str, str]) -> Iterator[None]:
    """Run an `ember` command in this process with the demo's environment."""
    saved = dict(os.environ)
    os.environ.update(env)
    if not sys.stdout.isatty():
        os.environ.setdefault("COLUMNS", "120")  # rich tables stay readable in a log
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def judge(url: str) -> None:
    """`ember compare --semantic`: the judge pairs what both sides said (in the demo's
    environment, whose model access points at the simulator when offline)."""
    from ember.comparison.judge import run_semantic
    from ember.modelaccess import model_access
    from ember.worker.calls import make_client

    with psycopg.connect(url, autocommit=True) as conn:
        results = run_semantic(
            conn, None, None, dry_run=False, client_factory=lambda: make_client(model_access())
        )
    failed = [r for r in results if r.status == "failed"]
    if failed:
        raise RuntimeError(f"the semantic judge failed on {len(failed)} of {len(results)} groups")


def tables_and_page(url: str, html_path: Path) -> None:
    """`ember compare` and `ember compare --html`: the tables on standard output, the page in
    `html_path` (with the latest `ember eval` run's section, if the database holds one)."""
    from ember.commands.base import output
    from ember.comparison import html
    from ember.comparison.report import collect, print_tables, read_only
    from ember.evaluation import html as eval_html
    from ember.evaluation.report import collect as collect_eval
    from ember.tables import console_for

    with read_only(url) as conn:
        whole = collect(conn, None, None)
        evaluation = collect_eval(conn)
    print_tables(whole, console_for(sys.stdout))
    with output(str(html_path)) as out:
        out.write(html.render(whole, [eval_html.section(evaluation)] if evaluation else []))


def ember_command() -> list[str]:
    script = Path(sys.executable).with_name("ember")
    return [str(script)] if script.exists() else [sys.executable, "-m", "ember.cli"]


@dataclass
class Pending:
    running: int
    shadow_ready: int
    steward_ready: int
    idle: int

    @property
    def empty(self) -> bool:
        return not (self.running or self.shadow_ready or self.steward_ready or self.idle)


def pending(conn: psycopg.Connection[Any]) -> Pending:
    """No work left, by ember.work_status() (`ember status`'s rows): nothing running or with a
    lapsed lease, nothing ready (a thread waiting for a tagged model is not ready), no generation
    the steward may read, no thread tick has not offered yet."""
    counts = Pending(0, 0, 0, 0)
    for pipeline, state, reason, items, *_ in conn.execute(queries.WORK_STATUS):
        n = int(items or 0)
        if state == "running" or reason == "lease-expired":
            counts.running += n
        if pipeline == "shadow" and state == "ready":
            counts.shadow_ready += n
        if pipeline == "steward" and state == "ready":
            counts.steward_ready += n
        if pipeline == "shadow" and reason in ("tick-due", "idle-not-reached"):
            counts.idle += n
    return counts


def drain(conn: psycopg.Connection[Any], timeout: float) -> bool:
    """Wait until no work is left: nothing running, ready, or idle and not yet offered."""
    calm = 0

    def check() -> bool:
        nonlocal calm
        conn.execute(queries.TICK)
        calm = calm + 1 if pending(conn).empty else 0
        return calm >= 3

    return wait_for(check, timeout, pause=0.5)


# --- the run ----------------------------------------------------------------------------------


def offline() -> bool:
    """True unless the user pointed the run at a real model (a key and no base URL)."""
    return not (os.environ.get("ANTHROPIC_API_KEY") and not os.environ.get("ANTHROPIC_BASE_URL"))


def _env(url: str, base_url: str, use_sim: bool) -> dict[str, str]:
    env = {**os.environ, "DATABASE_URL": url}
    if use_sim:
        env["ANTHROPIC_BASE_URL"] = base_url
        env.setdefault("ANTHROPIC_API_KEY", "offline-demo-key")
    return env


def _scalar(conn: psycopg.Connection[Any], query: Any, params: dict[str, Any] | None = None) -> Any:
    row = conn.execute(query, params).fetchone()
    return row[0] if row else None


class Demo:
    """One run of the demo, step by step; `figures` holds what it measured."""

    def __init__(self, args: argparse.Namespace, corpus: Corpus, out: Path, display: Display):
        self.args, self.corpus, self.out, self.display = args, corpus, out, display
        self.use_sim = offline()
        self.clock = DemoClock(datetime.now(UTC) - corpus.now)
        needle, unless = interrupt_texts(corpus)
        self.held = HeldTurn(Heuristic(), needle, unless)
        self.host_script = Scripted()
        self.worker: subprocess.Popen[bytes] | None = None
        self.figures: dict[str, Any] = {}

    def run(self, url: str, sim: SimServer) -> None:
        self.url, self.sim = url, sim
        self.env = _env(url, sim.base_url, self.use_sim)
        with psycopg.connect(url, autocommit=True) as conn, watching(url, self.display, sim):
            self.conn = conn
            runtime = self.setup_and_play()
            self.start_worker()
            self.cut_over()
            self.interrupt(runtime)
            self.tag_light_model()
            self.drain()
            self.settle_consolidation()
            self.stop_worker()
            self.display.step("ember compare --semantic: the judge pairs what both sides said")
            with environment(self.env):
                judge(url)
            self.figures = collect_figures(conn, runtime, sim, self.corpus)
            self.figures["cutover"] = self.cutover_figures()

    def setup_and_play(self) -> Runtime:
        conn, cat, corpus = self.conn, self.corpus.category, self.corpus
        runtime = Runtime(
            conn, corpus, self.clock, self.sim.base_url, self.host_script, self.display.say
        )
        runtime.define_category(cat.name, cat.description)
        # The host's own model for the health thread may read it; the light model, not yet.
        conn.execute(queries.TAG_MODEL, {"model": cat.host_model, "category": cat.name})
        # Shadow memory is on from the corpus's first moment.
        self.clock.pin(corpus.start)
        runtime.activate_shadow()
        self.clock.release()
        # The demo consolidates whenever its facts change, not every six hours.
        conn.execute(queries.SET_SETTING, {"key": "consolidation_interval", "value": "0 seconds"})
        self.display.step(
            f"playing the corpus through the host API: {len(corpus.threads)} threads, "
            "a morning in seconds on an injected clock"
        )
        played = runtime.play(until=corpus.now)
        self.clock.release()
        self.display.say(
            f"{played} rows and {len(runtime.calls)} host model calls written; "
            f"it is now {corpus.now:%H:%M} in the corpus"
        )
        return runtime

    def start_worker(self) -> None:
        self.display.step("starting ember worker (shadow, steward, consolidation) as a sidecar")
        self.log = (self.out / "worker.log").open("wb")
        self.worker = subprocess.Popen(
            [*ember_command(), "worker", "--pipelines", "shadow,steward,consolidation",
             "--name", "demo-worker",
             "--log-format", "json", "--poll-interval", "1", "--tick-interval", "2",
             "--concurrency", "4", "--grace", "5"],
            env=self.env, stdout=self.log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        for thread, why in self.conn.execute(queries.DEMO_WAITING).fetchall():
            self.display.say(f"{thread} waits: {why}")

    def cut_over(self) -> None:
        """One thread switches from the steward to shadow before the rest of the corpus is typed:
        its new rows become facts through promotion, the steward reads it no further."""
        thread = CUTOVER_THREAD
        if thread not in {t["id"] for t in self.corpus.threads}:
            return
        plan = _scalar(self.conn, queries.CUTOVER_PLAN, _plan_of(thread)) or {}
        c = plan.get("comparison") or {}
        self.display.step(f"ember cutover --scope thread:{thread}: shadow takes the thread over")
        self.display.say(
            f"{thread} so far: {c.get('facts')} steward facts, {c.get('proposals')} shadow "
            f"proposals, evidence coverage {_share(c.get('evidence_coverage'))}; the steward "
            f"still digests its {plan.get('steward_rows_to_digest')} rows before the point"
        )
        made = _scalar(self.conn, queries.CUT_OVER, _cut_over(thread)) or {}
        self.cutover_plan = {**plan, "cutover_id": made.get("cutover_id")}
        self.display.say(f"{thread}: cut over from seq {made.get('from_seq')} on")

    def settle_consolidation(self) -> None:
        self.display.step("consolidation: merges, supersedes and flags across threads")
        if not wait_for(lambda: bool(_scalar(self.conn, queries.DEMO_CONSOLIDATION_SETTLED)), 60):
            self.display.say("consolidation still had work after 60 s")

    def cutover_figures(self) -> dict[str, Any]:
        plan = getattr(self, "cutover_plan", None)
        if plan is None:
            return {}
        return {
            "thread": CUTOVER_THREAD,
            "plan": plan,
            "promotions": dict(
                self.conn.execute(queries.DEMO_PROMOTIONS, {"thread": CUTOVER_THREAD})
            ),
            "after": _scalar(self.conn, queries.CUTOVER_PLAN, _plan_of(CUTOVER_THREAD)) or {},
            "supersedes": [tuple(r) for r in self.conn.execute(queries.DEMO_SUPERSEDES)],
        }

    def interrupt(self, runtime: Runtime) -> None:
        """The user types in a thread while its shadow turn is running; the rest of the
        corpus after "now" follows."""
        conn, thread = self.conn, self.corpus.interrupted_thread
        self.display.step(f"waiting for the shadow turn of {thread}")

        def running() -> bool:
            # Offline the simulator holds that turn; a real model's turn is simply running.
            held = self.held.arrived.is_set() or not self.use_sim
            return held and bool(
                _scalar(conn, queries.DEMO_RUN_IN_STATUS, {"thread": thread, "status": "running"})
            )

        if wait_for(running, 90):
            self.display.say(f"{thread}: its shadow turn is running; the user types a message")
        else:
            self.display.say(f"{thread}: no shadow turn started within 90 s; the user types")
        for _, kind, record in runtime.events(after=self.corpus.now):
            interrupting = kind == "message" and record["role"] == "user"
            runtime.apply(kind, record)
            if interrupting and record["thread"] == thread:
                if wait_for(
                    lambda: bool(
                        _scalar(
                            conn,
                            queries.DEMO_RUN_IN_STATUS,
                            {"thread": thread, "status": "cancelled"},
                        )
                    ),
                    30,
                ):
                    self.display.say(f"{thread}: the running shadow turn was cancelled")
                self.held.release.set()

    def tag_light_model(self) -> None:
        cat = self.corpus.category
        self.display.step(f"tagging {cat.light_model} for {cat.name}: its thread may now be read")
        self.conn.execute(queries.TAG_MODEL, {"model": cat.light_model, "category": cat.name})

    def drain(self) -> None:
        self.display.step("the worker runs until no work is left")
        if not drain(self.conn, DRAIN_TIMEOUT):
            self.display.say(
                f"work still pending after {DRAIN_TIMEOUT:.0f} s: {pending(self.conn)}"
            )

    def stop_worker(self) -> None:
        if self.worker is not None and self.worker.poll() is None:
            self.worker.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.worker.wait(30)
            self.display.say("ember worker stopped")
        if self.worker is not None:
            self.log.close()

    def close(self) -> None:
        """Whatever happened: the worker stopped, the held turn let go."""
        self.stop_worker()
        self.held.release.set()


def run(args: argparse.Namespace) -> int:
    from ember.config import database_url
    from ember.devsetup import fresh_database
    from ember.embedded import project_root
    from ember.migrate import sql_root

    root = project_root()
    out = Path(args.out) if args.out else root / "demo-report"
    out.mkdir(parents=True, exist_ok=True)
    corpus = load_corpus(Path(args.corpus) if args.corpus else None)
    if args.threads:
        try:
            corpus = corpus.only({t.strip() for t in args.threads.split(",") if t.strip()})
        except SliceError as exc:
            raise CliError(EXIT_USAGE, str(exc)) from exc
    report = out / REPORT

    with Display(live=sys.stdout.isatty() and not args.plain) as display:
        display.step("starting the database")
        url, _ = fresh_database(database_url(), args.database, root=sql_root(), pgtap=False)
        display.say(f"database: a fresh {args.database}, migrated")
        kept = keep_previous(report)
        if kept:
            display.say(f"the previous report is kept as {kept}")
        demo = Demo(args, corpus, out, display)
        (out / SIM_LOG).unlink(missing_ok=True)
        sim, note = start_sim(demo.held, demo.host_script, demo.clock, args.port, out / SIM_LOG)
        if note:
            display.say(note)
        display.say(f"ember sim (heuristic responder) listening on {sim.base_url}")
        try:
            demo.run(url, sim)
        except KeyboardInterrupt:
            display.pause()
            print("\ninterrupted: stopping the worker and the simulator", flush=True)
            raise
        finally:
            demo.close()
            sim.stop()

    print()
    with environment(demo.env):
        tables_and_page(url, report)
    summarize(demo.figures, demo.use_sim, corpus, time.monotonic() - display.started)
    print(f"\nThe demo's database stays for you to explore:\n  {url}")
    print(f"  DATABASE_URL='{url}' {' '.join(ember_command())} compare")
    print(f"\nreport: {report}")
    return 0


SIM_LOG = "sim-requests.jsonl"
# The thread the demo cuts over to shadow: its user says where they live before and after the
# corpus's "now", so the cut-over and the consolidation's supersede meet in it.
CUTOVER_THREAD = "trip-lisbon"


def _plan_of(thread: str) -> dict[str, Any]:
    """cutover_plan's parameters for one thread, cut over (not rolled back)."""
    return {"scope": "thread", "value": thread, "rollback": False}


def _cut_over(thread: str) -> dict[str, Any]:
    """cut_over's parameters for the demo's switch of one thread."""
    return {"scope": "thread", "value": thread, "by": "ember demo", "note": "the demo's switch"}


def _share(value: Any) -> str:
    return "n/a" if value is None else f"{float(value):.0%}"


def collect_figures(
    conn: psycopg.Connection[Any], runtime: Runtime, sim: SimServer, corpus: Corpus
) -> dict[str, Any]:
    runs = dict(conn.execute(queries.DEMO_RUNS_BY_PATH))
    hot: list[tuple[str, float]] = []
    for thread, read, started in conn.execute(queries.DEMO_HOT_RUNS):
        calls = [c for c in runtime.calls if c.thread == thread and c.at <= started]
        if calls and calls[-1].input_total:
            hot.append((thread, int(read) / calls[-1].input_total))
    row = conn.execute(queries.DEMO_FIGURES).fetchone()
    assert row is not None
    health = {m["content"] for m in corpus.messages if m["thread"] in corpus.category_threads}
    tagged = {
        str(r[0])
        for r in conn.execute(queries.DEMO_TAGGED_MODELS, {"category": corpus.category.name})
    }
    to_models: dict[str, int] = {}
    isolated = 0
    for entry in sim.requests:
        text = entry.text
        if corpus.isolated_marker in text:
            isolated += 1
        if any(h in text for h in health) and isinstance(entry.body, dict):
            model = str(entry.body.get("model"))
            to_models[model] = to_models.get(model, 0) + 1
    return {
        "runs": runs,
        "hot_shares": hot,
        "facts": int(row[0]),
        "facts_with_evidence": int(row[1]),
        "steward_runs": int(row[2]),
        "proposals": int(row[3]),
        "cancelled_proposals": int(row[4]),
        "embedded_facts": int(row[5]),
        "requests": len(sim.requests),
        "isolated_requests": isolated,
        "category_models": to_models,
        "tagged": tagged,
    }


def summarize(figures: dict[str, Any], use_sim: bool, corpus: Corpus, seconds: float) -> None:
    runs = ", ".join(f"{n} {k}" for k, n in sorted(figures["runs"].items()))
    print(f"\nshadow runs: {runs}")
    for thread, share in figures["hot_shares"]:
        print(f"  hot run of {thread}: {share:.1%} of the old prefix read from the prompt cache")
    print(
        f"steward: {figures['steward_runs']} completed runs, {figures['facts']} active facts, "
        f"{figures['facts_with_evidence']} of them with evidence; shadow: "
        f"{figures['proposals']} valid proposals, {figures['cancelled_proposals']} from "
        "cancelled runs"
    )
    if use_sim:
        cat = corpus.category.name
        sent = ", ".join(f"{m} ({n})" for m, n in sorted(figures["category_models"].items()))
        cleared = all(m in figures["tagged"] for m in figures["category_models"])
        print(
            f"the simulator received {figures['requests']} requests: "
            f"{figures['isolated_requests']} held anything of the isolated thread; "
            f"the {cat} thread's rows went to {sent or 'no model'}"
            f" ({'every one tagged for ' + cat if cleared else 'NOT all tagged for ' + cat})"
        )
    if figures["embedded_facts"]:
        print(
            f"search: vector and full text ({figures['embedded_facts']} facts embedded by the "
            "worker's all-MiniLM-L6-v2)"
        )
    else:
        print(
            "search: full text only (the optional embedder is not installed; "
            "`make embedder` adds vector search, about 1 GB)"
        )
    cut = figures.get("cutover") or {}
    if cut:
        promoted = cut["promotions"]
        before = cut["plan"].get("comparison") or {}
        after = cut["after"].get("comparison") or {}
        print(
            f"cut-over of {cut['thread']}: {promoted.get('promoted', 0)} proposals promoted to"
            f" facts, {promoted.get('already-stated', 0)} already stated,"
            f" {promoted.get('before the point', 0)} left to the steward (they cite rows from"
            f" before the cut-over), {promoted.get('refused', 0)} refused by its checks;"
            f" the thread's comparison at the switch: {before.get('facts')} steward facts,"
            f" {before.get('proposals')} proposals; at the end: {after.get('facts')} steward"
            f" facts, {after.get('proposals')} proposals, evidence coverage"
            f" {_share(after.get('evidence_coverage'))}"
        )
    for old, new, promoted_fact, reason in cut.get("supersedes", []):
        print(
            f"contradiction resolved: {old!r} superseded by {new!r}"
            f"{' (a promoted fact)' if promoted_fact else ''}: {reason}"
        )
    print(f"demo time: {seconds:.0f} s")
    if use_sim:
        print(
            "\nThe model in this run was Ember's offline, rule-based stand-in (ember sim's "
            "heuristic responder), not a language model: it picks statements by keyword and "
            "pairs facts by word overlap. To run the same demo against a real model, set "
            "ANTHROPIC_API_KEY and leave ANTHROPIC_BASE_URL unset:\n"
            "  unset ANTHROPIC_BASE_URL; ANTHROPIC_API_KEY=sk-ant-... make demo\n"
            "The recorded conversations still come from the simulator; the worker's and the "
            "judge's calls then go to Anthropic, at list prices."
        )
    else:
        print(
            "\nThe worker and the judge called Anthropic's API (ANTHROPIC_API_KEY); the recorded "
            "conversations came from the simulator, so hot runs wrote the prompt cache instead "
            "of reading it."
        )
