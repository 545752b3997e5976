#!/usr/bin/env python3
"""Holds docs/copy.md's "Differences from cp and rsync" to the peers' lists.

Every difference kopiru keeps on purpose is named in that section: each GNU
cp test filed `disk` in tests/peers/gnu-cp/list.tsv (as `gnu:TEST`), each
rsync test filed `disk` in tests/peers/rsync/list.tsv (as `rsync:TEST`) and
each `deliberate` row of tests/peers/oracle/differences.tsv (as `oracle:ID`).
This fails for one of those the section does not name, and for a name in the
section that is not one of those (a test filed otherwise, say `bug`, or gone;
an id that is a `known-bug` row, or no row at all). It also checks that the
lists are well formed and that the file's table of contents links the
section.

Usage: tests/peers/check-differences.py [--repo DIR]
Ends with one line: N passed, N failed, 0 skipped (one check per listed
entry, per name in the section, per list).
"""

import argparse
import os
import re
import sys

SECTION = "Differences from cp and rsync"
ANCHOR = "#differences-from-cp-and-rsync"
GNU_KINDS = {"pass", "option", "wording", "disk", "bug", "skip"}
GNU_USERS = {"root", "nobody", "both"}
RSYNC_KINDS = GNU_KINDS
ORACLE_STATUSES = {"deliberate", "known-bug"}
# A name in the section: `gnu:cp/x.sh`, `rsync:files-from`, `oracle:some-id`.
NAME = re.compile(r"`(gnu|rsync|oracle):([^`\s]+)`")


class Checks:
    def __init__(self):
        self.passed = 0
        self.failed = 0

    def check(self, ok, failure):
        if ok:
            self.passed += 1
        else:
            self.failed += 1
            print(f"FAIL: {failure}")


def rows(path, columns, checks, what):
    """The rows of a tab-separated list (comments and blank lines left out),
    each cut to COLUMNS fields; a row with fewer fails a check."""
    out = []
    bad = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip() or line.startswith("#"):
                continue
            fields = line.split("\t")
            if len(fields) < columns:
                bad.append(f"{path}:{number}: {len(fields)} columns, {columns} wanted: {line[:80]!r}")
                continue
            out.append((number, fields))
    for b in bad:
        checks.check(False, f"{what}: {b}")
    return out


def gnu_disk(path, checks):
    """The GNU cp tests filed `disk` (for root, nobody or both)."""
    disk = {}
    kinds = {}
    problems = []
    for number, (test, user, kind, *_) in rows(path, 4, checks, "gnu-cp list"):
        if user not in GNU_USERS or kind not in GNU_KINDS:
            problems.append(f"{path}:{number}: {test} {user} {kind}: unknown user or kind")
        kinds.setdefault(test, set()).add(kind)
        if kind == "disk":
            disk.setdefault(test, set()).add(user)
    checks.check(not problems, "gnu-cp list: " + "; ".join(problems))
    return disk, kinds


def rsync_disk(path, checks):
    disk = set()
    kinds = {}
    problems = []
    for number, (test, kind, *_) in rows(path, 3, checks, "rsync list"):
        if kind not in RSYNC_KINDS:
            problems.append(f"{path}:{number}: {test} {kind}: unknown kind")
        kinds.setdefault(test, set()).add(kind)
        if kind == "disk":
            disk.add(test)
    checks.check(not problems, "rsync list: " + "; ".join(problems))
    return disk, kinds


def oracle_deliberate(path, checks):
    """The ids of the oracle's `deliberate` rows (an id may have several)."""
    deliberate = set()
    statuses = {}
    problems = []
    for number, (row_id, status, *_) in rows(path, 4, checks, "oracle differences"):
        if status not in ORACLE_STATUSES:
            problems.append(f"{path}:{number}: {row_id}: unknown status {status!r}")
        statuses.setdefault(row_id, set()).add(status)
        if status == "deliberate":
            deliberate.add(row_id)
    for row_id, s in statuses.items():
        if len(s) > 1:
            problems.append(f"{row_id}: rows both deliberate and known-bug")
    checks.check(not problems, "oracle differences: " + "; ".join(problems))
    return deliberate, statuses


def section_text(path):
    """The section's text (to the next heading of its level or above), and
    the file's text before its first section (the table of contents)."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    heading = re.search(rf"^## {re.escape(SECTION)}[ \t]*$", text, re.M)
    first = re.search(r"^## ", text, re.M)
    preamble = text[:first.start()] if first else text
    if not heading:
        return None, preamble
    rest = text[heading.end():]
    following = re.search(r"^#{1,2} ", rest, re.M)
    return (rest[:following.start()] if following else rest), preamble


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."),
                        help="the repository (default: the one this script is in)")
    args = parser.parse_args()
    repo = os.path.normpath(args.repo)
    doc = os.path.join(repo, "docs", "copy.md")
    gnu_list = os.path.join(repo, "tests", "peers", "gnu-cp", "list.tsv")
    rsync_list = os.path.join(repo, "tests", "peers", "rsync", "list.tsv")
    oracle_rows = os.path.join(repo, "tests", "peers", "oracle", "differences.tsv")
    checks = Checks()

    missing = [p for p in (doc, gnu_list, rsync_list, oracle_rows) if not os.path.isfile(p)]
    if missing:
        for p in missing:
            checks.check(False, f"{p}: not there")
        print(f"{checks.passed} passed, {checks.failed} failed, 0 skipped")
        return 1

    gnu, gnu_kinds = gnu_disk(gnu_list, checks)
    rsync, rsync_kinds = rsync_disk(rsync_list, checks)
    oracle, oracle_statuses = oracle_deliberate(oracle_rows, checks)

    text, preamble = section_text(doc)
    checks.check(text is not None, f"{doc}: no section '## {SECTION}'")
    checks.check(f"]({ANCHOR})" in preamble,
                 f"{doc}: the table of contents has no link to ({ANCHOR})")
    if text is None:
        print(f"{checks.passed} passed, {checks.failed} failed, 0 skipped")
        return 1

    named = {"gnu": set(), "rsync": set(), "oracle": set()}
    for kind, name in NAME.findall(text):
        named[kind].add(name)

    # Each deliberate difference the lists file is named.
    for test in sorted(gnu):
        users = ", ".join(sorted(gnu[test]))
        checks.check(test in named["gnu"],
                     f"gnu-cp list: {test} ({users}) is filed disk, but docs/copy.md's "
                     f"'{SECTION}' does not name `gnu:{test}`")
    for test in sorted(rsync):
        checks.check(test in named["rsync"],
                     f"rsync list: {test} is filed disk, but docs/copy.md's "
                     f"'{SECTION}' does not name `rsync:{test}`")
    for row_id in sorted(oracle):
        checks.check(row_id in named["oracle"],
                     f"oracle differences: {row_id} is deliberate, but docs/copy.md's "
                     f"'{SECTION}' does not name `oracle:{row_id}`")

    # Each name in the section is such a difference.
    def filed(kinds):
        return ", ".join(sorted(kinds)) if kinds else "not in it"

    for test in sorted(named["gnu"]):
        checks.check(test in gnu, f"docs/copy.md names `gnu:{test}`, which the gnu-cp list files as "
                                  f"{filed(gnu_kinds.get(test, set()))}, not disk")
    for test in sorted(named["rsync"]):
        checks.check(test in rsync, f"docs/copy.md names `rsync:{test}`, which the rsync list files as "
                                    f"{filed(rsync_kinds.get(test, set()))}, not disk")
    for row_id in sorted(named["oracle"]):
        checks.check(row_id in oracle, f"docs/copy.md names `oracle:{row_id}`, which differences.tsv has as "
                                       f"{filed(oracle_statuses.get(row_id, set()))}, not deliberate")

    print(f"{checks.passed} passed, {checks.failed} failed, 0 skipped")
    return 1 if checks.failed else 0


if __name__ == "__main__":
    sys.exit(main())
