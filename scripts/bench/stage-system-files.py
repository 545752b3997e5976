#!/usr/bin/env python3
"""Copies real files of this system (/usr/share and /usr/lib, no locales,
none over 8 MiB) under DIR, keeping their paths, until LIMIT bytes: the
realistic data the image, decode and gui benchmarks put on a filesystem.
Usage: stage-system-files.py DIR LIMIT"""
import os, shutil, sys
dst, limit, tot = sys.argv[1], int(sys.argv[2]), 0
for root in ["/usr/share", "/usr/lib"]:
    for d, dirs, files in os.walk(root):
        dirs.sort(); files.sort()
        if "/locale" in d: continue
        for f in files:
            p = os.path.join(d, f)
            if os.path.islink(p) or not os.path.isfile(p): continue
            s = os.path.getsize(p)
            if s > 8 << 20 or tot + s > limit: continue
            q = dst + p
            os.makedirs(os.path.dirname(q), exist_ok=True)
            try: shutil.copyfile(p, q)
            except OSError: continue
            tot += s
