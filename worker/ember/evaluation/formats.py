"""LoCoMo and LongMemEval files, read into conversations and questions, and written as Ember
import files (docs/import-format.md) one conversation at a time.

The mapping (docs/eval.md says it to users):

- a conversation (a LoCoMo sample; a LongMemEval question's haystack) is a `side` thread;
- each session is a generation starting at the session's date, in date order;
- LoCoMo's `speaker_a` is the human user and `speaker_b` the assistant; each turn's text starts
  with its speaker's name, since both are people the questions name; an image a turn shares is
  kept as its caption. LongMemEval's `user` and `assistant` turns are the human user and the
  assistant, their text as given;
- turns are one second apart from their session's start (a session never starts before the rows
  of the one before it end), so the rows keep the file's order and the dates stay the benchmark's.

Nothing here touches a database: `import_file_text` is the text `ember import` reads.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

Kind = Literal["locomo", "longmemeval"]

# LoCoMo's category numbers, as the data uses them (the paper's prose orders them differently;
# docs/eval.md says so). The report shows the number with this name.
LOCOMO_CATEGORIES = {
    1: "1 multi-hop",
    2: "2 temporal",
    3: "3 open-domain",
    4: "4 single-hop",
    5: "5 adversarial",
}
# A LoCoMo adversarial question without an answer of its own: the conversation does not say.
NOT_MENTIONED = "Not mentioned in the conversation."
TURN_SPACING = timedelta(seconds=1)


class BenchmarkFileError(ValueError):
    """The file is not a benchmark this version reads; the message says where and why."""


@dataclass
class Turn:
    role: Literal["user", "assistant"]
    content: str
    source: str  # the benchmark's name for the turn: a dia_id, "<session id>#<n>"
    has_answer: bool = False


@dataclass
class Session:
    source: str  # session_N, a haystack session id
    date_text: str  # as the file writes it
    start: datetime
    turns: list[Turn] = field(default_factory=list)


@dataclass
class Conversation:
    id: str
    title: str
    sessions: list[Session]


@dataclass
class Question:
    id: str
    conversation: str
    category: str
    question: str
    gold: str
    question_date: str | None = None
    evidence: list[str] = field(default_factory=list)


@dataclass
class Benchmark:
    kind: Kind
    conversations: list[Conversation]
    questions: list[Question]

    def conversation(self, conversation_id: str) -> Conversation:
        return next(c for c in self.conversations if c.id == conversation_id)


# --- dates ----------------------------------------------------------------------------------

_MONTHS = {
    name: n
    for n, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ],
        start=1,
    )
    for name in names
}
# LoCoMo: "1:56 pm on 8 May, 2023".
_LOCOMO_DATE = re.compile(
    r"^\s*(\d{1,2}):(\d{2})\s*([ap])\.?m\.?\s+on\s+(\d{1,2})\s+([a-z]+)\.?,?\s+(\d{4})\s*$", re.I
)
# LongMemEval: "2023/05/20 (Sat) 02:21".
_LME_DATE = re.compile(
    r"^\s*(\d{4})/(\d{1,2})/(\d{1,2})(?:\s*\([A-Za-z]+\))?(?:\s+(\d{1,2}):(\d{2}))?\s*$"
)


def parse_date(text: str) -> datetime:
    """A session date as LoCoMo or LongMemEval writes it, or ISO 8601; UTC. ValueError if none."""
    m = _LOCOMO_DATE.match(text)
    if m:
        hour, minute, half, day, month, year = m.groups()
        if month.lower() not in _MONTHS:
            raise ValueError(f"unknown month {month!r} in {text!r}")
        h = int(hour) % 12 + (12 if half.lower() == "p" else 0)
        return datetime(int(year), _MONTHS[month.lower()], int(day), h, int(minute), tzinfo=UTC)
    m = _LME_DATE.match(text)
    if m:
        year, month, day, hour, minute = m.groups()
        return datetime(
            int(year), int(month), int(day), int(hour or 0), int(minute or 0), tzinfo=UTC
        )
    try:
        parsed = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(
            f"unreadable date {text!r} (expected like '1:56 pm on 8 May, 2023', "
            "'2023/05/20 (Sat) 02:21' or ISO 8601)"
        ) from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


# --- the files' shapes ----------------------------------------------------------------------
# Only the fields Ember reads are declared; the others (LoCoMo's summaries and observations,
# an image's search query) are ignored, never guessed at.

Answer = str | int | float


class LoCoMoTurn(BaseModel):
    model_config = ConfigDict(extra="ignore")
    speaker: str
    dia_id: str
    text: str = ""
    blip_caption: str | None = None


class LoCoMoQA(BaseModel):
    model_config = ConfigDict(extra="ignore")
    question: str = Field(min_length=1)
    answer: Answer | None = None
    evidence: list[str] = Field(default_factory=list)
    category: int


class LoCoMoSample(BaseModel):
    model_config = ConfigDict(extra="ignore")
    sample_id: str | int | None = None
    conversation: dict[str, Any]
    qa: list[LoCoMoQA]


class LongMemEvalTurn(BaseModel):
    model_config = ConfigDict(extra="ignore")
    role: Literal["user", "assistant"]
    content: str
    has_answer: bool = False


class LongMemEvalItem(BaseModel):
    model_config = ConfigDict(extra="ignore")
    question_id: str = Field(min_length=1)
    question_type: str = Field(min_length=1)
    question: str = Field(min_length=1)
    answer: Answer
    question_date: str | None = None
    haystack_session_ids: list[str] | None = None
    haystack_dates: list[str]
    haystack_sessions: list[list[LongMemEvalTurn]]
    answer_session_ids: list[str] = Field(default_factory=list)


def _where(exc: ValidationError, prefix: str) -> str:
    err = exc.errors(include_url=False)[0]
    loc = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"])
    return f"{prefix}{loc}: {err['msg']}"


def _text(value: Answer) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


# --- reading --------------------------------------------------------------------------------


def detect(data: Any) -> Kind:
    items = data if isinstance(data, list) else [data]
    first = items[0] if items else None
    if isinstance(first, dict) and "conversation" in first and "qa" in first:
        return "locomo"
    if isinstance(first, dict) and "question_id" in first and "haystack_sessions" in first:
        return "longmemeval"
    raise BenchmarkFileError(
        "neither LoCoMo (a list of samples with conversation and qa) nor LongMemEval (a list of "
        "questions with question_id and haystack_sessions)"
    )


def load(path: Path) -> Benchmark:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise BenchmarkFileError(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise BenchmarkFileError(f"not JSON: {exc.msg} at line {exc.lineno}") from None
    return parse(data)


def parse(data: Any) -> Benchmark:
    kind = detect(data)
    items = data if isinstance(data, list) else [data]
    benchmark = _locomo(items) if kind == "locomo" else _longmemeval(items)
    if not benchmark.questions:
        raise BenchmarkFileError("the file holds no questions")
    seen: set[str] = set()
    for q in benchmark.questions:
        if q.id in seen:
            raise BenchmarkFileError(f"question id {q.id!r} appears twice")
        seen.add(q.id)
    return benchmark


_SESSION_KEY = re.compile(r"^session_(\d+)$")


def _locomo(items: Sequence[Any]) -> Benchmark:
    conversations: list[Conversation] = []
    questions: list[Question] = []
    for i, raw in enumerate(items):
        where = f"samples[{i}]"
        try:
            sample = LoCoMoSample.model_validate(raw)
        except ValidationError as exc:
            raise BenchmarkFileError(_where(exc, where)) from None
        cid = str(sample.sample_id) if sample.sample_id is not None else f"sample-{i + 1}"
        where = f"samples[{i}] ({cid})"
        if any(c.id == cid for c in conversations):
            raise BenchmarkFileError(f"{where}: sample_id {cid!r} appears twice")
        speakers = _locomo_speakers(sample.conversation, where)
        ordered = _locomo_sessions(sample.conversation, speakers, where)
        title = (
            f"LoCoMo {cid}: {speakers['speaker_a']} (the user) and "
            f"{speakers['speaker_b']} (the assistant)"
        )
        conversations.append(Conversation(cid, title, ordered))
        questions += _locomo_questions(sample, cid, where)
    return Benchmark("locomo", conversations, questions)


def _locomo_speakers(conv: dict[str, Any], where: str) -> dict[str, str]:
    """speaker_a and speaker_b, two different names."""
    speakers = {}
    for key in ("speaker_a", "speaker_b"):
        name = conv.get(key)
        if not isinstance(name, str) or not name.strip():
            raise BenchmarkFileError(f"{where}: conversation.{key} is missing")
        speakers[key] = name.strip()
    if speakers["speaker_a"] == speakers["speaker_b"]:
        raise BenchmarkFileError(
            f"{where}: speaker_a and speaker_b are both {speakers['speaker_a']!r}"
        )
    return speakers


def _locomo_sessions(conv: dict[str, Any], speakers: dict[str, str], where: str) -> list[Session]:
    """The conversation's session_N, in the order of their dates (then N)."""
    roles: dict[str, Literal["user", "assistant"]] = {
        speakers["speaker_a"]: "user",
        speakers["speaker_b"]: "assistant",
    }
    sessions: list[tuple[int, Session]] = []
    for key, value in conv.items():
        m = _SESSION_KEY.match(key)
        if not m:
            continue
        date_text = conv.get(f"{key}_date_time")
        if not isinstance(date_text, str):
            raise BenchmarkFileError(f"{where}: conversation.{key}_date_time is missing")
        try:
            start = parse_date(date_text)
        except ValueError as exc:
            raise BenchmarkFileError(f"{where}: conversation.{key}_date_time: {exc}") from None
        if not isinstance(value, list):
            raise BenchmarkFileError(f"{where}: conversation.{key} is not a list of turns")
        session = Session(source=key, date_text=date_text, start=start)
        for t, raw_turn in enumerate(value):
            session.turns.append(
                _locomo_turn(raw_turn, roles, speakers, f"{where}: conversation.{key}[{t}]")
            )
        sessions.append((int(m.group(1)), session))
    if not sessions:
        raise BenchmarkFileError(f"{where}: the conversation has no session_N")
    return [s for _, s in sorted(sessions, key=lambda ns: (ns[1].start, ns[0]))]


def _locomo_turn(
    raw_turn: Any,
    roles: dict[str, Literal["user", "assistant"]],
    speakers: dict[str, str],
    where: str,
) -> Turn:
    """One turn of a session, as "Speaker: text" in the speaker's role."""
    try:
        turn = LoCoMoTurn.model_validate(raw_turn)
    except ValidationError as exc:
        raise BenchmarkFileError(_where(exc, where)) from None
    role = roles.get(turn.speaker.strip())
    if role is None:
        raise BenchmarkFileError(
            f"{where}: speaker {turn.speaker!r} is neither "
            f"speaker_a ({speakers['speaker_a']!r}) nor "
            f"speaker_b ({speakers['speaker_b']!r})"
        )
    content = f"{turn.speaker.strip()}: {turn.text.strip()}".rstrip()
    if turn.blip_caption:
        content += f" [shares a photo: {turn.blip_caption.strip()}]"
    return Turn(role, content, turn.dia_id)


def _locomo_questions(sample: LoCoMoSample, cid: str, where: str) -> list[Question]:
    questions = []
    for n, qa in enumerate(sample.qa):
        if qa.category not in LOCOMO_CATEGORIES:
            raise BenchmarkFileError(
                f"{where}: qa[{n}]: category {qa.category} is not one of LoCoMo's 1-5"
            )
        if qa.answer is None and qa.category != 5:
            raise BenchmarkFileError(f"{where}: qa[{n}]: the answer is missing")
        gold = NOT_MENTIONED if qa.answer is None else _text(qa.answer)
        questions.append(
            Question(
                id=f"{cid}/{n}",
                conversation=cid,
                category=LOCOMO_CATEGORIES[qa.category],
                question=qa.question,
                gold=gold,
                evidence=list(qa.evidence),
            )
        )
    return questions


def _longmemeval(items: Sequence[Any]) -> Benchmark:
    conversations: list[Conversation] = []
    questions: list[Question] = []
    for i, raw in enumerate(items):
        try:
            item = LongMemEvalItem.model_validate(raw)
        except ValidationError as exc:
            qid = raw.get("question_id") if isinstance(raw, dict) else None
            raise BenchmarkFileError(
                _where(exc, f"questions[{i}]" + (f" ({qid})" if qid else ""))
            ) from None
        where = f"questions[{i}] ({item.question_id})"
        ids = item.haystack_session_ids or [
            f"session-{n + 1}" for n in range(len(item.haystack_sessions))
        ]
        if not (len(ids) == len(item.haystack_dates) == len(item.haystack_sessions)):
            raise BenchmarkFileError(
                f"{where}: haystack_session_ids ({len(ids)}), haystack_dates "
                f"({len(item.haystack_dates)}) and haystack_sessions "
                f"({len(item.haystack_sessions)}) differ in length"
            )
        if not ids:
            raise BenchmarkFileError(f"{where}: the haystack is empty")
        sessions: list[tuple[int, Session]] = []
        for n, (sid, date_text, turns) in enumerate(
            zip(ids, item.haystack_dates, item.haystack_sessions, strict=True)
        ):
            try:
                start = parse_date(date_text)
            except ValueError as exc:
                raise BenchmarkFileError(f"{where}: haystack_dates[{n}]: {exc}") from None
            session = Session(source=sid, date_text=date_text, start=start)
            for t, turn in enumerate(turns, start=1):
                session.turns.append(
                    Turn(
                        turn.role, turn.content or "(empty message)", f"{sid}#{t}", turn.has_answer
                    )
                )
            sessions.append((n, session))
        # LongMemEval_S and _M list sessions by time; the oracle file does not: sort, stably.
        ordered = [s for _, s in sorted(sessions, key=lambda ns: (ns[1].start, ns[0]))]
        conversations.append(
            Conversation(
                item.question_id, f"LongMemEval {item.question_id}: a user's history", ordered
            )
        )
        category = item.question_type
        if item.question_id.endswith("_abs"):
            category += " (abstention)"
        questions.append(
            Question(
                id=item.question_id,
                conversation=item.question_id,
                category=category,
                question=item.question,
                gold=_text(item.answer),
                question_date=item.question_date,
                evidence=list(item.answer_session_ids),
            )
        )
    return Benchmark("longmemeval", conversations, questions)


# --- choosing what to run -------------------------------------------------------------------


def read_exclusions(path: Path) -> list[str]:
    """Question ids, one a line; blank lines and `#` comments are skipped."""
    ids: list[str] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        text = line.split("#", 1)[0].strip()
        if text:
            ids.append(text)
    return ids


@dataclass
class Selection:
    """What one run asks: the conversations to import, in file order, and their questions."""

    conversations: list[Conversation]
    asked: list[Question]
    excluded: list[Question]
    questions: list[Question]  # asked and excluded, in file order: what the run records


def select(benchmark: Benchmark, exclusions: Sequence[str], limit: int | None) -> Selection:
    """The first `limit` questions not excluded (all without a limit), the conversations they
    belong to, and the excluded questions of those conversations. Every id of the exclusion
    list must name a question of the file: an id that names none is a typo or another
    numbering, and would silently exclude nothing."""
    known = {q.id for q in benchmark.questions}
    unknown = [x for x in exclusions if x not in known]
    if unknown:
        shown = ", ".join(repr(x) for x in unknown[:5]) + (" ..." if len(unknown) > 5 else "")
        example = benchmark.questions[0].id
        raise BenchmarkFileError(
            f"{len(unknown)} id(s) of the exclusion list name no question of the file: {shown} "
            f"(ids look like {example!r})"
        )
    excluded_ids = set(exclusions)
    asked = [q for q in benchmark.questions if q.id not in excluded_ids]
    if limit is not None:
        asked = asked[:limit]
    wanted = {q.conversation for q in asked}
    conversations = [c for c in benchmark.conversations if c.id in wanted]
    excluded = [q for q in benchmark.questions if q.id in excluded_ids and q.conversation in wanted]
    recorded = {q.id for q in asked} | {q.id for q in excluded}
    questions = [q for q in benchmark.questions if q.id in recorded]
    return Selection(conversations, asked, excluded, questions)


# --- the import file ------------------------------------------------------------------------


def _stamp(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class Placed:
    """One conversation as an import file, and where each session and turn landed."""

    thread: str
    text: str
    sessions: list[dict[str, Any]]  # [{"ordinal", "source", "date"}]
    turns: list[dict[str, Any]]  # [{"generation", "position", "source", "has_answer"}]
    messages: int


def import_file_text(conversation: Conversation, thread: str) -> Placed:
    """The conversation as Ember JSONL: one `side` thread, a generation per session, a message
    per turn; every session's generation is ended and the thread is `ended`, so both pipelines
    may read all of it at once."""
    records: list[dict[str, Any]] = []
    sessions: list[dict[str, Any]] = []
    turns: list[dict[str, Any]] = []
    clock = conversation.sessions[0].start
    thread_record = {
        "type": "thread",
        "id": thread,
        "kind": "side",
        "title": conversation.title,
        "status": "ended",
        "created_at": _stamp(clock),
    }
    records.append(thread_record)
    count = 0
    for ordinal, session in enumerate(conversation.sessions, start=1):
        started = max(session.start, clock)
        clock = started
        rows: list[dict[str, Any]] = []
        for position, turn in enumerate(session.turns, start=1):
            row: dict[str, Any] = {
                "type": "message",
                "thread": thread,
                "generation": ordinal,
                "role": turn.role,
                "content": turn.content,
                "created_at": _stamp(clock),
            }
            if turn.role == "user":
                row["author"] = "human"
            rows.append(row)
            turns.append(
                {
                    "generation": ordinal,
                    "position": position,
                    "source": turn.source,
                    "has_answer": turn.has_answer,
                }
            )
            clock += TURN_SPACING
        records.append(
            {
                "type": "generation",
                "thread": thread,
                "ordinal": ordinal,
                "started_at": _stamp(started),
                "ended_at": _stamp(clock),
            }
        )
        records.extend(rows)
        count += len(rows)
        sessions.append({"ordinal": ordinal, "source": session.source, "date": session.date_text})
    lines = [json.dumps({"format": "ember", "version": 1})]
    lines += [json.dumps(r, ensure_ascii=False, separators=(",", ":")) for r in records]
    return Placed(thread, "\n".join(lines) + "\n", sessions, turns, count)
