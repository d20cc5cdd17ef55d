"""`ember explain ID`: ember.explain_fact(), or the analyst's comparison_explain_fact() and
comparison_explain_proposal(), laid out for a terminal.

The document is built in SQL; this module only arranges it as lines of text, so what a person
reads on a terminal and what a program reads from the function are the same facts. The analyst's
documents use the host's keys, plus a "comparison" part, so one layout reads all three.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any


def _when(value: Any) -> str:
    if not isinstance(value, str):
        return "?"
    try:
        at = datetime.fromisoformat(value)
    except ValueError:
        return value
    return at.strftime("%Y-%m-%d %H:%M:%S %Z").strip()


def _pointer(pointer: dict[str, Any]) -> list[str]:
    if pointer.get("malformed") is not None:
        return [f"{pointer.get('ordinal')}. malformed pointer: {pointer['malformed']}"]
    if pointer.get("found") is False:
        name = pointer.get("message_id") or pointer.get("generation_id")
        return [f"{pointer.get('ordinal')}. {name}: names no row"]
    if pointer.get("isolated") and "thread" not in pointer:
        # The analyst's form: an isolated thread's row is named as such and nothing more.
        return [f"{pointer.get('ordinal')}. a row of an isolated thread: never shown"]
    if "message_id" in pointer:
        head = (
            f"{pointer.get('ordinal')}. m:{pointer['message_id']} in {pointer.get('thread')}, "
            f"{pointer.get('role')}({pointer.get('author')}), {_when(pointer.get('at'))}"
        )
        if pointer.get("forgotten"):
            head += " [forgotten]"
        lines = [head]
        if pointer.get("isolated"):
            lines.append("     (isolated thread: not shown)")
        elif pointer.get("rendered"):
            lines.append(f"     {pointer['rendered']}")
        if pointer.get("unread_reason"):
            lines.append(f"     (shadow never reads this row: {pointer['unread_reason']})")
        return lines
    return [
        f"{pointer.get('ordinal')}. generation {pointer.get('generation_id')} of "
        f"{pointer.get('thread')} (#{pointer.get('generation_ordinal')}, "
        f"{pointer.get('rows')} rows), started {_when(pointer.get('at'))}"
    ]


def _ids(values: list[Any]) -> str:
    return ", ".join(str(v) for v in values) or "none"


def _comparison(doc: dict[str, Any]) -> list[str]:
    """How the item fares in the comparison (the analyst's documents only)."""
    c = doc.get("comparison")
    if not c:
        return []
    other = "proposal" if doc.get("item") == "fact" else "fact"
    lines = [f"comparison: {c.get('agreement')}" + ("" if c.get("judged") else " (not judged)")]
    for t in c.get("threads") or []:
        head = f"  in {t['thread']}: "
        if t.get("excluded_reason"):
            lines.append(head + f"not compared ({t['excluded_reason']})")
            continue
        read = ", ".join(t.get("read_by_shadow") or []) or "not yet"
        neighbours = [n[other] for n in t.get("evidence") or []]
        lines.append(
            head + f"read by shadow: {read}; exact: {_ids(t.get('exact') or [])}; "
            f"evidence neighbours: {_ids(neighbours)}"
        )
    if doc.get("item") == "proposal":
        neighbours = [n["fact"] for n in c.get("evidence") or []]
        lines.append(
            f"  exact: {_ids(c.get('exact') or [])}; evidence neighbours: {_ids(neighbours)}"
        )
    semantic = [f"{s[other]} (judge run {s['judge_run']})" for s in c.get("semantic") or []]
    lines.append(f"  semantic pairs: {_ids(semantic)}")
    return lines


def format_proposal(doc: dict[str, Any]) -> str:
    p = doc["proposal"]
    run = doc.get("run") or {}
    lines = [f"proposal {p['id']} [{p.get('evidence_kind')}] {p['status']} in {p['thread']}"]
    lines.append(f"  {p['text']}" if p.get("text") is not None else "  (text forgotten)")
    if p.get("rejection"):
        lines.append(f"  rejected: {p['rejection']}")
    if p.get("categories"):
        lines.append(f"  labels: {', '.join(p['categories'])}")
    lines.append(
        f"  proposed by {run.get('path')} run {run.get('id')}, {run.get('model')} "
        f"({run.get('status')}), {_when(p.get('created_at'))}"
    )
    lines.append("evidence:")
    for pointer in doc.get("evidence") or []:
        lines.extend(f"  {line}" for line in _pointer(pointer))
    if not doc.get("evidence"):
        lines.append("  (no pointers)")
    lines.extend(_comparison(doc))
    return "\n".join(lines)


def format_explanation(doc: dict[str, Any]) -> str:
    if doc.get("item") == "proposal":
        return format_proposal(doc)
    lines = _fact_head(doc)
    lines.append("evidence:")
    evidence = doc.get("evidence") or []
    if not evidence:
        lines.append("  (no pointers left)")
    for pointer in evidence:
        lines.extend(f"  {line}" for line in _pointer(pointer))

    acceptance = doc.get("acceptance")
    if acceptance:
        lines.append(
            f"acceptance: conclusion m:{acceptance['conclusion']['message_id']} accepted by "
            f"m:{acceptance['acceptance']['message_id']} "
            f"({_when(acceptance['acceptance'].get('at'))})"
        )
    lines.extend(_merged_from(doc.get("merged_from") or []))
    lines.append("history:")
    lines.extend(_history_line(row) for row in doc.get("history") or [])
    lines.extend(_comparison(doc))
    return "\n".join(lines)


def _fact_head(doc: dict[str, Any]) -> list[str]:
    """The fact's id, kind, status, text, labels and the run that wrote it."""
    fact = doc["fact"]
    status = fact["status"]
    if fact.get("merged_into"):
        status += f" into fact {fact['merged_into']}"
    if fact.get("retired_reason"):
        status += f": {fact['retired_reason']}"
    lines = [f"fact {fact['id']} [{fact['evidence_kind']}] {status}"]
    lines.append(f"  {fact['text']}" if fact.get("text") is not None else "  (text forgotten)")
    if fact.get("categories"):
        lines.append(f"  labels: {', '.join(fact['categories'])}")
    run = doc.get("run")
    if run:
        model = f", {run['model']}" if run.get("model") else ""
        lines.append(f"  written by run {run['id']}{model}")
    else:
        lines.append("  written by: no run recorded")
    lines.append(f"  written {_when(fact.get('created_at'))}")
    return lines


def _merged_from(merged: list[dict[str, Any]]) -> list[str]:
    if not merged:
        return []
    lines = ["merged from:"]
    for source in merged:
        if source.get("hidden"):
            text = "(it cites an isolated thread: not shown)"
        elif source.get("text") is None:
            text = "(text forgotten)"
        else:
            text = source["text"]
        lines.append(f"  fact {source['fact']} ({source['status']}): {text}")
    return lines


def _history_line(row: dict[str, Any]) -> str:
    parts = [f"  {_when(row.get('at'))}  {row['change']} -> {row['status']}"]
    if row.get("merged_into"):
        parts.append(f"into fact {row['merged_into']}")
    if row.get("retired_reason"):
        parts.append(f"({row['retired_reason']})")
    if row.get("evidence_removed"):
        removed = ", ".join(
            f"m:{p['message_id']}" if "message_id" in p else f"generation {p['generation_id']}"
            for p in row["evidence_removed"]
        )
        parts.append(f"removed {removed}")
    if row.get("detail"):
        parts.append(f"[{row['detail']}]")
    if row.get("run"):
        parts.append(f"by run {row['run']}")
    forgetting = row.get("forgetting")
    if forgetting:
        reason = f": {forgetting['reason']}" if forgetting.get("reason") else ""
        parts.append(f"by forget #{forgetting['id']}{reason}")
    return " ".join(parts)
