#!/usr/bin/env python3
"""interleave.py with caps, for peers too slow to run many times: times
commands round-robin (each round runs every command still due once, in an
order rotated per round), with PREPARE (a shell command) before each run,
outside the timing.

usage: interleave-capped.py [--warm NAME] [--check CMD] [--log FILE]
                            RUNS PREPARE NAME[/RUNS][@SECONDS]=COMMAND...

  NAME/1=...      runs this command in the first round only (RUNS caps it)
  NAME@300=...    kills it (its process group) after 300 s; the run is then
                  a lower bound, printed as ">=300.0 s"
  --warm NAME     one untimed run of NAME (after PREPARE) before round 1,
                  to warm the source's caches (interleave.py warms with a
                  whole untimed round, which the slow peers cannot afford)
  --check CMD     a shell command run after every run, outside the timing;
                  its stdout (e.g. the count of files copied) is logged
  --log FILE      appends one JSON line per run as it ends, so a long matrix
                  cut short keeps what it measured

Prints per command the median wall time (a lower bound if any of its runs
hit the cap: the median of the runs, each at least its figure), the CPU
median (user + system of the command and its children), the runs, and a
last line of medians as NAME=ms (">=" for a bound). Commands are split on
spaces (no shell). A command that exits non-zero is reported, not timed."""
import json, os, signal, statistics, subprocess, sys, time

args = sys.argv[1:]
warm = check = log = None
while args and args[0].startswith("--"):
    opt, val, args = args[0], args[1], args[2:]
    if opt == "--warm":
        warm = val
    elif opt == "--check":
        check = val
    elif opt == "--log":
        log = val
    else:
        sys.exit(f"unknown option {opt}")
runs, prepare = int(args[0]), args[1]
cmds = []
for spec in args[2:]:
    head, cmd = spec.split("=", 1)
    cap = None
    if "@" in head:
        head, c = head.split("@", 1)
        cap = float(c)
    n = runs
    if "/" in head:
        head, r = head.split("/", 1)
        n = min(runs, int(r))
    cmds.append((head, n, cap, cmd))
res = {name: [] for name, *_ in cmds}


def run(name, cap, cmd, rnd):
    subprocess.run(prepare, shell=True, check=True)
    before = os.times()
    t = time.perf_counter()
    p = subprocess.Popen(cmd.split(), stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, start_new_session=True)
    capped = False
    try:
        _, err = p.communicate(timeout=cap)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        _, err = p.communicate()
        capped = True
    t = time.perf_counter() - t
    after = os.times()
    cpu = (after.children_user + after.children_system
           - before.children_user - before.children_system)
    checked = None
    if check and not capped:
        checked = subprocess.run(check, shell=True, capture_output=True,
                                 text=True).stdout.strip()
    rec = {"round": rnd, "name": name, "cmd": cmd, "wall_s": round(t, 3),
           "cpu_s": round(cpu, 3), "exit": p.returncode, "capped": capped,
           "check": checked,
           "stderr_tail": err.decode(errors="replace")[-300:] if p.returncode else ""}
    if log and rnd:
        with open(log, "a") as f:
            f.write(json.dumps(rec) + "\n")
    mark = f">={t:.1f} s (cap)" if capped else f"{t:.2f} s"
    print(f"  round {rnd} {name}: {mark} exit {p.returncode} check {checked}",
          file=sys.stderr, flush=True)
    return rec


w = next((c for c in cmds if c[0] == warm), None)
if w:
    run(w[0], w[2], w[3], 0)
for r in range(1, runs + 1):
    due = [c for c in cmds if c[1] >= r]
    k = (r - 1) % len(due)
    for name, _, cap, cmd in due[k:] + due[:k]:
        res[name].append(run(name, cap, cmd, r))

line = []
for name, *_ in cmds:
    rs = res[name]
    ok = [x for x in rs if x["capped"] or x["exit"] == 0]
    if not ok:
        print(f"{name:>10}: failed ({', '.join(str(x['exit']) for x in rs)})", file=sys.stderr)
        line.append(f"{name}=failed")
        continue
    w = statistics.median(x["wall_s"] for x in ok)
    bound = any(x["capped"] for x in ok)
    c = statistics.median(x["cpu_s"] for x in ok)
    runs_s = ", ".join(("≥" if x["capped"] else "") + f"{x['wall_s']:.2f}" for x in ok)
    print(f"{name:>10}: wall median {'>=' if bound else ''}{w:.2f} s over {len(ok)} "
          f"({runs_s}); CPU median {c:.2f} s", file=sys.stderr)
    line.append(f"{name}={'>=' if bound else ''}{w * 1000:.0f}ms")
print("  ".join(line), flush=True)
