//! A description of a tree (every entry's type, content hash, mode, times,
//! owner, xattrs, link target, hard-link group), read with directory-relative
//! calls so paths longer than PATH_MAX work, and with O_NOATIME so reading it
//! does not change it.

use std::collections::{BTreeMap, HashMap};
use std::ffi::{CStr, CString};
use std::hash::Hasher;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub kind: char,
    pub perm: u32,
    pub size: u64,
    pub blocks: u64,
    pub mtime: (i64, i64),
    pub atime: (i64, i64),
    pub uid: u32,
    pub gid: u32,
    pub rdev: u64,
    pub target: Option<Vec<u8>>,
    pub hash: u64,
    pub xattrs: Vec<(Vec<u8>, Vec<u8>)>,
    /// The first path (in walk order) with the same inode, for hard links.
    pub link_group: Option<Vec<u8>>,
    pub ino: (u64, u64),
}

pub type Manifest = BTreeMap<Vec<u8>, Entry>;

/// Which fields `compare` checks besides type, content and link targets.
#[derive(Clone, Copy)]
pub struct Fields {
    /// The permission bits, exactly (with -p, -a).
    pub mode: bool,
    /// The permission bits as a copy without -p makes them (cp's): the
    /// source's less the umask, no set-uid, set-gid or sticky.
    pub cp_mode: bool,
    pub mtime: bool,
    pub atime: bool,
    pub owner: bool,
    pub xattrs: bool,
    pub links: bool,
}

pub const ALL: Fields = Fields {
    mode: true,
    cp_mode: false,
    mtime: true,
    atime: true,
    owner: true,
    xattrs: true,
    links: true,
};
/// What a copy with the default options keeps.
pub const DEFAULT: Fields = Fields {
    mode: false,
    cp_mode: true,
    mtime: true,
    atime: true,
    owner: false,
    xattrs: false,
    links: true,
};

fn cvt(r: libc::c_int, what: &str) -> Result<libc::c_int, String> {
    if r < 0 {
        Err(format!("{what}: {}", std::io::Error::last_os_error()))
    } else {
        Ok(r)
    }
}

pub fn manifest(root: &Path) -> Result<Manifest, String> {
    let c = CString::new(root.as_os_str().as_bytes()).unwrap();
    let mut out = Manifest::new();
    let mut seen = HashMap::new();
    let st = lstat_at(libc::AT_FDCWD, &c)?;
    if st.st_mode & libc::S_IFMT == libc::S_IFDIR {
        let fd = cvt(
            // SAFETY: the path is a NUL-terminated C string that outlives the call.
            unsafe {
                libc::open(
                    c.as_ptr(),
                    libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOATIME,
                )
            },
            "open root",
        )?;
        out.insert(Vec::new(), entry(fd, None, &st, &mut seen, b"")?);
        walk(fd, Vec::new(), &mut out, &mut seen)?;
        // SAFETY: `fd` was opened above and is closed once.
        unsafe { libc::close(fd) };
    } else {
        out.insert(
            Vec::new(),
            entry(libc::AT_FDCWD, Some(&c), &st, &mut seen, b"")?,
        );
    }
    Ok(out)
}

fn lstat_at(dir: libc::c_int, name: &CStr) -> Result<libc::stat, String> {
    // SAFETY: all-zero is a valid `libc::stat` (plain integers).
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    cvt(
        // SAFETY: `name` is NUL-terminated and `st` a valid out-pointer; `dir` is open.
        unsafe { libc::fstatat(dir, name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) },
        "lstat",
    )?;
    Ok(st)
}

fn walk(
    dir: libc::c_int,
    rel: Vec<u8>,
    out: &mut Manifest,
    seen: &mut HashMap<(u64, u64), Vec<u8>>,
) -> Result<(), String> {
    // SAFETY: `dir` is an open descriptor.
    let dup = cvt(unsafe { libc::dup(dir) }, "dup")?;
    // SAFETY: `dup` is a descriptor of our own, which the DIR takes over.
    let d = unsafe { libc::fdopendir(dup) };
    let mut names = Vec::new();
    loop {
        // SAFETY: `d` is the DIR opened above, not yet closed.
        let e = unsafe { libc::readdir(d) };
        if e.is_null() {
            break;
        }
        // SAFETY: readdir returned an entry whose `d_name` is NUL-terminated; copied before the next readdir.
        let name = unsafe { CStr::from_ptr((*e).d_name.as_ptr()) }.to_owned();
        if name.as_bytes() != b"." && name.as_bytes() != b".." {
            names.push(name);
        }
    }
    // SAFETY: `d` is the DIR opened above, closed once.
    unsafe { libc::closedir(d) };
    names.sort();
    for name in names {
        let mut path = rel.clone();
        if !path.is_empty() {
            path.push(b'/');
        }
        path.extend_from_slice(name.as_bytes());
        let st = lstat_at(dir, &name)?;
        let e = entry(dir, Some(&name), &st, seen, &path)?;
        out.insert(path.clone(), e);
        if st.st_mode & libc::S_IFMT == libc::S_IFDIR {
            let fd = cvt(
                // SAFETY: `name` is a NUL-terminated C string that outlives the call; the directory descriptor is open.
                unsafe {
                    libc::openat(
                        dir,
                        name.as_ptr(),
                        libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_NOATIME,
                    )
                },
                "open dir",
            )?;
            let r = walk(fd, path, out, seen);
            // SAFETY: `fd` was opened above and is closed once.
            unsafe { libc::close(fd) };
            r?;
        }
    }
    Ok(())
}

fn entry(
    dir: libc::c_int,
    name: Option<&CStr>,
    st: &libc::stat,
    seen: &mut HashMap<(u64, u64), Vec<u8>>,
    path: &[u8],
) -> Result<Entry, String> {
    let fmt = st.st_mode & libc::S_IFMT;
    let kind = match fmt {
        libc::S_IFREG => 'f',
        libc::S_IFDIR => 'd',
        libc::S_IFLNK => 'l',
        libc::S_IFIFO => 'p',
        libc::S_IFCHR => 'c',
        libc::S_IFBLK => 'b',
        _ => 's',
    };
    let mut e = Entry {
        kind,
        perm: st.st_mode & 0o7777,
        size: if kind == 'd' { 0 } else { st.st_size as u64 },
        blocks: st.st_blocks as u64,
        mtime: (st.st_mtime, st.st_mtime_nsec),
        atime: (st.st_atime, st.st_atime_nsec),
        uid: st.st_uid,
        gid: st.st_gid,
        rdev: st.st_rdev,
        target: None,
        hash: 0,
        xattrs: Vec::new(),
        link_group: None,
        ino: (st.st_dev, st.st_ino),
    };
    if kind == 'f' && st.st_nlink > 1 {
        let first = seen
            .entry((st.st_dev, st.st_ino))
            .or_insert_with(|| path.to_vec());
        e.link_group = Some(first.clone());
    }
    if kind == 'l' {
        let name = name.unwrap();
        let mut buf = vec![0u8; 8192];
        // SAFETY: `name` is NUL-terminated; `buf` is writable for the length given.
        let n = unsafe { libc::readlinkat(dir, name.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
        buf.truncate(cvt(n as libc::c_int, "readlink")? as usize);
        e.target = Some(buf);
        return Ok(e);
    }
    if kind != 'f' && kind != 'd' {
        return Ok(e);
    }
    let fd = match name {
        Some(name) => cvt(
            // SAFETY: `name` is a NUL-terminated C string that outlives the call; the directory descriptor is open.
            unsafe {
                libc::openat(
                    dir,
                    name.as_ptr(),
                    libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NOATIME,
                )
            },
            "open",
        )?,
        // SAFETY: `dir` is an open descriptor.
        None => cvt(unsafe { libc::dup(dir) }, "dup")?,
    };
    e.xattrs = xattrs(fd);
    if kind == 'f' {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        let mut buf = vec![0u8; 1 << 20];
        loop {
            // SAFETY: `fd` is open; `buf` is writable for the length given.
            let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
            if n <= 0 {
                break;
            }
            h.write(&buf[..n as usize]);
        }
        e.hash = h.finish();
    }
    // SAFETY: `fd` was opened above and is closed once.
    unsafe { libc::close(fd) };
    Ok(e)
}

fn xattrs(fd: libc::c_int) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut names = vec![0u8; 65536];
    // SAFETY: `fd` is open; `names` is writable for the length given.
    let n = unsafe { libc::flistxattr(fd, names.as_mut_ptr().cast(), names.len()) };
    if n <= 0 {
        return Vec::new();
    }
    let mut out: Vec<_> = names[..n as usize]
        .split(|&b| b == 0)
        .filter(|s| !s.is_empty())
        .map(|name| {
            let c = CString::new(name).unwrap();
            let mut v = vec![0u8; 65536];
            // SAFETY: `fd` is open; `c` is NUL-terminated; `v` is writable for the length given.
            let m = unsafe { libc::fgetxattr(fd, c.as_ptr(), v.as_mut_ptr().cast(), v.len()) };
            v.truncate(m.max(0) as usize);
            (name.to_vec(), v)
        })
        .collect();
    // XFS shows POSIX ACLs a second time under these names; they are its
    // own bookkeeping, not the file's.
    out.retain(|(n, _)| !n.starts_with(b"trusted.SGI_ACL_"));
    out.sort();
    out
}

/// Differences between two manifests in the chosen fields, empty if none.
pub fn compare(a: &Manifest, b: &Manifest, f: Fields) -> Vec<String> {
    compare_except(a, b, f, &[])
}

/// As `compare`, ignoring the paths in `skip` (b"" is the root).
pub fn compare_except(a: &Manifest, b: &Manifest, f: Fields, skip: &[&[u8]]) -> Vec<String> {
    let a: Manifest = a
        .iter()
        .filter(|(p, _)| !skip.contains(&p.as_slice()))
        .map(|(p, e)| (p.clone(), e.clone()))
        .collect();
    let b: Manifest = b
        .iter()
        .filter(|(p, _)| !skip.contains(&p.as_slice()))
        .map(|(p, e)| (p.clone(), e.clone()))
        .collect();
    let (a, b) = (&a, &b);
    let mut diffs = Vec::new();
    let show = |p: &[u8]| String::from_utf8_lossy(p).into_owned();
    for (p, ea) in a {
        let Some(eb) = b.get(p) else {
            diffs.push(format!("missing in copy: {}", show(p)));
            continue;
        };
        let mut d = |what: &str, same: bool| {
            if !same {
                diffs.push(format!("{}: {what} differs: {ea:?} vs {eb:?}", show(p)));
            }
        };
        d("kind", ea.kind == eb.kind);
        d("content", ea.hash == eb.hash && ea.size == eb.size);
        d("link target", ea.target == eb.target);
        d("device number", ea.rdev == eb.rdev);
        if f.mode && ea.kind != 'l' {
            d("mode", ea.perm == eb.perm);
        }
        if f.cp_mode && ea.kind != 'l' {
            d("mode (source's less the umask)", ea.perm & 0o777 & !umask() == eb.perm);
        }
        if f.mtime {
            d("mtime", ea.mtime == eb.mtime);
        }
        // readlink() updates a symlink's atime and Linux has no O_NOATIME for
        // it, so any reader (this walk included) changes it: not compared.
        if f.atime && ea.kind != 'l' {
            d("atime", ea.atime == eb.atime);
        }
        if f.owner {
            d("owner", (ea.uid, ea.gid) == (eb.uid, eb.gid));
        }
        if f.xattrs {
            d("xattrs", ea.xattrs == eb.xattrs);
        }
        if f.links {
            d("hard-link group", ea.link_group == eb.link_group);
        }
    }
    for p in b.keys() {
        if !a.contains_key(p) {
            diffs.push(format!("extra in copy: {}", show(p)));
        }
    }
    diffs
}

/// This process's umask (kopiru, run by it, inherits it).
fn umask() -> u32 {
    // SAFETY: umask only swaps the process's mask; it is put back at once.
    let old = unsafe { libc::umask(0o022) };
    // SAFETY: as above.
    unsafe { libc::umask(old) };
    old
}
