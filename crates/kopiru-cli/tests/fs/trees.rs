//! Source trees for the tests, with every kind of entry and metadata.

use std::ffi::{CString, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

type Res = Result<(), String>;

fn c(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).unwrap()
}

fn check(r: libc::c_int, what: &str, p: &Path) -> Res {
    if r < 0 {
        return Err(format!(
            "{what} {}: {}",
            p.display(),
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// Deterministic pseudo-random bytes.
pub fn bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

pub fn write_random(p: &Path, len: usize, seed: u64) -> Res {
    std::fs::write(p, bytes(len, seed)).map_err(|e| format!("write {}: {e}", p.display()))
}

/// A file of `size` bytes with 1 MiB of data at each offset, holes elsewhere.
pub fn sparse_file(p: &Path, size: u64, data_at: &[u64]) -> Res {
    use std::os::unix::fs::FileExt;
    let f = std::fs::File::create(p).map_err(|e| e.to_string())?;
    f.set_len(size).map_err(|e| e.to_string())?;
    for (i, off) in data_at.iter().enumerate() {
        f.write_all_at(&bytes(1 << 20, i as u64 + 7), *off)
            .map_err(|e| e.to_string())?;
    }
    f.sync_all().map_err(|e| e.to_string())
}

fn set_times(p: &Path, i: i64) -> Res {
    let t = [
        libc::timespec {
            tv_sec: 1_600_000_000 + i,
            tv_nsec: 123_456_789 + i,
        },
        libc::timespec {
            tv_sec: 1_500_000_000 + i * 7,
            tv_nsec: 987_654_321 - i,
        },
    ];
    check(
        // SAFETY: the path is NUL-terminated and `t` holds the two timespecs utimensat reads.
        unsafe {
            libc::utimensat(
                libc::AT_FDCWD,
                c(p).as_ptr(),
                t.as_ptr(),
                libc::AT_SYMLINK_NOFOLLOW,
            )
        },
        "utimensat",
        p,
    )
}

fn set_xattr(p: &Path, name: &str, value: &[u8]) -> Res {
    let n = CString::new(name).unwrap();
    check(
        // SAFETY: the path and `n` are NUL-terminated; `value` is readable for the length given.
        unsafe {
            libc::setxattr(
                c(p).as_ptr(),
                n.as_ptr(),
                value.as_ptr().cast(),
                value.len(),
                0,
            )
        },
        "setxattr",
        p,
    )
}

fn lchown(p: &Path, uid: u32, gid: u32) -> Res {
    check(
        // SAFETY: the path is a NUL-terminated C string that outlives the call.
        unsafe { libc::lchown(c(p).as_ptr(), uid, gid) },
        "lchown",
        p,
    )
}

fn chmod(p: &Path, mode: u32) -> Res {
    // SAFETY: the path is a NUL-terminated C string that outlives the call.
    check(unsafe { libc::chmod(c(p).as_ptr(), mode) }, "chmod", p)
}

/// A tree with every kind of entry and metadata kopiru keeps: files of many
/// sizes, empty files and directories, symlinks (relative, absolute,
/// dangling), hard links, a FIFO, a device node, setuid and read-only modes,
/// a read-only directory, a non-UTF-8 name, xattrs and an ACL, foreign
/// owners, and nanosecond times on everything.
pub fn rich(root: &Path) -> Res {
    let io = |e: std::io::Error| e.to_string();
    let p = |s: &str| root.join(s);
    for d in ["a/b/c", "empty", "ro"] {
        std::fs::create_dir_all(p(d)).map_err(io)?;
    }
    std::fs::write(p("a/zero"), b"").map_err(io)?;
    std::fs::write(p("a/one"), b"1").map_err(io)?;
    write_random(&p("a/small"), 4000, 1)?;
    write_random(&p("a/b/big"), (3 << 20) + 7, 2)?;
    write_random(&p("a/b/c/exec"), 70_000, 3)?;
    write_random(&p("setuid"), 100, 4)?;
    write_random(&p("ro/file"), 10, 5)?;
    std::fs::write(root.join(OsStr::from_bytes(b"a/caf\xe9")), b"latin-1 name").map_err(io)?;
    std::os::unix::fs::symlink("small", p("a/rel")).map_err(io)?;
    std::os::unix::fs::symlink("/etc/hostname", p("a/abs")).map_err(io)?;
    std::os::unix::fs::symlink("nowhere/at/all", p("a/dangling")).map_err(io)?;
    std::fs::hard_link(p("a/small"), p("a/b/small-link")).map_err(io)?;
    std::fs::hard_link(p("a/one"), p("a/b/c/one-1")).map_err(io)?;
    std::fs::hard_link(p("a/one"), p("one-2")).map_err(io)?;
    check(
        // SAFETY: the path is a NUL-terminated C string that outlives the call.
        unsafe { libc::mkfifo(c(&p("a/fifo")).as_ptr(), 0o640) },
        "mkfifo",
        &p("a/fifo"),
    )?;
    check(
        // SAFETY: the path is a NUL-terminated C string that outlives the call.
        unsafe {
            libc::mknod(
                c(&p("a/null")).as_ptr(),
                libc::S_IFCHR | 0o666,
                libc::makedev(1, 3),
            )
        },
        "mknod",
        &p("a/null"),
    )?;
    chmod(&p("a/b/c/exec"), 0o755)?;
    chmod(&p("setuid"), 0o4755)?;
    chmod(&p("a/small"), 0o444)?;
    chmod(&p("a/b"), 0o2750)?;
    set_xattr(&p("a/small"), "user.kopiru", b"file xattr")?;
    set_xattr(&p("a/b"), "user.kopiru.dir", b"dir xattr")?;
    // A POSIX ACL is an xattr too: user 1234 may read a/one.
    let acl: Vec<u8> = [
        &2u32.to_le_bytes()[..],
        &[1, 0, 6, 0],
        &u32::MAX.to_le_bytes(), // USER_OBJ rw-
        &[2, 0, 4, 0],
        &1234u32.to_le_bytes(), // USER 1234 r--
        &[4, 0, 4, 0],
        &u32::MAX.to_le_bytes(), // GROUP_OBJ r--
        &[0x10, 0, 4, 0],
        &u32::MAX.to_le_bytes(), // MASK r--
        &[0x20, 0, 4, 0],
        &u32::MAX.to_le_bytes(), // OTHER r--
    ]
    .concat();
    set_xattr(&p("a/one"), "system.posix_acl_access", &acl)?;
    lchown(&p("a/one"), 1234, 5678)?;
    lchown(&p("a/b/c"), 42, 43)?;
    lchown(&p("a/rel"), 7, 8)?;
    lchown(&p("setuid"), 1000, 1000)?;
    chmod(&p("setuid"), 0o4755)?; // chown cleared it
                                  // Times last, deepest first, directories after their contents.
    let order = [
        "a/b/c/exec",
        "a/b/c/one-1",
        "a/b/c",
        "a/b/big",
        "a/b/small-link",
        "a/b",
        "a/zero",
        "a/one",
        "a/small",
        "a/rel",
        "a/abs",
        "a/dangling",
        "a/fifo",
        "a/null",
        "a",
        "empty",
        "ro/file",
        "ro",
        "setuid",
        "one-2",
    ];
    let latin = root.join(OsStr::from_bytes(b"a/caf\xe9"));
    set_times(&latin, 99)?;
    for (i, name) in order.iter().enumerate() {
        set_times(&p(name), i as i64)?;
    }
    set_times(&p("a"), 50)?;
    chmod(&p("ro"), 0o555)?;
    set_times(&p("ro"), 51)?;
    set_times(root, 52)?;
    Ok(())
}

/// One directory of `files` regular files (f0000, f0001, ...: 0 to 5 KB,
/// five different modes, nanosecond times), two more names hard-linked to
/// f0010, a symlink and a subdirectory: more than one worker's share, so
/// kopiru's workers share it (as a pipeline on Btrfs).
pub fn large_dir(root: &Path, files: usize) -> Res {
    let io = |e: std::io::Error| e.to_string();
    std::fs::create_dir_all(root.join("sub")).map_err(io)?;
    write_random(&root.join("sub/inner"), 300, 7)?;
    const MODES: [u32; 5] = [0o644, 0o600, 0o755, 0o640, 0o444];
    for i in 0..files {
        let p = root.join(format!("f{i:04}"));
        write_random(&p, (i * 37) % 5000, i as u64)?;
        chmod(&p, MODES[i % MODES.len()])?;
    }
    for name in ["link-a", "link-b"] {
        std::fs::hard_link(root.join("f0010"), root.join(name)).map_err(io)?;
    }
    std::os::unix::fs::symlink("f0001", root.join("sym")).map_err(io)?;
    for i in 0..files {
        set_times(&root.join(format!("f{i:04}")), i as i64)?;
    }
    set_times(&root.join("sub"), 1)?;
    set_times(root, 2)
}

/// A chain of `levels` directories with 200-byte names and a file at the
/// bottom, made with directory-relative calls (its path is too long for
/// anything else). Returns the length of the deepest path.
pub fn deep(root: &Path, levels: usize) -> Result<usize, String> {
    std::fs::create_dir_all(root).map_err(|e| e.to_string())?;
    let name = CString::new(vec![b'd'; 200]).unwrap();
    // SAFETY: the path is a NUL-terminated C string that outlives the call.
    let mut fd = unsafe { libc::open(c(root).as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY) };
    check(fd, "open", root)?;
    for i in 0..levels {
        let f = CString::new(format!("file{i}")).unwrap();
        let data = bytes(100 + i, i as u64);
        // SAFETY: `f` is a NUL-terminated C string that outlives the call; `fd` is an open directory.
        let ffd = unsafe { libc::openat(fd, f.as_ptr(), libc::O_WRONLY | libc::O_CREAT, 0o644) };
        check(ffd, "create", root)?;
        // SAFETY: `ffd` was opened above; `data` is readable for the length given; closed once.
        unsafe {
            libc::write(ffd, data.as_ptr().cast(), data.len());
            libc::close(ffd);
        }
        check(
            // SAFETY: `name` is NUL-terminated; `fd` is an open directory.
            unsafe { libc::mkdirat(fd, name.as_ptr(), 0o755) },
            "mkdirat",
            root,
        )?;
        // SAFETY: `name` is a NUL-terminated C string that outlives the call; `fd` is an open directory.
        let next = unsafe { libc::openat(fd, name.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY) };
        check(next, "openat", root)?;
        // SAFETY: `fd` was opened above and is closed once.
        unsafe { libc::close(fd) };
        fd = next;
    }
    // SAFETY: `fd` was opened above and is closed once.
    unsafe { libc::close(fd) };
    Ok(root.as_os_str().len() + levels * 201)
}
