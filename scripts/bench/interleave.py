#!/usr/bin/env python3
"""Times commands round-robin: each round runs every command once, in an
order rotated per round, with PREPARE (a shell command) before each run,
outside the timing. Drift on a noisy machine then lands on every command
alike instead of on whichever hyperfine happened to run during it.

usage: interleave.py RUNS PREPARE NAME=COMMAND...
Prints, per command, the median wall time and the median CPU time (user +
system of the command and its children), then one line of medians as
NAME=ms, for scripts. Commands are split on spaces (no shell)."""
import os, statistics, subprocess, sys, time

runs, prepare = int(sys.argv[1]), sys.argv[2]
cmds = [a.split("=", 1) for a in sys.argv[3:]]
wall = {n: [] for n, _ in cmds}
cpu = {n: [] for n, _ in cmds}
for r in range(runs + 1):  # round 0 warms up and is not counted
    order = cmds[r % len(cmds):] + cmds[:r % len(cmds)]
    for name, cmd in order:
        subprocess.run(prepare, shell=True, check=True)
        before = os.times()
        t = time.perf_counter()
        subprocess.run(cmd.split(), check=True, stdout=subprocess.DEVNULL)
        t = time.perf_counter() - t
        after = os.times()
        if r:
            wall[name].append(t)
            cpu[name].append(after.children_user + after.children_system
                             - before.children_user - before.children_system)
for name, _ in cmds:
    w, c = wall[name], cpu[name]
    print(f"{name:>12}: wall median {statistics.median(w) * 1000:7.1f} ms "
          f"(min {min(w) * 1000:.1f}, max {max(w) * 1000:.1f}); "
          f"CPU median {statistics.median(c) * 1000:7.1f} ms", file=sys.stderr)
print("  ".join(f"{n}={statistics.median(wall[n]) * 1000:.0f}ms" for n, _ in cmds))
