#!/usr/bin/env python3
"""Tables of shares.sh's runs: reads the JSON lines it logged (LOG,
by default W/runs.jsonl) and prints one Markdown row per cell: each tool's
median wall time (">=" where a run hit its cap, a lower bound; "n/r" after
it when it ran fewer rounds than the most), then kopiru's default against
cp -r and fpsync (how many times faster) and against its best fixed -j
(best -j's time / default's: 1.00 is as fast, the target is >= 0.8), and,
where the log has `prev` (an earlier build's default), prev's time /
default's. Only the tools the log has get a column.

usage: shares-table.py RUNS.jsonl"""
import json, statistics, sys

order = ["default", "prev", "j2", "j8", "j32", "j64", "j128", "j256",
         "cp", "rsync", "fpsync", "rclone", "cpz"]
cells, cur = {}, None
for line in open(sys.argv[1]):
    r = json.loads(line)
    if "cell" in r:
        cur = cells.setdefault(r["cell"], {})
        continue
    if r["exit"] != 0 and not r["capped"]:
        cur.setdefault(r["name"], []).append(None)
        continue
    cur.setdefault(r["name"], []).append((r["wall_s"], r["capped"]))


def med(runs):
    ok = [x for x in runs or [] if x]
    if not ok:
        return None
    return statistics.median(w for w, _ in ok), any(c for _, c in ok), len(ok)


def fmt(m, most):
    if m is None:
        return "not run"
    w, capped, n = m
    s = (">= " if capped else "") + f"{w:.2f}"
    return s + (f" ({n})" if n < most else "")


def ratio(a, b, bound):
    if a is None or b is None:
        return "–"
    return (">= " if bound else "") + f"{a / b:.1f}×"


tools = [t for t in order if any(t in runs for runs in cells.values())]
has_prev = "prev" in tools
print("| cell | " + " | ".join(tools) + " | default vs cp -r | vs fpsync | best -j / default |"
      + (" prev / default |" if has_prev else ""))
print("|" + "---|" * (len(tools) + 4 + has_prev))
for cell, runs in cells.items():
    ms = {t: med(runs.get(t)) for t in order}
    most = max((m[2] for m in ms.values() if m), default=0)
    d = ms["default"]
    row = [fmt(ms[t], most) for t in tools]
    dw = d[0] if d else None
    cp, fp = ms["cp"], ms["fpsync"]
    js = [ms[t] for t in order if t[0] == "j" and ms[t] and not ms[t][1]]
    best = min((m[0] for m in js), default=None)
    row.append(ratio(cp and cp[0], dw, cp and cp[1]))
    row.append(ratio(fp and fp[0], dw, fp and fp[1]))
    row.append(f"{best / dw:.2f}" if best and dw else "–")
    if has_prev:
        pv = ms["prev"]
        row.append(f"{pv[0] / dw:.2f}" if pv and dw else "–")
    print(f"| {cell} | " + " | ".join(row) + " |")
