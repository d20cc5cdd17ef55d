"""`ember explain FACT_ID`: ember.explain_fact() laid out for a terminal.

The document is built in SQL; this module only arranges it as lines of text, so what a person
reads on a terminal and what a program reads from explain_fact() are the same facts.
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
        return lines
    return [
        f"{pointer.get('ordinal')}. generation {pointer.get('generation_id')} of "
        f"{pointer.get('thread')} (#{pointer.get('generation_ordinal')}, "
        f"{pointer.get('rows')} rows), started {_when(pointer.get('at'))}"
    ]


def format_explanation(doc: dict[str, Any]) -> str:
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

    merged = doc.get("merged_from") or []
    if merged:
        lines.append("merged from:")
        for source in merged:
            text = source.get("text") if source.get("text") is not None else "(text forgotten)"
            lines.append(f"  fact {source['fact']} ({source['status']}): {text}")

    lines.append("history:")
    for row in doc.get("history") or []:
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
            parts.append(f"by forget #{forgetting['id']}: {forgetting['reason']}")
        lines.append(" ".join(parts))
    return "\n".join(lines)
