"""`ember import FILE` and `ember export`: threads, generations and messages as JSONL."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ember.commands.base import EXIT_REJECTED

# Rejected lines listed one by one; past this many, the rest are counted. A file of millions of
# bad lines would otherwise bury the summary, and the first few name what is wrong with it.
LISTED_REJECTIONS = 1000


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    imp = sub.add_parser(
        "import", parents=[common], help="import threads and messages from Ember JSONL"
    )
    imp.add_argument("file", help="the JSONL file (docs/import-format.md)")
    imp.add_argument(
        "--partial",
        action="store_true",
        help="import the valid lines and report the rejected ones (exit 10 if any)",
    )
    imp.set_defaults(run=run_import)

    exp = sub.add_parser(
        "export", parents=[common], help="write every thread and message as Ember JSONL"
    )
    exp.add_argument("--output", "-o", default="-", help="file to write (default: stdout)")
    exp.add_argument(
        "--facts",
        action="store_true",
        help="write the facts instead, with evidence pointers and history (docs/export-facts.md)",
    )
    exp.set_defaults(run=run_export)


def run_import(args: argparse.Namespace) -> int:
    from ember.commands.base import migrated_url, readable_file

    path = readable_file(args.file)
    url = migrated_url()

    import psycopg

    from ember.transfer import ImportFileError
    from ember.transfer import run_import as import_into

    try:
        with psycopg.connect(url) as conn:
            result = import_into(conn, path, partial=args.partial)
    except ImportFileError as exc:
        print(f"ember import: {args.file}: {exc}", file=sys.stderr)
        return EXIT_REJECTED
    for line, reason in result.rejected[:LISTED_REJECTIONS]:
        print(f"{args.file}:{line}: {reason}", file=sys.stderr)
    if len(result.rejected) > LISTED_REJECTIONS:
        print(
            f"ember import: {args.file}: {len(result.rejected) - LISTED_REJECTIONS} more "
            f"line(s) rejected, not listed (the first {LISTED_REJECTIONS} are)",
            file=sys.stderr,
        )
    if not result.written:
        print(
            f"ember import: {len(result.rejected)} line(s) rejected; nothing imported "
            "(--partial imports the valid lines)",
            file=sys.stderr,
        )
        return EXIT_REJECTED
    if result.sealed:
        print(
            f"sealed {len(result.sealed)} stored thread{'s' if len(result.sealed) > 1 else ''} "
            f"the file isolates: {', '.join(result.sealed)}"
        )
    # Counted as the file holds them: every record is either written or already present.
    print(
        f"imported {result.threads} threads, {result.generations} generations, "
        f"{result.messages} messages (already present: {result.threads_present} threads, "
        f"{result.generations_present} generations, {result.present} messages; "
        f"{len(result.rejected)} lines rejected)"
    )
    return EXIT_REJECTED if result.rejected else 0


def run_export(args: argparse.Namespace) -> int:
    from ember.commands.base import migrated_url, output, writable_target

    if args.output != "-":
        writable_target(args.output)
    url = migrated_url()

    import psycopg

    with psycopg.connect(url) as conn, output(args.output) as out:
        if args.facts:
            from ember.export_facts import export_facts_to

            count = export_facts_to(conn, out)
            what = "facts"
        else:
            from ember.transfer import export_to

            count = export_to(conn, out)
            what = "records"
    if args.output != "-":
        print(f"exported {count} {what} to {args.output}", file=sys.stderr)
    return 0
