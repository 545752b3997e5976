#!/usr/bin/env python3
"""The peers as an oracle: random cases copied by GNU cp or rsync and by
`kopiru copy`, the results compared.

A case is made from a seed alone (same seed, same case): a source tree with
every kind of entry, a destination (absent, empty, or an older tree), and a
command drawn from the options both tools take. The case is built twice on
a loop-mounted ext4 (acl, user_xattr), the peer runs on one copy and kopiru
on the other, and the two sides are compared whole: the destination, the
source (which must never change) and everything beside them. Differences
listed in differences.tsv are accepted; any other fails the case, which
prints its seed and leaves a standalone replay script in the results
directory. See README.md beside this file.

Standard library only. Needs root (loop mount, chown, runs as nobody).
"""

import argparse
import base64
import errno
import fcntl
import fnmatch
import hashlib
import json
import multiprocessing
import os
import random
import re
import select
import shutil
import signal
import socket
import stat
import struct
import subprocess
import sys
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, '..', '..', '..'))
SIDE = b'@SIDE@'  # stands for the side's absolute path in absolute symlink targets
NOBODY = 65534
TIMEOUT = 10  # seconds, each tool run (a case takes well under one)
CI_SEEDS = (1, 2200)  # the fixed seeds of --ci: about 2,050 cases run, the rest skipped
# and these, each the only case of a known bug in seeds 1..6000 outside that range: with them every
# known-bug row of differences.tsv matches something in --ci, so that a fix shows as a stale row
CI_EXTRA_SEEDS = (4197, 4885, 5202, 5916)
FRESH = 'fresh'

# ---------------------------------------------------------------------------
# Option tables. One row per option: (group, tag, probability, peer args,
# kopiru args). Rows of one group exclude each other (their probabilities add
# up to at most 1; the rest is "none of them"). A peer-only row has kopiru
# args None; a kopiru-only row has peer args [] (and must change nothing).
# A row whose kopiru args today's kopiru rejects (probed with --help) makes
# every case that draws it SKIPPED, loudly, until kopiru takes it: adding an
# option kopiru gains later is one line here. The tag is what matchers in
# differences.tsv see (has:TAG).
# ---------------------------------------------------------------------------
CP_OPTIONS = [
    ('rec', '-r', .30, ['-r'], ['-r']),
    ('rec', '-R', .15, ['-R'], ['-R']),
    ('rec', '-a', .42, ['-a'], ['-a']),  # the other .13: no recursion option
    ('p', '-p', .20, ['-p'], ['-p']),
    ('pres', '--preserve=mode', .03, ['--preserve=mode'], ['--preserve=mode']),
    ('pres', '--preserve=timestamps', .03, ['--preserve=timestamps'], ['--preserve=timestamps']),
    ('pres', '--preserve=ownership', .02, ['--preserve=ownership'], ['--preserve=ownership']),
    ('pres', '--preserve=links', .02, ['--preserve=links'], ['--preserve=links']),
    ('pres', '--preserve=xattr', .03, ['--preserve=xattr'], ['--preserve=xattr']),
    ('pres', '--preserve=mode,timestamps', .02, ['--preserve=mode,timestamps'], ['--preserve=mode,timestamps']),
    ('pres', '--preserve=all', .02, ['--preserve=all'], ['--preserve=all']),
    ('pres', '--preserve', .01, ['--preserve'], ['--preserve']),
    ('deref', '-L', .08, ['-L'], ['-L']),
    ('deref', '-H', .08, ['-H'], ['-H']),
    ('deref', '-P', .02, ['-P'], ['-P']),
    ('deref', '-d', .01, ['-d'], ['-d']),
    ('clobber', '-n', .08, ['-n'], ['-n']),
    ('clobber', '-i', .06, ['-i'], ['-i']),
    ('u', '-u', .10, ['-u'], ['-u']),
    ('f', '-f', .05, ['-f'], ['-f']),
    ('backup', '-b', .02, ['-b'], ['-b']),
    ('backup', '--backup', .02, ['--backup'], ['--backup']),
    ('backup', '--backup=simple', .03, ['--backup=simple'], ['--backup=simple']),
    ('backup', '--backup=numbered', .03, ['--backup=numbered'], ['--backup=numbered']),
    ('backup', '--backup=none', .01, ['--backup=none'], ['--backup=none']),
    ('x', '-x', .06, ['-x'], ['-x']),
    ('sparse', '--sparse=always', .03, ['--sparse=always'], ['--sparse=always']),
    ('sparse', '--sparse=never', .03, ['--sparse=never'], ['--sparse=never']),
    ('reflink', '--reflink=auto', .02, ['--reflink=auto'], ['--reflink=auto']),
    ('reflink', '--reflink=never', .02, ['--reflink=never'], ['--reflink=never']),
    ('v', '-v', .05, ['-v'], ['-v']),
    # kopiru-only variations: the result must be the same
    ('k-sync', 'k:--sync=none', .04, [], ['--sync', 'none']),
    ('k-sync', 'k:--sync=file', .03, [], ['--sync', 'file']),
    ('k-j', 'k:-j1', .05, [], ['-j', '1']),
    ('k-method', 'k:--method=stream', .03, [], ['--method', 'stream']),
    # cp options kopiru does not take yet: skipped until it does
    ('l', '-l', .01, ['-l'], ['-l']),
    ('rmdest', '--remove-destination', .01, ['--remove-destination'], ['--remove-destination']),
    ('parents', '--parents', .01, ['--parents'], ['--parents']),
    ('nopres', '--no-preserve=mode', .005, ['--no-preserve=mode'], ['--no-preserve=mode']),
    ('nopres', '--no-preserve=timestamps', .005, ['--no-preserve=timestamps'], ['--no-preserve=timestamps']),
    ('suffix', '-S.bak', .005, ['-S', '.bak'], ['-S', '.bak']),
    ('s', '-s', .005, ['-s'], ['-s']),
]

RSYNC_OPTIONS = [
    ('base', '-a', .75, ['-a'], ['-a']),
    # rsync treats a source named on the command line as cp -R does (a symlink stays a link, a FIFO
    # is never read): kopiru's twin of that is -r (without it a named symlink is followed and a
    # named FIFO or device read, cp's rule)
    ('base', '-rlt', .12, ['-rlt'], ['-r']),
    ('base', '-r', .13, ['-r'], ['-r']),
    # rsync -a keeps no hard links, ACLs or xattrs; kopiru -a keeps all three
    ('H', '-H', .5, ['-H'], None),
    ('A', '-A', .5, ['-A'], None),
    ('X', '-X', .5, ['-X'], None),
    ('delete', '--delete', .30, ['--delete'], ['--delete']),
    ('u', '-u', .10, ['-u'], ['-u']),
    ('c', '-c', .15, ['-c'], ['-c']),
    ('ign', '--ignore-existing', .08, ['--ignore-existing'], ['-n']),
    ('backup', '--backup', .08, ['--backup'], ['--backup=simple']),
    ('ld', '--link-dest', .12, ['--link-dest=../ld'], ['--link-dest', '../ld']),
    ('x', '-x', .04, ['-x'], ['-x']),
    ('L', '-L', .05, ['-L'], ['-L']),
    ('S', '-S', .10, ['-S'], None),
    ('k-sync', 'k:--sync=none', .04, [], ['--sync', 'none']),
    ('k-j', 'k:-j1', .05, [], ['-j', '1']),
    # rsync options kopiru does not take yet: skipped until it does
    ('dx', '--delete-excluded', .01, ['--delete-excluded'], ['--delete-excluded']),
    ('existing', '--existing', .01, ['--existing'], ['--existing']),
    ('sizeonly', '--size-only', .01, ['--size-only'], ['--size-only']),
    ('suffix', '--suffix=.bak', .005, ['--suffix=.bak'], ['--suffix=.bak']),
]


def draw_options(rng, table):
    """[(tag, peer args, kopiru args)]: one draw per group, in table order."""
    out, groups = [], []
    for row in table:
        if row[0] not in groups:
            groups.append(row[0])
    for g in groups:
        u = rng.random()
        for grp, tag, p, peer, kop in table:
            if grp != g:
                continue
            if u < p:
                out.append((tag, peer, kop))
                break
            u -= p
    return out


# ---------------------------------------------------------------------------
# Names, contents, modes
# ---------------------------------------------------------------------------
PLAIN = [b'a', b'b', b'c', b'data', b'x', b'notes.txt', b'main.rs', b'lib.rs', b'img.bin',
         b'f.log', b'README', b'sub', b'dir', b'z.tmp', b'cache', b'build', b'src', b'k.o',
         b'doc', b'y.txt']
ODD = [b' sp ace ', b'new\nline', b'-dash', b'--opt', b'\xff\xfe bad', b'tilde~', b'x.~1~',
       b'.hidden', b'*star', b'[br]', b'back\\slash', 'é'.encode(), b"quote'd", b'a:b',
       b'\ttab', b'$HOME', b'..dots', b'#hash', b'LONG']

FILE_MODES = [0o644] * 8 + [0o600] * 3 + [0o755] * 3 + [0o444, 0o640, 0o666, 0o777, 0o000,
              0o4755, 0o2755, 0o6755, 0o4644, 0o1755, 0o700, 0o400]
DIR_MODES = [0o755] * 8 + [0o700] * 2 + [0o750, 0o1777, 0o2775, 0o2755, 0o000, 0o555, 0o311,
             0o777, 0o500]
UIDS = [0, 0, 1000, 4242, NOBODY]
TEXT = bytes(b'abcdefghij \n'[i % 12] for i in range(256))  # random bytes -> text
GIDS = [0, 0, 100, 4242, NOBODY]


def acl_text(entries):
    tag = {1: 'u', 2: 'u', 4: 'g', 8: 'g', 0x10: 'm', 0x20: 'o'}
    out = []
    for t, perm, ident in entries:
        who = '' if t not in (2, 8) else str(ident)
        bits = ('r' if perm & 4 else '-') + ('w' if perm & 2 else '-') + ('x' if perm & 1 else '-')
        out.append('%s:%s:%s' % (tag[t], who, bits))
    return ','.join(out)


def acl_xattr(entries):
    """The kernel's posix_acl xattr: version 2, then (tag, perm, id) sorted."""
    blob = struct.pack('<I', 2)
    for t, perm, ident in sorted(entries, key=lambda e: (e[0], e[2])):
        blob += struct.pack('<HHI', t, perm, ident)
    return blob


def acl_decode(blob):
    ents = []
    for off in range(4, len(blob) - 7, 8):
        ents.append(struct.unpack('<HHI', blob[off:off + 8]))
    return acl_text(ents)


# ---------------------------------------------------------------------------
# The case
# ---------------------------------------------------------------------------
def parent(p):
    return p.rsplit(b'/', 1)[0] if b'/' in p else b''


def base(p):
    return p.rsplit(b'/', 1)[-1]


def under(p, root):
    return p == root or p.startswith(root + b'/')


class Case:
    """Everything about one case, drawn from its seed alone."""

    def __init__(self, seed):
        self.seed = seed
        self.rng = random.Random(seed)
        self.entries = []     # dicts in creation order; paths relative to the side
        self.by_path = {}
        self.times = {}       # ns -> area that was given this time
        self.peer = None      # 'cp' or 'rsync'
        self.user = 'root'
        self.umask = 0o022
        self.opts = []        # [(tag, peer args, kopiru args)]
        self.peer_argv = []   # operands and options, the tool's name left out
        self.kopiru_argv = []
        self.kopiru_prelude = []  # commands run before kopiru (the rsync translation)
        self.stdin = b''
        self.runs = 1
        self.form = ''
        self.dest_kind = ''
        self.src_kinds = []
        self.src_roots = []
        self.operands = []
        self.fifo_data = b''
        self.mount = False    # a tmpfs mounted inside the source
        self.generate()

    # -- helpers -----------------------------------------------------------
    def time(self, area, lo=946684800, hi=1690000000):
        t = self.rng.randint(lo, hi) * 10**9 + self.rng.randrange(10**9)
        self.times[t] = area
        return t

    def owner(self):
        r = self.rng
        if self.user == 'nobody':
            return (0, 0) if r.random() < 0.08 else (NOBODY, NOBODY)
        return r.choice(UIDS), r.choice(GIDS)

    def add(self, path, kind, area, **kw):
        assert path not in self.by_path, path
        e = dict(path=path, kind=kind, area=area)
        e.update(kw)
        if kind != 'hardlink':
            uid, gid = self.owner()
            e.setdefault('uid', uid)
            e.setdefault('gid', gid)
            e.setdefault('mtime', self.time(area))
        self.entries.append(e)
        self.by_path[path] = e
        return e

    def name(self, parent_path, plain=False):
        r = self.rng
        for attempt in range(50):
            if plain or r.random() < 0.8:
                n = r.choice(PLAIN)
            else:
                n = r.choice(ODD)
                if n == b'LONG':
                    n = b'L' * r.randint(100, 250)
            if attempt:
                n = n + str(attempt).encode() if len(n) < 250 else n[:-3] + str(attempt).encode()
            p = parent_path + b'/' + n if parent_path else n
            if p not in self.by_path:
                return p
        raise RuntimeError('no free name')

    def content(self):
        r = self.rng
        u = r.random()
        if u < 0.1:
            n = 0
        elif u < 0.5:
            n = r.randint(1, 100)
        elif u < 0.95:
            n = r.randint(100, 5000)
        else:
            n = r.randint(5000, 70000)
        if r.random() < 0.5:
            return r.randbytes(n).translate(TEXT)
        return r.randbytes(n)

    def sparse(self):
        r = self.rng
        size = r.choice([64, 256, 1024, 2048]) * 1024
        chunks = []
        for _ in range(r.randint(0, 3)):
            off = r.randrange(size // 4096) * 4096
            chunks.append((off, r.randbytes(r.randint(1, 4096))))
        if r.random() < 0.5:  # data up to the end, no trailing hole
            chunks.append((size - 4096, r.randbytes(4096)))
        return size, chunks

    def meta(self, e):
        """Random ACLs and xattrs (files and directories only)."""
        r = self.rng
        if e['kind'] in ('file', 'dir'):
            if r.random() < 0.15:
                m = e['mode']
                ents = [(1, (m >> 6) & 7, 0xFFFFFFFF), (4, r.randint(0, 7), 0xFFFFFFFF),
                        (0x10, (m >> 3) & 7, 0xFFFFFFFF), (0x20, m & 7, 0xFFFFFFFF)]
                if r.random() < 0.8:
                    ents.append((2, r.randint(0, 7), 4242))
                if r.random() < 0.5:
                    ents.append((8, r.randint(0, 7), 4243))
                if not any(t in (2, 8) for t, _, _ in ents):
                    ents.append((2, 6, 1000))
                e['acl'] = ents
            if e['kind'] == 'dir' and r.random() < 0.08:
                ents = [(1, 7, 0xFFFFFFFF), (4, 5, 0xFFFFFFFF), (0x20, r.choice([0, 5]), 0xFFFFFFFF)]
                if r.random() < 0.6:
                    ents += [(2, r.randint(0, 7), 4242), (0x10, 7, 0xFFFFFFFF)]
                e['dacl'] = ents
            if r.random() < 0.2:
                xs = []
                for i in range(r.randint(1, 3)):
                    v = r.choice([b'', b'v', r.randbytes(r.randint(1, 40)), b'text value'])
                    xs.append((b'user.k%d' % i, v))
                e['xattrs'] = xs
        return e

    # -- trees --------------------------------------------------------------
    def gen_tree(self, root, area, n):
        r = self.rng
        dirs = [root]
        self.meta(self.add(root, 'dir', area, mode=r.choice(DIR_MODES[:12])))
        links = []
        for _ in range(n):
            par = dirs[0] if r.random() < 0.3 else r.choice(dirs)
            kinds = ['file'] * 40 + ['empty'] * 6 + ['sparse'] * 4 + ['dir'] * 14 + ['symlink'] * 14 + \
                    ['hardlink'] * 6 + ['fifo'] * 4 + ['socket'] * 1
            if self.user == 'root':
                kinds += ['chardev'] * 2
            k = r.choice(kinds)
            p = self.name(par)
            if k == 'socket' and len(base(p)) > 60:
                k = 'file'
            if k in ('file', 'empty', 'sparse'):
                e = self.add(p, 'file', area, mode=r.choice(FILE_MODES))
                if k == 'file':
                    e['data'] = self.content()
                elif k == 'empty':
                    e['data'] = b''
                else:
                    e['size'], e['chunks'] = self.sparse()
                self.meta(e)
            elif k == 'dir':
                self.meta(self.add(p, 'dir', area, mode=r.choice(DIR_MODES)))
                dirs.append(p)
            elif k == 'symlink':
                links.append(self.add(p, 'symlink', area, target=None))
            elif k == 'hardlink':
                cands = [e['path'] for e in self.entries if under(e['path'], root) and
                         e['kind'] in ('file', 'fifo', 'symlink') and
                         (e['kind'] == 'file' or r.random() < 0.15)]
                if cands:
                    self.add(p, 'hardlink', area, link=r.choice(cands))
                else:
                    self.add(p, 'file', area, mode=0o644, data=self.content())
            elif k == 'fifo':
                self.add(p, 'fifo', area, mode=r.choice([0o644, 0o600, 0o666]))
            elif k == 'socket':
                self.add(p, 'socket', area, mode=0o755)
            elif k == 'chardev':
                self.add(p, 'chardev', area, mode=r.choice([0o666, 0o600]), rdev=(1, 3))
        for e in links:
            e['target'] = self.symlink_target(e['path'], root)
        return dirs

    def symlink_target(self, at, root):
        r = self.rng
        u = r.random()
        others = [e['path'] for e in self.entries if e['path'] != at and e['kind'] != 'hardlink'
                  and (under(e['path'], root) or e['area'] == 'o')]
        if u < 0.12 or not others:  # dangling
            return r.choice([b'nowhere', b'../gone/x', b'/nonexistent/kopiru-oracle'])
        t = r.choice(others)
        if u < 0.25:
            return SIDE + b'/' + t
        if u < 0.28:
            return at.rsplit(b'/', 1)[-1]  # a loop onto itself
        return os.path.relpath(t, parent(at) or b'.')

    def outside(self):
        """o/: files and a directory beside the trees (symlink targets, hard link partners)."""
        r = self.rng
        self.add(b'o', 'dir', 'o', mode=0o755)
        for i in range(r.randint(1, 3)):
            self.add(b'o/f%d' % i, 'file', 'o', mode=0o644, data=self.content())
        self.add(b'o/dir', 'dir', 'o', mode=0o755)
        self.add(b'o/dir/in', 'file', 'o', mode=0o644, data=b'inside o/dir\n')

    def older(self, src, dst, area):
        """An older, different copy of the tree at src, placed at dst (src's
        entries only, as they were when called), plus extra entries."""
        r = self.rng
        subtree = [e for e in list(self.entries) if under(e['path'], src)]
        gone = []
        dirs = []
        for e in subtree:
            if any(under(e['path'], g) for g in gone):
                continue
            p = dst + e['path'][len(src):]
            if parent(p) and parent(p) not in self.by_path:
                gone.append(e['path'])
                continue
            k = e['kind']
            u = r.random()
            top = e['path'] == src
            if top and p in self.by_path:  # dst exists already: its entries only
                dirs.append(p)
                continue
            if not top and u < 0.07:
                gone.append(e['path'])
                continue
            if k == 'hardlink':
                lp = dst + e['link'][len(src):] if under(e['link'], src) else None
                if lp in self.by_path and self.by_path[lp]['kind'] == 'file' and u < 0.5:
                    self.add(p, 'hardlink', area, link=lp)
                else:
                    self.add(p, 'file', area, mode=0o644, data=self.content())
                continue
            if k == 'file':
                self.older_file(e, p, area)
            elif k == 'dir':
                if not top and u < 0.17:
                    gone.append(e['path'])
                    if u < 0.12:
                        self.add(p, 'file', area, mode=0o644, data=b'was a directory\n')
                    else:  # a symlink where the directory was
                        self.add(p, 'symlink', area, target=r.choice([b'/nonexistent', SIDE + b'/o/dir']))
                    continue
                mode = e['mode'] if u < 0.7 else r.choice([0o755, 0o700, 0o555, 0o2775, 0o1777])
                d = self.add(p, 'dir', area, mode=mode,
                             mtime=e['mtime'] if r.random() < 0.3 else self.time(area))
                self.meta(d)
                dirs.append(p)
            elif k == 'symlink':
                if u < 0.5:
                    self.add(p, 'symlink', area, target=e['target'])
                elif u < 0.65:
                    self.add(p, 'symlink', area, target=b'other-target')
                elif u < 0.8:  # a directory where the symlink was
                    self.add(p, 'dir', area, mode=0o755)
                    self.add(p + b'/kept', 'file', area, mode=0o644, data=b'in a dir where a link was\n')
                else:
                    self.add(p, 'file', area, mode=0o644, data=b'was a link\n')
            else:  # fifo, socket, chardev
                if u < 0.6:
                    self.add(p, k, area, mode=e['mode'], rdev=e.get('rdev'))
                else:
                    self.add(p, 'file', area, mode=0o644, data=b'was special\n')
        # extras: not in the source
        for _ in range(r.randint(0, 5)):
            if not dirs:
                break
            par = r.choice(dirs)
            p = self.name(par)
            u = r.random()
            if u < 0.6:
                self.add(p, 'file', area, mode=r.choice([0o644, 0o600, 0o444]), data=self.content())
            elif u < 0.8:
                self.add(p, 'dir', area, mode=0o755)
                self.add(p + b'/deep', 'file', area, mode=0o644, data=b'extra\n')
            else:
                self.add(p, 'symlink', area, target=b'extra-link')

    def older_file(self, e, p, area):
        r = self.rng
        u = r.random()
        data = e.get('data')
        if data is None:  # sparse: a dense file of another size
            data = b'\0' * 5000
        kw = dict(mode=e['mode'], uid=e['uid'], gid=e['gid'])
        if u < 0.35:  # the same file
            kw.update(data=data, mtime=e['mtime'])
            for k in ('acl', 'xattrs'):
                if k in e:
                    kw[k] = e[k]
        elif u < 0.43:  # other bytes, same size and time: rsync's quick check keeps it
            kw.update(data=bytes((b + 1) % 256 for b in data), mtime=e['mtime'])
        elif u < 0.58:
            kw.update(data=self.content(), mtime=e['mtime'] - 10**9 * r.randint(1, 10**6))
        elif u < 0.68:
            kw.update(data=self.content(), mtime=e['mtime'] + 10**9 * r.randint(1, 10**6))
        elif u < 0.75:
            kw.update(data=data, mtime=self.time(area))
        elif u < 0.83:  # the same bytes, a private mode
            kw.update(data=data, mode=r.choice([0o600, 0o444, 0o400]), mtime=self.time(area))
        elif u < 0.88:
            kw.update(data=self.content(), uid=4242, gid=4242, mode=0o640)
            if self.user == 'nobody':
                kw.update(uid=NOBODY, gid=NOBODY)
        elif u < 0.92:  # a hard link shared with o/
            q = self.name(b'o', plain=True)
            self.add(q, 'file', 'o', mode=0o644, data=b'shared with ' + p + b'\n')
            self.add(p, 'hardlink', area, link=q)
            return
        elif u < 0.96:  # a directory where the file was
            self.add(p, 'dir', area, mode=0o755)
            self.add(p + b'/kept', 'file', area, mode=0o644, data=b'in a dir where a file was\n')
            return
        else:
            self.add(p, 'symlink', area, target=SIDE + b'/o/f0')
            return
        kw['mtime'] = kw.get('mtime') or self.time(area)
        if kw['mtime'] not in self.times:
            self.times[kw['mtime']] = area
        f = self.add(p, 'file', area, **kw)
        if r.random() < 0.2:
            self.meta(f)
        if r.random() < 0.08 and len(base(p)) < 240:  # existing backups
            for b in r.choice([[b'~'], [b'.~1~'], [b'.~1~', b'.~3~'], [b'~', b'.~2~']]):
                if p + b not in self.by_path:
                    self.add(p + b, 'file', area, mode=0o644, data=b'old backup\n')

    # -- the command ----------------------------------------------------------
    def pick_operand(self, root, kinds=None):
        r = self.rng
        cands = [e for e in self.entries if under(e['path'], root) and e['path'] != root and
                 (kinds is None or e['kind'] in kinds)]
        if self.peer == 'rsync':
            cands = [e for e in cands if b':' not in e['path']]
        return r.choice(cands) if cands else None

    def kind_of(self, e):
        if e['kind'] == 'hardlink':
            return self.kind_of(self.by_path[e['link']])
        return e['kind']

    def dest_single(self, d, op):
        """A destination for one operand op (an entry) at path d."""
        r = self.rng
        kinds = ['absent'] * 5 + ['file'] * 4 + ['dir'] * 4 + ['dir-older'] * 3 + \
                ['symlink-file', 'symlink-dir', 'symlink-dangling', 'fifo', 'linked-file', 'file-ro']
        if self.user == 'root':
            kinds.append('chardev')
        k = r.choice(kinds)
        self.dest_kind = k
        if k == 'absent':
            return
        if k in ('file', 'file-ro'):
            self.add(d, 'file', 'd', mode=0o444 if k == 'file-ro' else r.choice([0o600, 0o640, 0o755]),
                     data=self.content())
            self.meta(self.by_path[d])
        elif k == 'linked-file':
            self.add(b'o/partner', 'file', 'o', mode=0o600, data=b'partner of d\n')
            self.add(d, 'hardlink', 'd', link=b'o/partner')
        elif k in ('dir', 'dir-older'):
            self.meta(self.add(d, 'dir', 'd', mode=r.choice([0o755, 0o700, 0o2775])))
            if k == 'dir-older':
                self.older(op['path'], d + b'/' + base(op['path']), 'd')
        elif k == 'symlink-file':
            self.add(d, 'symlink', 'd', target=b'o/f0')
        elif k == 'symlink-dir':
            self.add(d, 'symlink', 'd', target=b'o/dir')
        elif k == 'symlink-dangling':
            self.add(d, 'symlink', 'd', target=b'o/none')
        elif k == 'fifo':
            self.add(d, 'fifo', 'd', mode=0o666)
        elif k == 'chardev':
            self.add(d, 'chardev', 'd', mode=0o666, rdev=(1, 3))

    def dest_tree(self, d, src, at):
        """A destination for a directory copy: d is the named destination, at
        where the copy of src lands if d exists as a directory."""
        r = self.rng
        k = r.choice(['absent'] * 4 + ['empty'] * 2 + ['older'] * 6 + ['file', 'symlink-dir'])
        self.dest_kind = k
        if k == 'absent':
            return
        if k == 'file':
            self.add(d, 'file', 'd', mode=0o644, data=b'a file where a directory goes\n')
            return
        if k == 'symlink-dir':
            self.add(d, 'symlink', 'd', target=b'o/dir')
            return
        self.meta(self.add(d, 'dir', 'd', mode=r.choice([0o755] * 4 + [0o700, 0o2775, 0o1777, 0o555])))
        if k == 'older':
            self.older(src, at, 'd')
            for _ in range(r.randint(0, 2)):
                p = self.name(d)
                if p not in self.by_path:
                    self.add(p, 'file', 'd', mode=0o644, data=b'beside the copy\n')

    def generate(self):
        r = self.rng
        self.peer = 'cp' if r.random() < 0.6 else 'rsync'
        self.user = 'nobody' if r.random() < 0.25 else 'root'
        self.umask = r.choice([0o022] * 5 + [0o002, 0o077, 0o027, 0o000])
        self.outside()
        nested = self.peer == 'rsync' and r.random() < 0.04
        sroot = b'd/s' if nested else b's'
        if nested:
            self.add(b'd', 'dir', 'd', mode=0o755)
            self.add(b'd/keep', 'file', 'd', mode=0o644, data=b'beside the source\n')
        self.gen_tree(sroot, 's', r.randint(8, 36))
        self.src_roots = [sroot]
        if self.user == 'nobody':
            for e in self.entries:
                if e['kind'] != 'hardlink' and e['area'] == 'o':
                    e['uid'] = e['gid'] = NOBODY
        if self.peer == 'cp':
            self.gen_cp()
        else:
            self.gen_rsync(nested)
        self.src_kinds = [self.kind_of(self.by_path[o]) if o in self.by_path else 'dir'
                          for o in self.operands]
        self.maps = self.source_maps()
        self.fifo_data = b'fifo data of seed %d\n' % self.seed
        if self.user == 'root' and \
                (any(t == '-x' for t, _, _ in self.opts) and r.random() < 0.7 or r.random() < 0.02):
            self.add_mount(sroot)

    def source_maps(self):
        """[(where a copy lands, the source it is a copy of)], most specific first."""
        f, dk, ops = self.form, self.dest_kind, self.operands
        dd = b'o/dir' if dk == 'symlink-dir' else b'd'
        if self.peer == 'cp' and f in ('into', 'rerun', 'slash'):
            if dk == 'absent':
                return [(b'd/s', b's'), (b'd', b's')] if f == 'rerun' else [(b'd', b's')]
            return [(dd + b'/s', b's')]
        if f in ('dot', 'slash'):  # into the directory a DEST symlink points to
            return [(dd, b's')]
        if f == 'T':
            return [(b'd', b's')]
        if f == 'nested':
            return [(b'd', b'd/s')]
        if f == 'noslash':
            return [(dd + b'/s', b's')]
        if f in ('file', 'multi', 't'):
            if f == 'file' and dk not in ('dir', 'dir-older', 'symlink-dir'):
                return [(b'd', ops[0])]
            return [(dd + b'/' + base(op), op) for op in ops]
        return []

    def add_mount(self, sroot):
        """A tmpfs mounted on a directory of the source (-x's mount point)."""
        r = self.rng
        p = self.name(sroot, plain=True)
        self.add(p, 'dir', 's', mode=0o755, mount=True)
        self.add(p + b'/on-tmpfs', 'file', 's', mode=0o644, data=b'on another filesystem\n')
        self.mount = True

    def gen_cp(self):
        r = self.rng
        self.opts = draw_options(r, CP_OPTIONS)
        tags = [t for t, _, _ in self.opts]
        if '-i' in tags:
            self.stdin = r.choice([b'y\n' * 200, b'n\n' * 200, b''])
        forms = ['into'] * 5 + ['T'] * 3 + ['dot'] * 3 + ['slash'] * 2 + ['file'] * 5 + \
                ['multi'] * 2 + ['t'] * 2 + ['rerun'] * 2 + ['self']
        form = r.choice(forms)
        self.form = form
        extra = []
        if form in ('into', 'rerun', 'slash'):
            srcop = b's/' if form == 'slash' and r.random() < 0.5 else b's'
            dst = b'd/' if form == 'slash' and srcop == b's' else b'd'
            if form == 'rerun':  # onto nothing or an empty directory: an older tree only repeats 'into'
                self.dest_kind = r.choice(['absent', 'absent', 'empty'])
                if self.dest_kind == 'empty':
                    self.add(b'd', 'dir', 'd', mode=0o755)
            else:
                self.dest_tree(b'd', b's', b'd/s')
            ops, dest = [srcop], dst
            if form == 'rerun':
                self.runs = 2
        elif form in ('T', 'dot'):
            self.dest_tree(b'd', b's', b'd')
            if form == 'T':
                extra, ops, dest = ['-T'], [b's'], b'd'
            else:
                ops, dest = [b's/.'], b'd'
        elif form == 'file':
            op = self.pick_operand(b's')
            self.dest_single(b'd', op)
            ops, dest = [op['path']], b'd' if r.random() < 0.85 else b'd/'
        elif form in ('multi', 't'):
            ops = []
            for _ in range(r.randint(2, 3)):
                op = self.pick_operand(b's')
                if op['path'] not in ops:
                    ops.append(op['path'])
            if r.random() < 0.2:
                ops.append(b's')
            k = r.choice(['dir'] * 5 + ['absent', 'file'])
            self.dest_kind = k
            if k == 'dir':
                self.meta(self.add(b'd', 'dir', 'd', mode=0o755))
                for op in ops:
                    if r.random() < 0.4 and base(op) not in (b'.', b''):
                        self.older(op, b'd/' + base(op), 'd')
            elif k == 'file':
                self.add(b'd', 'file', 'd', mode=0o644, data=b'not a directory\n')
            if form == 't':
                extra, dest = ['-t', b'd'], None
            else:
                dest = b'd'
        else:  # self: a directory into itself (refused by both)
            sub = self.pick_operand(b's', kinds=('dir',))
            ops, dest = [b's'], (sub['path'] if sub else b's') + b'/copy'
            self.dest_kind = 'inside-source'
        self.operands = [o.rstrip(b'/') if o != b's/' else b's' for o in ops]
        argv = [a for _, p, _ in self.opts for a in p] + extra + list(ops) + ([dest] if dest else [])
        kargv = [a for _, _, k in self.opts if k for a in k] + extra + list(ops) + ([dest] if dest else [])
        self.peer_argv, self.kopiru_argv = argv, kargv
        if form in ('T', 't'):
            self.opts.append(('-' + form, [], []))

    def gen_rsync(self, nested):
        r = self.rng
        self.opts = draw_options(r, RSYNC_OPTIONS)
        tags = [t for t, _, _ in self.opts]
        if '--suffix=.bak' in tags and '--backup' not in tags:
            # rsync's --suffix alone changes nothing; kopiru's (cp's -S) makes backups
            self.opts = [(t, p, [] if t == '--suffix=.bak' else k) for t, p, k in self.opts]
        if '-L' in tags:
            # rsync -L copies a symlink to an ancestor directory over and over until the path is too
            # long; cp and kopiru stop at the loop. Not worth comparing: such links point nowhere here.
            for e in self.entries:
                t = e.get('target') if e['kind'] == 'symlink' else None
                if t is None or t.startswith(b'/'):
                    continue
                t = t[len(SIDE) + 1:] if t.startswith(SIDE) else os.path.normpath(os.path.join(parent(e['path']), t))
                if t == b'.' or e['path'].startswith(t + b'/'):
                    e['target'] = b'nowhere-loop'
        if '-a' not in tags:  # -H, -A and -X stand for kopiru -a's extras only beside -a
            self.opts = [o for o in self.opts if o[0] not in ('-H', '-A', '-X')]
            tags = [t for t, _, _ in self.opts]
        patterns = self.patterns() if r.random() < 0.3 else []
        if nested:
            form = 'nested'
            if '--delete' not in tags:  # the layout is there to test --delete
                self.opts.append(('--delete', ['--delete'], ['--delete']))
                tags.append('--delete')
        else:
            form = r.choice(['slash'] * 6 + ['noslash'] * 3 + ['file'] * 2 + ['multi'])
        if '--link-dest' in tags and form not in ('slash', 'nested'):
            form = 'slash'
        if form in ('file', 'multi'):
            # kopiru deletes only in the copy itself (-T or SRC/.): no one command matches rsync's
            # --delete here, so these forms go without it
            self.opts = [o for o in self.opts if o[0] != '--delete']
            tags = [t for t, _, _ in self.opts]
        self.form = form
        popts = [a for _, p, _ in self.opts for a in p]
        kopts = [a for _, _, k in self.opts if k for a in k]
        for kind, pat in patterns:
            # rsync anchors a /pattern at the transfer's root, which is s's parent without the slash
            rpat = b'/s' + pat if form == 'noslash' and pat.startswith(b'/') else pat
            popts.append('--%s=%s' % (kind, rpat.decode()))
            kopts.append('--%s=%s' % (kind, pat.decode()))
            self.opts.append(('--' + kind, [], []))
        if '--link-dest' in tags:
            self.older(self.src_roots[0], b'ld', 'ld')
        if form == 'slash':
            self.dest_tree(b'd', b's', b'd')
            ops = [b's']
            self.peer_argv = popts + ['s/', 'd']
            kform = ['-T', 's', 'd'] if r.random() < 0.5 else ['s/.', 'd']
            self.kopiru_argv = kopts + kform
        elif form == 'nested':
            self.dest_kind = 'contains-source'
            ops = [b'd/s']
            self.peer_argv = popts + ['d/s/', 'd']
            self.kopiru_argv = kopts + ['-T', 'd/s', 'd']
        elif form == 'noslash':
            self.dest_tree(b'd', b's', b'd/s')
            ops = [b's']
            self.peer_argv = popts + ['s', 'd']
            if self.dest_kind == 'absent':
                self.kopiru_prelude = [['mkdir', 'd']]
            if '--delete' in tags:  # kopiru deletes only in the copy itself
                self.kopiru_argv = kopts + ['-T', 's', 'd/s']
            else:
                self.kopiru_argv = kopts + ['s', 'd']
        elif form == 'file':
            op = self.pick_operand(b's', kinds=('file', 'symlink', 'hardlink', 'fifo'))
            ops = [op['path']]
            self.dest_single(b'd', op)
            self.peer_argv = popts + [op['path'], 'd']
            self.kopiru_argv = kopts + [op['path'], 'd']
        else:  # multi
            ops = []
            for _ in range(r.randint(2, 3)):
                op = self.pick_operand(b's')
                if op and op['path'] not in ops:
                    ops.append(op['path'])
            k = r.choice(['dir'] * 3 + ['absent'])
            self.dest_kind = k
            if k == 'dir':
                self.add(b'd', 'dir', 'd', mode=0o755)
                for op in ops:
                    if r.random() < 0.4:
                        self.older(op, b'd/' + base(op), 'd')
            else:
                self.kopiru_prelude = [['mkdir', 'd']]
            self.peer_argv = popts + ops + ['d/']
            self.kopiru_argv = kopts + ops + ['d']
        self.operands = ops

    def patterns(self):
        """rsync filter rules drawn from the source's plain names."""
        r = self.rng
        names = sorted({base(e['path']) for e in self.entries if e['area'] == 's' and
                        re.fullmatch(rb'[A-Za-z0-9._-]+', base(e['path'])) and e['path'] != b's'})
        rel = [e['path'][2:] for e in self.entries if e['area'] == 's' and e['path'].startswith(b's/') and
               re.fullmatch(rb'[A-Za-z0-9._/-]+', e['path'])]
        out = []
        if not names:
            return out
        if r.random() < 0.2:
            return [('include', b'*/'), ('include', b'*.rs'), ('exclude', b'*')]
        for _ in range(r.randint(1, 3)):
            n = r.choice(names)
            u = r.random()
            if u < 0.3:
                pat = n
            elif u < 0.45:
                pat = n[:2] + b'*'
            elif u < 0.6:
                pat = b'*' + (n[n.rfind(b'.'):] if b'.' in n else n[-1:])
            elif u < 0.7:
                pat = n + b'/'
            elif u < 0.8 and rel:
                pat = b'/' + r.choice(rel)
            elif u < 0.9 and rel:
                pat = b'**/' + base(r.choice(rel))
            else:
                pat = b'?' + n[1:]
            out.append(('include' if r.random() < 0.2 else 'exclude', pat))
        return out

    # -- descriptions -------------------------------------------------------
    def tags(self):
        return [t for t, _, _ in self.opts]

    def peer_cmd(self):
        return [self.peer] + [a if isinstance(a, str) else a for a in self.peer_argv]

    def kopiru_cmd(self, kopiru='kopiru'):
        return [kopiru, 'copy'] + self.kopiru_argv

    def summary(self):
        return '%s %s | kopiru copy %s%s (user %s, umask %03o, dest %s%s)' % (
            self.peer, ' '.join(show(a) for a in self.peer_argv),
            ''.join(' '.join(c) + ' && ' for c in self.kopiru_prelude),
            ' '.join(show(a) for a in self.kopiru_argv), self.user, self.umask, self.dest_kind,
            (', run twice' if self.runs == 2 else '') + (', a tmpfs inside the source' if self.mount else ''))


def show(a):
    """A path or argument printed losslessly (\\xHH for other bytes), as kopiru prints paths."""
    if isinstance(a, str):
        a = a.encode()
    out = []
    for c in a:
        if c == 0x5c:
            out.append('\\\\')
        elif 0x20 <= c < 0x7f:
            out.append(chr(c))
        else:
            out.append('\\x%02x' % c)
    return ''.join(out)


def fsb(a):
    return a if isinstance(a, bytes) else a.encode()


# ---------------------------------------------------------------------------
# Building a side: in Python (fast), and as a shell script (the replay). The
# two do the same operations in the same order; --self-check compares them.
# ---------------------------------------------------------------------------
def real_target(e, side):
    t = e['target']
    return side + t[len(SIDE):] if t.startswith(SIDE) else t


def build(case, side):
    """Make the case's entries under side (an absent path)."""
    os.mkdir(side)
    mounts = []
    for e in case.entries:
        p = os.path.join(side, e['path'])
        k = e['kind']
        if k == 'file':
            fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                if 'chunks' in e:
                    os.ftruncate(fd, e['size'])
                    for off, data in e['chunks']:
                        os.pwrite(fd, data, off)
                else:
                    os.write(fd, e['data'])
            finally:
                os.close(fd)
        elif k == 'dir':
            os.mkdir(p, 0o700)
            if e.get('mount'):
                subprocess.run(['mount', '-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', p], check=True)
                mounts.append(p)
        elif k == 'symlink':
            os.symlink(real_target(e, side), p)
        elif k == 'hardlink':
            os.link(os.path.join(side, e['link']), p, follow_symlinks=False)
            continue
        elif k == 'fifo':
            os.mkfifo(p, 0o600)
        elif k == 'chardev':
            os.mknod(p, stat.S_IFCHR | 0o600, os.makedev(*e['rdev']))
        elif k == 'socket':
            here = os.getcwd()
            os.chdir(os.path.dirname(p))
            try:
                s = socket.socket(socket.AF_UNIX)
                s.bind(os.path.basename(p))
                s.close()
            finally:
                os.chdir(here)
        os.chown(p, e['uid'], e['gid'], follow_symlinks=False)
        if k != 'symlink':
            os.chmod(p, e['mode'])
        if 'acl' in e:
            os.setxattr(p, 'system.posix_acl_access', acl_xattr(e['acl']))
        for name, value in e.get('xattrs', []):
            os.setxattr(p, name, value)
    # default ACLs last, so that the entries made above inherit nothing
    for e in case.entries:
        if 'dacl' in e:
            os.setxattr(os.path.join(side, e['path']), 'system.posix_acl_default', acl_xattr(e['dacl']))
    for e in case.entries:
        if e['kind'] != 'hardlink':
            os.utime(os.path.join(side, e['path']), ns=(e['mtime'], e['mtime']), follow_symlinks=False)
    os.chown(side, *((NOBODY, NOBODY) if case.user == 'nobody' else (0, 0)))
    os.chmod(side, 0o755)
    return mounts


def shq(a):
    """a (bytes or str) quoted for bash, any byte but NUL."""
    b = fsb(a)
    if b and re.fullmatch(rb'[A-Za-z0-9_./=:,+@%-]+', b):
        return b.decode()
    out = ["$'"]
    for c in b:
        if c in (0x27, 0x5c):
            out.append('\\' + chr(c))
        elif 0x20 <= c < 0x7f:
            out.append(chr(c))
        else:
            out.append('\\x%02x' % c)
    return ''.join(out) + "'"


def build_script(case):
    """Shell lines that make the case under "$S" (as build() does)."""
    L = ['mkdir "$S" && cd "$S" || exit 1']
    for e in case.entries:
        p = shq(e['path'])
        k = e['kind']
        if k == 'file':
            if 'chunks' in e:
                L.append('truncate -s %d %s' % (e['size'], p))
                for off, data in e['chunks']:
                    L.append("printf %%s '%s' | base64 -d | dd of=%s bs=1M seek=%d oflag=seek_bytes conv=notrunc "
                             "status=none" % (base64.b64encode(data).decode(), p, off))
            elif e['data']:
                L.append("printf %%s '%s' | base64 -d > %s" % (base64.b64encode(e['data']).decode(), p))
            else:
                L.append(': > %s' % p)
        elif k == 'dir':
            L.append('mkdir -m 700 %s' % p)
            if e.get('mount'):
                L.append('mount -t tmpfs -o size=1m tmpfs %s  # umount it when done' % p)
        elif k == 'symlink':
            t = e['target']
            if t.startswith(SIDE):
                L.append('ln -s -- "$S"%s %s' % (shq(t[len(SIDE):]), p))
            else:
                L.append('ln -s -- %s %s' % (shq(t), p))
        elif k == 'hardlink':
            L.append('ln -P -- %s %s' % (shq(e['link']), p))
            continue
        elif k == 'fifo':
            L.append('mkfifo %s' % p)
        elif k == 'chardev':
            L.append('mknod %s c %d %d' % (p, e['rdev'][0], e['rdev'][1]))
        elif k == 'socket':
            L.append("(cd %s && python3 -c 'import socket,sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' %s)"
                     % (shq(parent(e['path']) or b'.'), shq(base(e['path']))))
        L.append('chown -h %d:%d %s' % (e['uid'], e['gid'], p))
        if k != 'symlink':
            L.append('chmod %05o %s' % (e['mode'], p))  # five digits: clears a directory's set-gid too
        if 'acl' in e:
            L.append("setfacl -n --set '%s' %s" % (acl_text(e['acl']), p))
        for name, value in e.get('xattrs', []):
            L.append('setfattr -n %s -v 0x%s %s' % (name.decode(), value.hex(), p) if value else
                     'setfattr -n %s %s' % (name.decode(), p))
    for e in case.entries:
        if 'dacl' in e:
            L.append("setfacl -n -d --set '%s' %s" % (acl_text(e['dacl']), shq(e['path'])))
    for e in case.entries:
        if e['kind'] != 'hardlink':
            L.append('touch -h -d @%d.%09d %s' % (e['mtime'] // 10**9, e['mtime'] % 10**9, shq(e['path'])))
    L.append('chown %s .; chmod 755 .' % ('65534:65534' if case.user == 'nobody' else '0:0'))
    L.append('cd - >/dev/null')
    return L


def cleanup(path):
    """Unmount what a side mounted and remove it."""
    if not os.path.lexists(path):
        return
    for line in reversed(open('/proc/self/mounts', 'rb').read().splitlines()):
        mp = line.split()[1].replace(b'\\040', b' ').replace(b'\\011', b'\t').replace(b'\\012', b'\n') \
            .replace(b'\\134', b'\\')
        if mp.startswith(path + b'/'):
            subprocess.run(['umount', '-l', mp], stderr=subprocess.DEVNULL)
    shutil.rmtree(path, ignore_errors=True)
    if os.path.lexists(path):
        subprocess.run(['chattr', '-R', '-i', path], stderr=subprocess.DEVNULL)
        shutil.rmtree(path, ignore_errors=True)


# ---------------------------------------------------------------------------
# Snapshots
# ---------------------------------------------------------------------------
KIND = {stat.S_IFREG: 'file', stat.S_IFDIR: 'dir', stat.S_IFLNK: 'symlink', stat.S_IFIFO: 'fifo',
        stat.S_IFCHR: 'chardev', stat.S_IFBLK: 'blockdev', stat.S_IFSOCK: 'socket'}
FIELDS = ('kind', 'content', 'target', 'rdev', 'mode', 'uid', 'gid', 'mtime', 'xattr', 'acl', 'dacl',
          'links', 'sparse')
DATA_FIELDS = ('kind', 'content', 'target', 'rdev')
META_FIELDS = ('mode', 'uid', 'gid', 'xattr', 'acl', 'dacl')


MAX_DEPTH = 40  # deeper than any case builds; a peer that loops (cp -L) stops being listed there


def snapshot(side, moves=None):
    """path (relative to side) -> {field: value}, every entry under side; moves: {path: new
    path} names a directory (a staged tree) by another path."""
    recs, inodes = {}, {}

    def moved(r):
        for old, new in (moves or {}).items():
            if r == old or r.startswith(old + b'/'):
                return new + r[len(old):]
        return r

    def walk(rel, depth=0):
        d = os.path.join(side, rel) if rel else side
        for n in sorted(os.listdir(d)):
            real = rel + b'/' + n if rel else n
            p = os.path.join(side, real)
            r = moved(real)
            if depth >= MAX_DEPTH:  # a tool that followed a symlink loop: one entry says so
                recs[r] = dict(kind='too-deep', mode=0, uid=0, gid=0, mtime=0)
                continue
            st = os.lstat(p)
            kind = KIND.get(stat.S_IFMT(st.st_mode), '?')
            rec = dict(kind=kind, mode=stat.S_IMODE(st.st_mode), uid=st.st_uid, gid=st.st_gid,
                       mtime=st.st_mtime_ns)
            if kind == 'file':
                with open(p, 'rb') as f:
                    h = hashlib.sha1(f.read()).hexdigest()[:12]
                rec['content'] = '%d:%s' % (st.st_size, h)
                rec['sparse'] = st.st_size > 0 and st.st_blocks * 512 < st.st_size
            elif kind == 'symlink':
                t = os.readlink(p)
                rec['target'] = SIDE + t[len(side):] if t.startswith(side + b'/') else t
                del rec['mode']
            elif kind in ('chardev', 'blockdev'):
                rec['rdev'] = '%d:%d' % (os.major(st.st_rdev), os.minor(st.st_rdev))
            if kind in ('file', 'dir'):
                xs = []
                for name in sorted(os.listxattr(p, follow_symlinks=False)):
                    v = os.getxattr(p, name, follow_symlinks=False)
                    if name == 'system.posix_acl_access':
                        rec['acl'] = acl_decode(v)
                    elif name == 'system.posix_acl_default':
                        rec['dacl'] = acl_decode(v)
                    elif not name.startswith('system.'):
                        xs.append('%s=%s' % (name, v.hex()))
                if xs:
                    rec['xattr'] = ' '.join(xs)
            if kind != 'dir':
                inodes.setdefault((st.st_dev, st.st_ino), []).append(r)
            recs[r] = rec
            if kind == 'dir':
                walk(real, depth + 1)
    walk(b'')
    for group in inodes.values():
        if len(group) > 1:
            for r in group:
                recs[r]['links'] = ' '.join(show(g) for g in sorted(group) if g != r)
                recs[r]['group'] = tuple(sorted(group))
    return recs


# ---------------------------------------------------------------------------
# Running a tool
# ---------------------------------------------------------------------------
def feed_fifo(path, data, proc, done):
    """Write data into the FIFO at path once for each reader that opens it, until proc ends."""
    while proc.poll() is None and not done.is_set():
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as e:
            if e.errno in (errno.ENXIO, errno.EAGAIN, errno.EINTR):
                time.sleep(0.003)
                continue
            return
        try:
            fcntl.fcntl(fd, fcntl.F_SETFL, 0)
            os.write(fd, data)
        except OSError:
            pass
        finally:
            os.close(fd)
        # Wait until that reader is gone (opening for writing fails again) before writing for the
        # next one: writing again while a slow reader still has it open would give it the data twice.
        while proc.poll() is None and not done.is_set():
            try:
                os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                break
            time.sleep(0.003)


def open_drain(path):
    """A reader on the FIFO at path (None if it is not one), opened before the tool runs, so that
    a tool writing into it (cp f FIFO, as cp writes into an existing destination) neither blocks
    nor fails."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        return None
    if not stat.S_ISFIFO(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    return fd


def drain_fifo(fd, path, proc, done, sink):
    """Read what is written into the FIFO (fd, open_drain's) into sink[path] until proc ends;
    after each writer closes it, wait for the next one on the same FIFO."""
    ino = os.fstat(fd).st_ino
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    buf = b''
    try:
        while True:
            ended = proc.poll() is not None or done.is_set()
            if poller.poll(0 if ended else 20):
                data = os.read(fd, 1 << 16)
                if data:
                    buf += data
                    continue
                # the writer closed it: reopen, to wait for another one (without a busy loop)
                poller.unregister(fd)
                os.close(fd)
                fd = open_drain(path)
                if fd is None or os.fstat(fd).st_ino != ino:
                    break
                poller.register(fd, select.POLLIN)
            elif ended:
                break
    finally:
        if fd is not None:
            os.close(fd)
        if buf:
            sink[path] = sink.get(path, b'') + buf


def run_tool(case, side, state, argv, preludes=()):
    """Run preludes then argv in side as the case's user; (exit class, code, stdout, stderr)."""
    env = {'PATH': '/usr/sbin:/usr/bin:/sbin:/bin', 'LC_ALL': 'C.UTF-8', 'HOME': state, 'XDG_STATE_HOME': state}
    wrap = ['setpriv', '--reuid=%d' % NOBODY, '--regid=%d' % NOBODY, '--clear-groups', '--'] \
        if case.user == 'nobody' else []
    fifos = [os.path.join(side, e['path']) for e in case.entries if e['kind'] == 'fifo'
             and any(under(e['path'], r) for r in case.src_roots)]
    # FIFOs outside the source are drained: cp writes into an existing one it is to replace
    drains = [e['path'] for e in case.entries if e['kind'] == 'fifo'
              and not any(under(e['path'], r) for r in case.src_roots)]
    out = err = b''
    written = {}
    for cmd in list(preludes) + [argv]:
        readers = [(p, open_drain(os.path.join(side, p))) for p in drains] if cmd is argv else []
        # The child inherits the umask (a preexec_fn would cost a fork of this whole process).
        old_umask = os.umask(case.umask)
        try:
            proc = subprocess.Popen(wrap + [fsb(a) for a in cmd], cwd=side, env=env,
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    start_new_session=True)
        finally:
            os.umask(old_umask)
        done = threading.Event()
        feeders = [threading.Thread(target=feed_fifo, args=(f, case.fifo_data, proc, done), daemon=True)
                   for f in fifos if cmd is argv]
        feeders += [threading.Thread(target=drain_fifo, args=(fd, os.path.join(side, p), proc, done, written),
                                     daemon=True) for p, fd in readers if fd is not None]
        for t in feeders:
            t.start()
        try:
            o, e = proc.communicate(case.stdin if cmd is argv else b'', timeout=TIMEOUT)
            code = proc.returncode
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            o, e = proc.communicate()
            code = 'timeout'
        done.set()
        for t in feeders:
            t.join()
        out += o
        err += e
    if code == 'timeout':
        cls = 'timeout'
    elif code < 0:
        cls = 'signal'
    elif code == 0:
        cls = 'ok'
    else:
        cls = 'fail'
    return cls, code, out, err, {os.path.relpath(p, side): v for p, v in written.items()}


# ---------------------------------------------------------------------------
# Comparing
# ---------------------------------------------------------------------------
def time_value(case, ns, start_ns):
    """A time the case gave (compared exactly), or 'fresh' (set by the run)."""
    if ns in case.times:
        return '%s:%d.%09d' % (case.times[ns], ns // 10**9, ns % 10**9)
    if ns >= start_ns - 5 * 10**9:
        return FRESH
    return 'other:%d.%09d' % (ns // 10**9, ns % 10**9)


def normalize(case, snap, start_ns):
    out = {}
    for p, rec in snap.items():
        r = dict(rec)
        r['mtime'] = time_value(case, r['mtime'], start_ns)
        if 'mode' in r:
            r['mode'] = '%04o' % r['mode']
        out[p] = r
    return out


def val(rec, f):
    if rec is None:
        return 'absent'
    v = rec.get(f)
    return '-' if v is None else str(v)


def area_of(case, p):
    for root in case.src_roots:
        if under(p, root):
            return 's'
    return p.split(b'/', 1)[0].decode('latin-1')


STAGED_RE = re.compile(rb"^kopiru: (.+): copy: not put in place: .*? kept under '(.+)': run the same command",
                       re.M)


def unshow(s):
    """The bytes of a path kopiru printed (show()'s spelling: \\\\ and \\xHH)."""
    return re.sub(rb'\\(\\|x[0-9a-f]{2})', lambda m: b'\\' if m.group(1) == b'\\' else
                  bytes([int(m.group(1)[1:], 16)]), s)


def staged_trees(side, res):
    """{staged path: final path} for each staged tree kopiru reported ("not put in place: ...
    kept under 'STAGED'", docs/copy.md, Durability) and left there, its final name free: the
    snapshot moves it to the final name, so that what kopiru copied is compared with the peer's
    copy there (nothing it copied is lost; only the name differs)."""
    def real(p):  # p with the symlinks of its parent resolved (DEST may be a symlink to a directory)
        d = os.path.relpath(os.path.realpath(os.path.join(side, parent(p) or b'.')), side)
        return None if d.startswith(b'..') else base(p) if d == b'.' else d + b'/' + base(p)

    out = {}
    for m in STAGED_RE.finditer(res[3] + res[2]):
        final, staged = real(unshow(m.group(1))), real(unshow(m.group(2)))
        if final and staged and b'.kopiru-tmp.tree.' in base(staged) and os.path.isdir(os.path.join(side, staged)) \
                and not os.path.lexists(os.path.join(side, final)):
            out[staged] = final
    return out


def compare(case, pre, post_a, post_b, res_a, res_b, staged=None):
    """The differences between the peer's side (a) and kopiru's (b); staged: {staged tree: its
    final name}, moved there in post_b (staged_trees())."""
    staged = staged or {}
    diffs = []

    def add(field, cls, path=b'-', a=None, b=None, o=None, av=None, bv=None, ov=None):
        rec = a or b
        diffs.append(dict(field=field, cls=cls, path=show(path), raw_path=path,
                          area=area_of(case, path) if path != b'-' else '-',
                          pre='absent' if o is None else 'present',
                          peer_val=av if av is not None else val(a, field),
                          kopiru_val=bv if bv is not None else val(b, field),
                          pre_val=ov if ov is not None else val(o, field),
                          kind=(rec or {}).get('kind', '-'),
                          peer_kind=(a or {}).get('kind', 'absent'), kopiru_kind=(b or {}).get('kind', 'absent'),
                          pre_kind=(o or {}).get('kind', 'absent')))

    def in_source(p):
        return any(under(p, r) for r in case.src_roots)

    def as_source(rec):
        """What kopiru must not change in a source entry: all but the oracle's own doing (it
        writes into the FIFOs it feeds, which sets their times) and the names outside the source
        that share its inode (-l links the copies to it)."""
        if rec is None:
            return None
        rec = dict(rec)
        if rec['kind'] == 'fifo':
            rec.pop('mtime')
        inside = [g for g in rec.pop('group', ()) if in_source(g)]
        rec.pop('links', None)
        if len(inside) > 1:
            rec['links'] = ' '.join(show(g) for g in inside)
        return rec

    for p in sorted(set(pre) | set(post_b)):
        if in_source(p) and as_source(pre.get(p)) != as_source(post_b.get(p)):
            o, b = as_source(pre.get(p)), as_source(post_b.get(p))
            if o is None or b is None or o['kind'] != b['kind']:
                add('source:presence' if o is None or b is None else 'source:kind', 'lost', p,
                    post_a.get(p), b, o, av=val(post_a.get(p), 'kind'), bv=val(b, 'kind'), ov=val(o, 'kind'))
            else:
                for f in FIELDS:
                    if o.get(f) != b.get(f):
                        add('source:' + f, 'lost', p, post_a.get(p), b, o)
    for p in sorted(set(post_a) | set(post_b)):
        a, b, o = post_a.get(p), post_b.get(p), pre.get(p)
        if in_source(p):
            if as_source(o) != as_source(b):
                continue
            a, b, o = as_source(a), as_source(b), as_source(o)
        if a == b:
            continue
        if a is None or b is None:
            kept = o is not None and a is not None and all(a.get(f) == o.get(f) for f in DATA_FIELDS)
            cls = 'lost' if kept else 'leftover' if b is not None and b'.kopiru-tmp' in p else 'different'
            add('presence', cls, p, a, b, o,
                av=val(a, 'kind'), bv=val(b, 'kind'), ov=val(o, 'kind'))
            continue
        fields = ['kind'] if a['kind'] != b['kind'] else [f for f in FIELDS if a.get(f) != b.get(f)]
        for f in fields:
            cls = 'different'
            if o is not None and o['kind'] == a['kind'] and a.get(f) == o.get(f):
                cls = 'lost' if f in DATA_FIELDS else 'clobbered' if f in META_FIELDS else 'different'
            add(f, cls, p, a, b, o)
    def digest(data):
        return 'absent' if data is None else '%d:%s' % (len(data), hashlib.sha1(data).hexdigest()[:12])

    for p in sorted(set(res_a[4]) | set(res_b[4])):  # what the tools wrote into a FIFO outside the source
        wa, wb = res_a[4].get(p), res_b[4].get(p)
        if wa != wb:
            add('written', 'different', p, post_a.get(p), post_b.get(p), pre.get(p), av=digest(wa), bv=digest(wb))
    for tmp, final in sorted(staged.items()):  # the name only: the contents were compared above
        add('staged', 'different', final, post_a.get(final), post_b.get(final), pre.get(final),
            av=val(post_a.get(final), 'kind'), bv='kept under ' + show(tmp))
    ca, cb = res_a[0], res_b[0]
    if cb in ('timeout', 'signal') or res_b[1] == 101:
        add('exit', 'crash', av='%s(%s)' % (ca, res_a[1]), bv='%s(%s)' % (cb, res_b[1]))
    elif ca != cb:
        add('exit', 'exit', av='%s(%s)' % (ca, res_a[1]), bv='%s(%s)' % (cb, res_b[1]))
    if '-v' in case.tags() and case.peer == 'cp':
        la, lb = sorted(res_a[2].splitlines()), sorted(res_b[2].splitlines())
        if la != lb:
            only_a = [show(x) for x in la if x not in lb]
            only_b = [show(x) for x in lb if x not in la]
            add('stdout', 'different', av=' | '.join(only_a[:3]) or '-', bv=' | '.join(only_b[:3]) or '-')
    # backups the peer made where kopiru made none (GNU cp 9.1 puts some in the working directory)
    stray = sorted(p for p in set(post_a) - set(pre) - set(post_b) if re.search(rb'(~|\.~[0-9]+~)$', p))
    # an operand the peer left out (rsync filters operands too): its copy unchanged there, not here
    skipped_op = any(sp in case.operands and post_a.get(dp) == pre.get(dp) != post_b.get(dp)
                     for dp, sp in case.maps)
    def is_ld(p, f, v):
        """yes when v is the value of --link-dest DIR's entry for p (ld/ mirrors d/), - if none."""
        ldp = b'ld' + p[1:] if p.startswith(b'd/') else None
        return '-' if ldp not in pre else 'yes' if val(pre[ldp], f) == v else 'no'

    for d in diffs:
        src = None
        p = d.pop('raw_path')
        for dp, sp in case.maps:
            if p != b'-' and under(p, dp):
                src = pre.get(resolve(pre, sp + p[len(dp):]) if '-L' in case.tags() else sp + p[len(dp):])
                break
        f = d['field']
        sv = val(src, 'kind' if f == 'presence' else f) if src is not None else '-'
        d.update(src=val(src, 'kind') if src is not None else '-', src_val=sv,
                 peer_is_src='-' if src is None else 'yes' if d['peer_val'] == sv else 'no',
                 kopiru_is_src='-' if src is None else 'yes' if d['kopiru_val'] == sv else 'no',
                 age=age(pre.get(p), src),
                 peer_mode=mode_rule(src, post_a.get(p), case.umask) if f == 'mode' else '-',
                 kopiru_mode=mode_rule(src, post_b.get(p), case.umask, pre.get(p) or {}) if f == 'mode' else '-',
                 peer_is_ld=is_ld(p, f, d['peer_val']),
                 peer_links=val(post_a.get(p), 'links'), kopiru_links=val(post_b.get(p), 'links'),
                 pre_links=val(pre.get(p), 'links'),
                 peer_is_pre_perm=perm_of(post_a.get(p), pre.get(p)) if f == 'mode' else '-',
                 parent_dacl='-' if p == b'-' else 'yes' if 'dacl' in (post_b.get(parent(p)) or {}) else 'no')
        d.update(staged='yes' if any(p == b'-' or under(p, f) for f in staged.values()) else 'no')
        d.update(peer_stray=' '.join(show(x) for x in stray) or '-', peer_skipped_operand='yes' if skipped_op else 'no')
        d.update(dup_operands='yes' if len({base(o) for o in case.operands}) < len(case.operands) else 'no')
        d.update(peer=case.peer, user=case.user, form=case.form, mount='yes' if case.mount else 'no',
                 dest=case.dest_kind, umask='%03o' % case.umask,
                 srckinds=','.join(case.src_kinds), runs=str(case.runs),
                 peer_exit=res_a[0], kopiru_exit=res_b[0],
                 peer_out=(res_a[3] + res_a[2]).decode('utf-8', 'replace'),
                 kopiru_out=(res_b[3] + res_b[2]).decode('utf-8', 'replace'),
                 peer_kept='-' if d['pre'] == 'absent' else 'yes' if d['peer_val'] == d['pre_val'] else 'no',
                 kopiru_kept='-' if d['pre'] == 'absent' else 'yes' if d['kopiru_val'] == d['pre_val'] else 'no')
        d['opts'] = case.tags()
    return diffs


def resolve(snap, p, hops=12):
    """p with its symlinks followed, as far as snap has them (for -L)."""
    parts = p.split(b'/')
    done = []
    while parts and hops:
        done.append(parts.pop(0))
        cur = b'/'.join(done)
        rec = snap.get(cur)
        if rec and rec['kind'] == 'symlink':
            hops -= 1
            t = rec['target']
            if t.startswith(SIDE + b'/'):
                base_ = t[len(SIDE) + 1:]
            elif t.startswith(b'/'):
                return cur
            else:
                base_ = os.path.normpath(os.path.join(parent(cur), t))
                if base_.startswith(b'..'):
                    return cur
            parts = base_.split(b'/') + parts
            done = []
    return b'/'.join(done)


def mode_rule(src, peer, umask, old=None):
    """How a tool's mode came from the source's: src, nospecial (special bits dropped), umask
    (the umask applied, special bits dropped), umask+special, src+old_special (a directory merged
    into: the source's, with the old directory's set-group-ID and sticky bits), or -."""
    try:
        s, p = int(src['mode'], 8), int(peer['mode'], 8)
    except (TypeError, KeyError, ValueError):
        return '-'
    if p == s:
        return 'src'
    if old and old.get('kind') == 'dir' == peer.get('kind') and 'mode' in old \
            and p == s | (int(old['mode'], 8) & 0o3000):
        return 'src+old_special'
    if old is not None and p != s and p & ~0o6000 == s & ~0o6000 and not p & ~s & 0o6000:
        return 'src-setid'  # the source's, less a set-user-ID or set-group-ID bit (kopiru_mode only)
    if p == s & 0o777 & ~umask:
        return 'umask' if s & 0o777 & umask else 'nospecial'
    if p == s & ~umask:
        return 'umask+special'
    if p == s & 0o777:
        return 'nospecial'
    return '-'


def perm_of(peer, old):
    """yes when the peer's mode is the old one less its special bits (written into by another user)."""
    try:
        return 'yes' if int(peer['mode'], 8) == int(old['mode'], 8) & 0o777 else 'no'
    except (TypeError, KeyError, ValueError):
        return '-'


def age(dst, src):
    """The destination's time before the run against its source's: older, same, newer (or -)."""
    try:
        a, b = dst['mtime'], src['mtime']
        if FRESH in (a, b):
            return '-'
        a, b = a.split(':', 1)[1], b.split(':', 1)[1]
        return 'same' if a == b else 'older' if float(a) < float(b) else 'newer'
    except (TypeError, KeyError, IndexError):
        return '-'


def diff_line(d):
    return '%-9s %s %s: peer %s, kopiru %s%s' % (
        '[' + d['cls'] + ']', d['field'], d['path'], d['peer_val'], d['kopiru_val'],
        '' if d['pre'] == 'absent' or d['field'] in ('exit', 'stdout') else ' (before: %s)' % d['pre_val'])


# ---------------------------------------------------------------------------
# The table of deliberate differences (differences.tsv)
# ---------------------------------------------------------------------------
class Row:
    def __init__(self, ident, status, matcher, reason, lineno):
        self.id, self.status, self.reason, self.lineno = ident, status, reason, lineno
        self.terms = []
        for t in matcher.split():
            neg = t.startswith('!')
            if t.startswith(('has:', '!has:')):
                self.terms.append(('has', neg, t.split(':', 1)[1]))
                continue
            m = re.fullmatch(r'([a-z_]+)(!=|=|!~|~)(.*)', t)
            if not m:
                raise ValueError('differences.tsv:%d: cannot read term %r' % (lineno, t))
            key, op, v = m.groups()
            self.terms.append((key, op, v if '~' not in op else re.compile(v)))

    def matches(self, d):
        for key, op, v in self.terms:
            if key == 'has':  # an option tag matching the glob (alternatives: a|b)
                hit = any(fnmatch.fnmatchcase(t, alt) for t in d['opts'] for alt in v.split('|'))
                if hit == op:  # op is the negation flag here
                    return False
                continue
            x = d.get(key)
            if x is None:
                raise ValueError('differences.tsv:%d: no attribute %r' % (self.lineno, key))
            if op == '=' and not fnmatch.fnmatchcase(x, v):
                return False
            if op == '!=' and fnmatch.fnmatchcase(x, v):
                return False
            if op == '~' and not v.search(x):
                return False
            if op == '!~' and v.search(x):
                return False
        return True


def load_table(path):
    rows = []
    for n, line in enumerate(open(path, encoding='utf-8'), 1):
        line = line.rstrip('\n')
        if not line.strip() or line.startswith('#'):
            continue
        parts = line.split('\t')
        if len(parts) != 4 or parts[1] not in ('deliberate', 'known-bug'):
            raise ValueError('differences.tsv:%d: want id, deliberate|known-bug, matcher, reason (tabs)' % n)
        rows.append(Row(parts[0], parts[1], parts[2], parts[3], n))
    return rows


# ---------------------------------------------------------------------------
# The replay script
# ---------------------------------------------------------------------------
def replay_script(case, kopiru_hint, lines):
    sh = ['#!/usr/bin/env bash',
          '# kopiru peer oracle, seed %d (tests/peers/oracle/oracle.py --replay %d)' % (case.seed, case.seed),
          '# %s' % case.summary().replace('\n', ' ')]
    sh += ['#   ' + ln.replace('\n', ' ') for ln in lines]
    sh += ['# Run as root: bash THIS [DIR]. DIR (default: a new directory in /tmp) needs ACLs and user xattrs.',
           '# KOPIRU=/path/to/kopiru chooses the binary (default: %s).' % kopiru_hint,
           'set -u',
           'KOPIRU=${KOPIRU:-%s}' % kopiru_hint,
           'ROOT=${1:-$(mktemp -d /tmp/kopiru-oracle-%d.XXXXXX)}' % case.seed,
           'mkdir -p "$ROOT" && chmod 755 "$ROOT" && cd "$ROOT" || exit 1',
           'build() {',
           '  S=$1']
    sh += ['  ' + x for x in build_script(case)]
    sh += ['}',
           'build "$ROOT/peer" && build "$ROOT/kopiru" || exit 1',
           '[ -n "${BUILD_ONLY:-}" ] && exit 0',
           'mkdir -p "$ROOT/state-peer" "$ROOT/state-kopiru"']
    wrap = ''
    if case.user == 'nobody':
        sh.append('chown %d:%d "$ROOT/state-peer" "$ROOT/state-kopiru"' % (NOBODY, NOBODY))
        wrap = 'setpriv --reuid=%d --regid=%d --clear-groups -- ' % (NOBODY, NOBODY)
    if case.stdin:
        sh.append("yes %s | head -n 200 > \"$ROOT/stdin\"" % case.stdin[:1].decode())
    else:
        sh.append(': > "$ROOT/stdin"')
    feeds = [op for op in case.operands if op in case.by_path]
    drains = [e['path'] for e in case.entries if e['kind'] == 'fifo'
              and not any(under(e['path'], r) for r in case.src_roots)]
    sh += ['run() {  # run SIDE COMMAND...: in $ROOT/SIDE as the case\'s user, umask and environment',
           '  local side=$1; shift',
           '  for f in %s; do' % (' '.join(shq(f) for f in feeds) or "''"),
           '    [ -p "$ROOT/$side/$f" ] && timeout 5 sh -c \'printf "%%s" "$1" > "$2"\' sh %s "$ROOT/$side/$f" &'
           % shq(case.fifo_data),
           '  done',
           '  local drains=()  # a FIFO outside the source: read what a tool writes into it (cp does)',
           '  for f in %s; do' % (' '.join(shq(f) for f in drains) or "''"),
           '    [ -p "$ROOT/$side/$f" ] && { timeout 12 cat "$ROOT/$side/$f" > /dev/null & drains+=($!); }',
           '  done',
           '  (cd "$ROOT/$side" && umask %03o && env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C.UTF-8 '
           'HOME="$ROOT/state-$side" XDG_STATE_HOME="$ROOT/state-$side" timeout -s KILL %d %s"$@" < "$ROOT/stdin")'
           % (case.umask, TIMEOUT, wrap),
           '  echo "== $side: exit $?"',
           '  [ ${#drains[@]} -gt 0 ] && { sleep 0.2; kill "${drains[@]}" 2>/dev/null; }',
           '  wait',
           '}']
    for _ in range(case.runs):
        sh.append('run peer %s' % ' '.join(shq(a) for a in case.peer_cmd()))
    for _ in range(case.runs):
        for c in case.kopiru_prelude:
            sh.append('run kopiru %s' % ' '.join(shq(a) for a in c))
        sh.append('run kopiru "$KOPIRU" copy %s' % ' '.join(shq(a) for a in case.kopiru_argv))
    sh += ['listing() { (cd "$1" && find . -mindepth 1 '
           '-printf \'%p -> %l  %y %m %U:%G %s %TY-%Tm-%Td+%TT %n\\n\' | LC_ALL=C sort); }',
           'echo "== entries: path (-> target), kind, mode, owner, size, mtime, links; < peer, > kopiru"',
           'diff <(listing "$ROOT/peer") <(listing "$ROOT/kopiru")',
           'echo "== contents"',
           'diff -r --no-dereference "$ROOT/peer" "$ROOT/kopiru"',
           'echo "== ACLs and xattrs"',
           'diff <(cd "$ROOT/peer" && getfacl -RPs . 2>/dev/null) <(cd "$ROOT/kopiru" && getfacl -RPs . 2>/dev/null)',
           'diff <(cd "$ROOT/peer" && getfattr -RPd . 2>/dev/null) <(cd "$ROOT/kopiru" && getfattr -RPd . 2>/dev/null)',
           'echo "== left in $ROOT"']
    if any(e.get('mount') for e in case.entries):
        sh.append('echo "tmpfs mounts inside it: umount them before removing it"')
    return '\n'.join(sh) + '\n'


# ---------------------------------------------------------------------------
# One case, in a worker
# ---------------------------------------------------------------------------
CFG = {}


def probe_support(kopiru):
    """Which kopiru args rows today's kopiru takes (clap rejects an unknown one before --help)."""
    support = {}
    for table in (CP_OPTIONS, RSYNC_OPTIONS):
        for _, tag, _, _, kop in table:
            if kop and tuple(kop) not in support:
                r = subprocess.run([kopiru, 'copy'] + kop + ['--help'], stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
                support[tuple(kop)] = r.returncode == 0
    return support


def missing_options(case):
    return [tag for tag, _, kop in case.opts if kop and not CFG['support'].get(tuple(kop), True)]


def run_case(seed, keep=False, verbose=False):
    try:
        case = Case(seed)
    except Exception:
        return dict(seed=seed, status='error', summary='(the case cannot be made)', error=traceback.format_exc())
    missing = missing_options(case)
    if missing:
        return dict(seed=seed, status='skip', missing=missing, summary=case.summary())
    cdir = os.path.join(CFG['work'], b'case-%d' % seed)
    cleanup(cdir)
    os.mkdir(cdir)
    os.chmod(cdir, 0o755)
    sides = [os.path.join(cdir, b'peer'), os.path.join(cdir, b'kopiru')]
    states = [os.path.join(cdir, b'state-peer'), os.path.join(cdir, b'state-kopiru')]
    try:
        for s in states:
            os.mkdir(s)
            if case.user == 'nobody':
                os.chown(s, NOBODY, NOBODY)
        for s in sides:
            build(case, s)
        start = time.time_ns()
        snaps = [normalize(case, snapshot(s), start) for s in sides]
        if snaps[0] != snaps[1]:
            bad = [show(p) for p in sorted(set(snaps[0]) | set(snaps[1])) if snaps[0].get(p) != snaps[1].get(p)]
            raise RuntimeError('the two builds differ (the builder is not deterministic): %s' % bad[:5])
        pre = snaps[1]
        res = []
        for side, state, cmd, pre_cmds in ((sides[0], states[0], case.peer_cmd(), []),
                                           (sides[1], states[1], [CFG['kopiru'], 'copy'] + case.kopiru_argv,
                                            case.kopiru_prelude)):
            worst, outs, errs = None, b'', b''
            for _ in range(case.runs):
                r = run_tool(case, side, state, cmd, pre_cmds)
                outs, errs = outs + r[2], errs + r[3]  # every run's messages (a rerun's warning)
                if worst is None or (r[0] != 'ok' and worst[0] == 'ok'):
                    worst = r
                if r[0] not in ('ok', 'fail'):
                    worst = r
                    break
            res.append(worst[:2] + (outs, errs) + worst[4:])
        if res[0][0] == 'timeout':
            return dict(seed=seed, status='skip', missing=['(the peer hung: %s)' % case.peer],
                        summary=case.summary())
        if case.peer == 'rsync' and res[0][1] in (2, 12, 13, 14):  # protocol/stream/internal errors
            return dict(seed=seed, status='skip', missing=['(rsync failed inside itself, exit %d)' % res[0][1]],
                        summary=case.summary())
        moves = staged_trees(sides[1], res[1])
        posts = [normalize(case, snapshot(sides[0]), start), normalize(case, snapshot(sides[1], moves), start)]
        diffs = compare(case, pre, posts[0], posts[1], res[0], res[1], staged=moves)
    except Exception:
        return dict(seed=seed, status='error', summary=case.summary(), error=traceback.format_exc())
    finally:
        if not keep:
            cleanup(cdir)
    matched, unmatched = {}, []
    for d in diffs:
        row = next((r for r in CFG['table'] if r.matches(d)), None)
        if row:
            matched[row.id] = matched.get(row.id, 0) + 1
            d['row'] = row.id
        else:
            unmatched.append(d)
    out = dict(seed=seed, status='fail' if unmatched else 'pass', summary=case.summary(), matched=matched,
               peer=case.peer, form=case.form,
               accepted=[(d['row'], diff_line(d)) for d in diffs[:MAX_DIFFS] if 'row' in d])
    if unmatched or verbose:
        worst = min((d['cls'] for d in unmatched), key=CLASS_ORDER.index, default='-')
        if len(diffs) > MAX_DIFFS:
            n = len(diffs)
            diffs = diffs[:MAX_DIFFS]
            unmatched = [d for d in diffs if 'row' not in d]
            diffs.append(dict(diffs[-1], field='(more)', cls='different', path='-',
                              peer_val='%d differences in all' % n, kopiru_val='-', pre='absent'))
        lines = [diff_line(d) for d in unmatched]
        out.update(worst=worst, lines=lines, first=lines[0] if lines else '',
                   signature=sorted({(d['cls'], d['field']) for d in unmatched}),
                   all_lines=[diff_line(d) + ('  = ' + d['row'] if 'row' in d else '') for d in diffs],
                   stderr=[res[0][3].decode('utf-8', 'replace'), res[1][3].decode('utf-8', 'replace')],
                   stdout=[res[0][2].decode('utf-8', 'replace'), res[1][2].decode('utf-8', 'replace')],
                   exits=[res[0][:2], res[1][:2]], diffs=unmatched)
        write_failure(case, out)
    return out


MAX_DIFFS = 200  # per case, in its report
CLASS_ORDER = ['lost', 'leftover', 'crash', 'clobbered', 'exit', 'different']


def write_failure(case, out):
    rd = CFG['results']
    with open(os.path.join(rd, 'seed-%d.sh' % case.seed), 'w') as f:
        f.write(replay_script(case, CFG['kopiru_hint'], out['lines'] or ['(no unmatched difference)']))
    with open(os.path.join(rd, 'seed-%d.txt' % case.seed), 'w') as f:
        f.write('seed %d: %s\n\n' % (case.seed, case.summary()))
        f.write('differences (= ROW: accepted by that row of differences.tsv):\n')
        for ln in out['all_lines']:
            f.write('  %s\n' % ln)
        for who, (cls, code), err, so in zip(('peer', 'kopiru'), out['exits'], out['stderr'], out['stdout']):
            f.write('\n%s: exit %s (%s)\nstderr:\n%s\nstdout:\n%s\n' % (who, code, cls, err, so))


def init_worker(cfg):
    CFG.update(cfg)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


# ---------------------------------------------------------------------------
# The filesystem
# ---------------------------------------------------------------------------
def setup_fs(mnt, img, size='4G'):
    """A loop-mounted ext4 with ACLs and user xattrs at mnt (reused if there)."""
    os.makedirs(mnt, exist_ok=True)
    if os.path.ismount(mnt):
        for line in open('/proc/self/mounts'):
            f = line.split()
            if f[1] == mnt and f[2] == 'ext4':
                return False
        raise SystemExit('%s is a mount point but not ext4: give --mount another place' % mnt)
    os.makedirs(os.path.dirname(img), exist_ok=True)
    subprocess.run(['truncate', '-s', size, img], check=True)
    # A fixed directory hash seed: readdir's order (which cp and rsync follow) is then the same on every run.
    subprocess.run(['mkfs.ext4', '-F', '-q', '-i', '4096', '-U', '6b6f7069-7275-4f72-6163-6c6500000001',
                    '-E', 'hash_seed=6b6f7069-7275-4f72-6163-6c6500000002', img], check=True)
    subprocess.run(['mount', '-o', 'loop,acl,user_xattr', img, mnt], check=True)
    os.chmod(mnt, 0o755)
    return True


def teardown_fs(mnt, img):
    subprocess.run(['umount', mnt])
    if os.path.exists(img):
        os.unlink(img)


# ---------------------------------------------------------------------------
# The self-check of the replay scripts: built by build() and by the script
# ---------------------------------------------------------------------------
def self_check(seeds):
    bad = 0
    for seed in seeds:
        case = Case(seed)
        cdir = os.path.join(CFG['work'], b'check-%d' % seed)
        cleanup(cdir)
        os.mkdir(cdir)
        try:
            build(case, os.path.join(cdir, b'py'))
            script = os.path.join(cdir, b'replay.sh')
            with open(script, 'w') as f:
                f.write(replay_script(case, 'kopiru', []))
            r = subprocess.run(['bash', script, os.path.join(cdir, b'sh')], env=dict(os.environ, BUILD_ONLY='1'),
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            start = time.time_ns()
            a = normalize(case, snapshot(os.path.join(cdir, b'py')), start)
            b = normalize(case, snapshot(os.path.join(cdir, b'sh', b'peer')), start)
            if r.returncode != 0 or a != b:
                bad += 1
                why = [show(p) + ': %s / %s' % (a.get(p), b.get(p)) for p in sorted(set(a) | set(b))
                       if a.get(p) != b.get(p)][:3]
                print('self-check seed %d: the replay script builds another case: exit %d %s %s'
                      % (seed, r.returncode, r.stdout[-500:].decode('utf-8', 'replace'), why))
        finally:
            cleanup(cdir)
    return bad


# ---------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------
def seed_range(s):
    m = re.fullmatch(r'(\d+)\.\.(\d+)', s)
    if not m:
        raise argparse.ArgumentTypeError('A..B, e.g. 1..500')
    return int(m.group(1)), int(m.group(2))


def main():
    ap = argparse.ArgumentParser(description='GNU cp and rsync as oracles for kopiru copy (README.md beside this).')
    ap.add_argument('--seeds', type=seed_range, help='run seeds A..B (inclusive)')
    ap.add_argument('--cases', type=int, help='run N cases (seeds START..START+N-1)')
    ap.add_argument('--start', type=int, default=1, help='first seed for --cases (default 1)')
    ap.add_argument('--replay', type=int, metavar='SEED', help='run one case and show everything about it')
    ap.add_argument('--ci', action='store_true',
                    help='the fixed CI set: seeds %d..%d and a few more, stale known bugs fail' % CI_SEEDS)
    ap.add_argument('--jobs', type=int, default=os.cpu_count(), help='cases run at once (default: CPUs)')
    ap.add_argument('--kopiru', default=os.environ.get('KOPIRU', 'kopiru'), help='the kopiru binary ($KOPIRU)')
    ap.add_argument('--results', default=os.path.join(REPO, 'target', 'oracle'),
                    help='where failing cases leave seed-N.sh and seed-N.txt (default target/oracle)')
    ap.add_argument('--mount', default='/tmp/kopiru-oracle-fs', help='where the ext4 is mounted')
    ap.add_argument('--image', default='/dev/shm/kopiru-oracle.img' if os.path.isdir('/dev/shm') else
                    os.path.expanduser('~/.cache/kopiru-test/oracle.img'), help='its image file')
    ap.add_argument('--keep-fs', action='store_true', help='leave the ext4 mounted at the end')
    ap.add_argument('--keep', action='store_true', help='keep each case\'s directories (with --replay)')
    ap.add_argument('--stale', action='store_true', help='fail on known-bug rows that matched nothing '
                    '(on by default with --ci)')
    ap.add_argument('--self-check', type=int, default=0, metavar='N',
                    help='also check that the replay scripts of N seeds build the same case (default 0; --ci: 20)')
    args = ap.parse_args()

    if os.geteuid() != 0:
        print('!!!!!!!! SKIPPED: the oracle needs root (a loop-mounted ext4, chown, runs as nobody)')
        print('0 passed, 0 failed, 1 skipped')
        return 0
    missing = [t for t in ('cp', 'rsync', 'setfacl', 'setfattr', 'setpriv', 'mkfs.ext4') if not shutil.which(t)]
    kopiru = shutil.which(args.kopiru) or args.kopiru
    if not os.access(kopiru, os.X_OK):
        missing.append('kopiru (%s)' % args.kopiru)
    if missing:
        print('!!!!!!!! SKIPPED: the oracle cannot run without %s' % ', '.join(missing))
        print('0 passed, 0 failed, 1 skipped')
        return 0
    if args.replay is not None:
        seeds = [args.replay]
    elif args.seeds:
        seeds = list(range(args.seeds[0], args.seeds[1] + 1))
    elif args.cases:
        seeds = list(range(args.start, args.start + args.cases))
    else:
        seeds = list(range(CI_SEEDS[0], CI_SEEDS[1] + 1)) + list(CI_EXTRA_SEEDS)
        args.ci = True
    if args.ci:
        args.self_check = args.self_check or 20
    # Only the CI set is known to show every known bug; another run lists the rows it did not see.
    stale_check = args.stale or args.ci

    os.makedirs(args.results, exist_ok=True)
    for n in os.listdir(args.results) if args.replay is None else []:
        if re.fullmatch(r'seed-\d+\.(sh|txt)|summary\.tsv|diffs\.jsonl|accepted\.tsv', n):
            os.unlink(os.path.join(args.results, n))
    made = setup_fs(args.mount, args.image)
    work = os.path.join(args.mount, 'w-%d' % os.getpid()).encode()
    os.mkdir(work)
    os.chmod(work, 0o755)
    table = load_table(os.path.join(HERE, 'differences.tsv'))
    cfg = dict(kopiru=kopiru, kopiru_hint=kopiru, work=work, results=args.results, table=table,
               support=probe_support(kopiru))
    CFG.update(cfg)
    t0 = time.time()
    try:
        if args.replay is not None:
            return replay(args, cfg)
        span = '%d..%d' % (seeds[0], seeds[-1]) if seeds == list(range(seeds[0], seeds[-1] + 1)) else \
            '%d..%d and %d more' % (CI_SEEDS[0], CI_SEEDS[1], len(CI_EXTRA_SEEDS))
        print('oracle: %d cases (seeds %s), %d at once, kopiru %s, cp %s, rsync %s; on %s'
              % (len(seeds), span, args.jobs, kopiru, tool_version('cp'), tool_version('rsync'),
                 args.mount), flush=True)
        results = []
        with multiprocessing.get_context('fork').Pool(args.jobs, init_worker, (cfg,)) as pool:
            for n, r in enumerate(pool.imap_unordered(run_case, seeds, chunksize=4), 1):
                results.append(r)
                if r['status'] in ('fail', 'error'):
                    print('FAIL seed %d [%s] %s\n     %s' % (r['seed'], r.get('worst', 'error'), r['summary'],
                                                          r.get('first') or last_line(r.get('error'))),
                          flush=True)
                    if r['status'] == 'error':
                        print(r['error'])
                if n % 500 == 0:
                    print('... %d/%d cases, %.0f s' % (n, len(seeds), time.time() - t0), flush=True)
        bad_replays = self_check(seeds[:args.self_check]) if args.self_check else 0
        return report(args, results, table, stale_check, bad_replays, time.time() - t0)
    finally:
        if not args.keep:
            cleanup(work)
        if made and not (args.keep_fs or args.keep):
            teardown_fs(args.mount, args.image)


def last_line(text):
    lines = (text or '').strip().splitlines()
    return lines[-1] if lines else ''


def tool_version(t):
    try:
        return subprocess.run([t, '--version'], stdout=subprocess.PIPE, text=True).stdout.split('\n')[0].split()[-1] \
            if t == 'cp' else subprocess.run([t, '--version'], stdout=subprocess.PIPE, text=True).stdout.split()[2]
    except (OSError, IndexError):
        return '?'


def report(args, results, table, stale_check, bad_replays, secs):
    passed = sum(r['status'] == 'pass' for r in results)
    failed = sum(r['status'] in ('fail', 'error') for r in results)
    skipped = sum(r['status'] == 'skip' for r in results)
    matched = {}
    for r in results:
        for k, v in r.get('matched', {}).items():
            matched.setdefault(k, [0, 0])
            matched[k][0] += v
            matched[k][1] += 1
    with open(os.path.join(args.results, 'summary.tsv'), 'w') as f:
        f.write('seed\tstatus\tworst\tsignature\tcase\tfirst difference\n')
        for r in sorted(results, key=lambda r: r['seed']):
            if r['status'] in ('fail', 'error'):
                f.write('%d\t%s\t%s\t%s\t%s\t%s\n' % (r['seed'], r['status'], r.get('worst', 'error'),
                                                      ' '.join('%s/%s' % s for s in r.get('signature', [])),
                                                      r['summary'], r.get('first') or last_line(r.get('error'))))
    with open(os.path.join(args.results, 'accepted.tsv'), 'w') as f:
        f.write('seed\trow\tdifference\n')
        for r in sorted(results, key=lambda r: r['seed']):
            if r.get('accepted'):
                f.write('%d\t(case)\t%s\n' % (r['seed'], r['summary']))
            for row, line in r.get('accepted', []):
                f.write('%d\t%s\t%s\n' % (r['seed'], row, line))
    with open(os.path.join(args.results, 'diffs.jsonl'), 'w') as f:
        for r in sorted(results, key=lambda r: r['seed']):
            for d in r.get('diffs', []):
                f.write(json.dumps(dict(d, seed=r['seed'], case=r['summary'])) + '\n')
    print('\ndifferences.tsv rows that accepted differences (differences, cases):')
    shown = set()
    for row in table:
        if row.id in shown:
            continue
        shown.add(row.id)
        m = matched.get(row.id)
        print('  %-28s %-10s %s' % (row.id, row.status, '%d in %d cases' % tuple(m) if m else 'never matched'))
    stale = sorted({row.id for row in table if row.status == 'known-bug' and row.id not in matched})
    if skipped:
        why = {}
        for r in results:
            if r['status'] == 'skip':
                for t in r['missing']:
                    why[t] = why.get(t, 0) + 1
        opts = sorted((k, v) for k, v in why.items() if not k.startswith('('))
        peer = sorted((k, v) for k, v in why.items() if k.startswith('('))
        print('!!!!!!!! SKIPPED: %d cases. Options today\'s kopiru does not take (cases): %s%s'
              % (skipped, ', '.join('%s (%d)' % kv for kv in opts) or '-',
                 '; the peer could not judge: ' + ', '.join('%s %d' % kv for kv in peer) if peer else ''))
    extra_fail = 0
    if stale_check and stale:
        print('STALE: known-bug rows that matched nothing (fixed? delete them from differences.tsv): %s'
              % ', '.join(stale))
        extra_fail += len(stale)
    elif stale:
        print('known-bug rows this run did not meet (not a failure outside --ci): %s' % ', '.join(stale))
    if bad_replays:
        print('FAILED: %d replay scripts build another case than the oracle ran' % bad_replays)
        extra_fail += bad_replays
    worst = {}
    for r in results:
        if r['status'] == 'fail':
            worst[r['worst']] = worst.get(r['worst'], 0) + 1
    if worst:
        print('failed cases by worst class: %s (lost: kopiru removed or changed what the peer kept)'
              % ', '.join('%s %d' % (c, worst[c]) for c in CLASS_ORDER if c in worst))
    if failed:
        print('replay scripts and details: %s/seed-N.sh, seed-N.txt; all failures: summary.tsv' % args.results)
    print('%.0f s' % secs)
    print('%d passed, %d failed, %d skipped' % (passed, failed + extra_fail, skipped))
    return 1 if failed + extra_fail else 0


def replay(args, cfg):
    seed = args.replay
    case = Case(seed)
    print('seed %d: %s' % (seed, case.summary()))
    missing = missing_options(case)
    if missing:
        print('!!!!!!!! SKIPPED: kopiru does not take %s yet; running it anyway' % ', '.join(missing))
        CFG['support'] = {}
    r = run_case(seed, keep=args.keep, verbose=True)
    if r['status'] == 'error':
        print(r['error'])
        print('0 passed, 1 failed, 0 skipped')
        return 1
    for who, (cls, code), err, so in zip(('peer', 'kopiru'), r['exits'], r['stderr'], r['stdout']):
        print('--- %s: exit %s (%s)' % (who, code, cls))
        for x in (so + err).splitlines():
            print('    ' + x)
    print('--- differences (= ROW: accepted by that row):')
    for ln in r['all_lines'] or ['(none)']:
        print('  ' + ln)
    print('replay script: %s' % os.path.join(args.results, 'seed-%d.sh' % seed))
    if args.keep:
        print('case kept in %s' % os.path.join(cfg['work'], b'case-%d' % seed).decode())
    ok = r['status'] == 'pass'
    print('%d passed, %d failed, 0 skipped' % (ok, not ok))
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
