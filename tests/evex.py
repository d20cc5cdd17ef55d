"""Find AVX-512 instructions in a shared object, by function, from its disassembly.

A build host with AVX-512 runs a library compiled for it without complaint; a CPU without it
dies on the first such instruction (SIGILL). So the check reads the machine code instead of
running it: every EVEX-encoded instruction (in 64-bit mode the byte 0x62 in opcode position
always starts one: BOUND, its 32-bit meaning, does not exist there) and every instruction on an
opmask register (%k0-%k7: AVX-512's own, VEX-encoded) counts, attributed to the function
objdump names it under.

A library may still carry AVX-512 code it calls only after asking the CPU (pgvector does, for
its popcount-based bit distances): such functions are named by the caller and left out.

Run as a script to check any file: `python tests/evex.py path/to/vector.so`.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

# Prefixes that may precede an EVEX instruction's 0x62 (address size, segment overrides);
# 66/F2/F3/REX before EVEX are invalid, so they never hide one.
_PREFIXES = frozenset({"67", "26", "2e", "36", "3e", "64", "65"})
_FUNCTION = re.compile(r"^[0-9a-f]+ <(?P<name>[^>]+)>:$")
_INSTRUCTION = re.compile(r"^\s*[0-9a-f]+:\t(?P<bytes>(?:[0-9a-f]{2} )+)\s*\t(?P<text>.*)$")
_OPMASK = re.compile(r"%k[0-7]\b")


class DisassemblerMissing(RuntimeError):
    pass


def avx512_by_function(path: Path) -> Counter[str]:
    """How many AVX-512 instructions each function of `path` holds (functions with none are
    absent)."""
    objdump = shutil.which("objdump")
    if objdump is None:
        raise DisassemblerMissing("objdump is missing: `make setup` installs Debian's binutils")
    # --insn-width=16 keeps every instruction's bytes on its own line (15 bytes at most).
    out = subprocess.run(
        [objdump, "-d", "--insn-width=16", str(path)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    found: Counter[str] = Counter()
    function = "?"
    for line in out.splitlines():
        header = _FUNCTION.match(line)
        if header:
            function = header["name"]
            continue
        insn = _INSTRUCTION.match(line)
        if not insn:
            continue
        code = insn["bytes"].split()
        i = 0
        while i < len(code) and code[i] in _PREFIXES:
            i += 1
        if (i < len(code) and code[i] == "62") or _OPMASK.search(insn["text"]):
            found[function.split("+", 1)[0]] += 1
    return found


def undispatched(found: Counter[str], dispatched: re.Pattern[str]) -> dict[str, int]:
    """The functions holding AVX-512 code whose name does not say they are runtime-dispatched."""
    return {name: n for name, n in sorted(found.items()) if not dispatched.search(name)}


# pgvector's functions compiled for AVX-512 behind a CPU check carry it in their names
# (BitHammingDistanceAvx512Popcount, ...); PostgreSQL's own do too (pg_popcount_avx512, ...).
DISPATCHED = re.compile(r"avx512", re.IGNORECASE)


def main(argv: list[str]) -> int:
    bad_total = 0
    for arg in argv:
        found = avx512_by_function(Path(arg))
        bad = undispatched(found, DISPATCHED)
        bad_total += len(bad)
        print(f"{arg}: {len(found)} functions with AVX-512, {len(bad)} not runtime-dispatched")
        for name, n in bad.items():
            print(f"  {name}: {n}")
    return 1 if bad_total else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
