#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Compile-time diagnostics and header hygiene checks for linstate (STYLE habits 7 and 9).

Usage:
  check.py [--expect REGEX] [--negate] SOURCE.cpp -- COMPILER [FLAGS...]
      Compiles SOURCE with `COMPILER FLAGS -fsyntax-only`. The expectation is the first line of
      SOURCE, `// expect: <regex>` (or --expect, which overrides it):
        * `compiles`: the compilation must succeed;
        * anything else: the compilation must FAIL and one diagnostic line that contains "error"
          must match the regex (Python `re.search`), i.e. it failed for the expected reason.
  check.py --header linstate/x.hpp [--negate] -- COMPILER [FLAGS...]
      Writes a translation unit that includes the header twice (self-containment and include
      guard) and expects it to compile.
  check.py --list-headers INCLUDE_DIR
      Prints every `linstate/**/*.hpp` under INCLUDE_DIR, one per line, sorted (for meson.build).
  check.py --headers-listed INCLUDE_DIR -- HEADER...
      Fails when the headers on disk differ from the list meson.build was configured with.

--negate inverts a clean verdict (for the driver's own tests: a check that must be rejected).
Exit status: 0 pass, 1 fail, 2 usage or environment error (never inverted). The first line of
the output is always a one-line reason; on failure, the command and the start of the compiler
output follow.
"""

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

EXPECT_PREFIX = "// expect:"
TIMEOUT_S = 300
EXCERPT_LINES = 20


def usage(msg):
    print(f"ERROR: {msg} (usage: see the docstring of {__file__})")
    sys.exit(2)


def split_args(argv):
    if "--" not in argv:
        usage("missing `--` before the compiler command")
    i = argv.index("--")
    return argv[:i], argv[i + 1:]


def read_expectation(source):
    try:
        with open(source, encoding="utf-8") as f:
            first = f.readline().strip()
    except OSError as e:
        usage(f"cannot read {source}: {e}")
    if not first.startswith(EXPECT_PREFIX):
        usage(f"{source}: the first line must be `{EXPECT_PREFIX} <regex>` or `{EXPECT_PREFIX} compiles`")
    expect = first[len(EXPECT_PREFIX):].strip()
    if not expect:
        usage(f"{source}: empty expectation after `{EXPECT_PREFIX}`")
    return expect


def compile_syntax_only(compiler, source):
    cmd = list(compiler) + ["-fsyntax-only", "-fdiagnostics-color=never", str(source)]
    env = dict(os.environ, LC_ALL="C", LANG="C")  # plain ASCII quotes in diagnostics
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                           timeout=TIMEOUT_S, check=False)
    except FileNotFoundError:
        print(f"ERROR: compiler not found: {cmd[0]}")
        sys.exit(2)
    except subprocess.TimeoutExpired:
        print(f"ERROR: compiler did not finish within {TIMEOUT_S} s: {' '.join(cmd)}")
        sys.exit(2)
    return cmd, p.returncode, p.stdout.decode("utf-8", errors="replace")


def verdict(ok, reason, cmd=None, output="", negate=False):
    """Prints the one-line reason (and context on failure) and exits 0/1."""
    if negate:
        ok = not ok
        reason = ("as required by --negate, the check was rejected: " if ok
                  else "--negate: the check should have been rejected but passed: ") + reason
    print(("PASS: " if ok else "FAIL: ") + reason)
    if not ok and cmd is not None:
        print("command: " + " ".join(cmd))
        lines = output.splitlines()
        for line in lines[:EXCERPT_LINES]:
            print("  | " + line)
        if len(lines) > EXCERPT_LINES:
            print(f"  | ... ({len(lines) - EXCERPT_LINES} more lines)")
    sys.exit(0 if ok else 1)


def check_source(source, expect, compiler, negate):
    name = Path(source).name
    if expect == "compiles":
        cmd, rc, out = compile_syntax_only(compiler, source)
        if rc == 0:
            verdict(True, f"{name} compiles, as expected", negate=negate)
        verdict(False, f"{name} was expected to compile but the compiler exited with {rc}", cmd, out, negate)
    try:
        rx = re.compile(expect)
    except re.error as e:
        usage(f"{name}: bad regex {expect!r}: {e}")
    cmd, rc, out = compile_syntax_only(compiler, source)
    if rc == 0:
        verdict(False, f"{name} compiled, but it must fail with a diagnostic matching /{expect}/", cmd, out, negate)
    error_lines = [ln for ln in out.splitlines() if "error" in ln]
    hit = next((ln for ln in error_lines if rx.search(ln)), None)
    if hit is None:
        verdict(False, f"{name} failed to compile (exit {rc}), but no error line matches /{expect}/", cmd, out,
                negate)
    verdict(True, f"{name} fails as expected: {hit.strip()[:200]}", negate=negate)


def list_headers(include_dir):
    root = Path(include_dir)
    if not (root / "linstate").is_dir():
        usage(f"{include_dir} has no linstate/ folder")
    return sorted(p.relative_to(root).as_posix() for p in (root / "linstate").rglob("*.hpp"))


def main(argv):
    if len(argv) >= 2 and argv[0] == "--list-headers":
        print("\n".join(list_headers(argv[1])))
        return 0
    if argv and argv[0] == "--headers-listed":
        opts, listed = split_args(argv)
        if len(opts) != 2:
            usage("--headers-listed takes INCLUDE_DIR")
        on_disk, listed = set(list_headers(opts[1])), set(listed)
        missing, gone = sorted(on_disk - listed), sorted(listed - on_disk)
        if missing or gone:
            verdict(False, "the header list is stale; run `meson setup --reconfigure` (not tested: "
                    f"{', '.join(missing) or '-'}; removed: {', '.join(gone) or '-'})")
        verdict(True, f"all {len(on_disk)} headers under {opts[1]}/linstate have a self-containment test")

    opts, compiler = split_args(argv)
    if not compiler:
        usage("no compiler command after `--`")
    expect, header, negate, source = None, None, False, None
    it = iter(opts)
    for a in it:
        if a == "--expect":
            expect = next(it, None)
        elif a == "--header":
            header = next(it, None)
        elif a == "--negate":
            negate = True
        elif a.startswith("--"):
            usage(f"unknown option {a}")
        elif source is None:
            source = a
        else:
            usage(f"more than one source: {source}, {a}")
    if header is not None:
        if source is not None:
            usage("--header takes no source file")
        with tempfile.TemporaryDirectory() as tmp:
            tu = Path(tmp) / ("header_" + re.sub(r"[^A-Za-z0-9]", "_", header) + ".cpp")
            tu.write_text(f"// expect: compiles\n#include <{header}>\n#include <{header}>\n", encoding="utf-8")
            cmd, rc, out = compile_syntax_only(compiler, tu)
            if rc == 0:
                verdict(True, f"<{header}> compiles on its own and survives a second inclusion", negate=negate)
            verdict(False, f"<{header}> does not compile on its own (exit {rc})", cmd, out, negate)
    if source is None:
        usage("no source file")
    if expect is None:
        expect = read_expectation(source)
    check_source(source, expect, compiler, negate)
    return 2  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
