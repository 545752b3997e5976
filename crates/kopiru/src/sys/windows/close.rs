//! Closing handles: at once ([`close`]), or on the pool of closer threads
//! ([`Closer`]) for the destination files the tree code finished.

use std::io;
use std::os::windows::io::IntoRawHandle;
use std::path::PathBuf;

use windows_sys::Win32::Foundation::{CloseHandle, HANDLE};

use super::{cvt, Fd};

/// Closes a handle and reports the error `CloseHandle` returns.
pub fn close(fd: Fd) -> io::Result<()> {
    let h = fd.file.into_raw_handle();
    // SAFETY: the handle was taken out of the File (into_raw_handle), so it is closed exactly once, here.
    cvt(unsafe { CloseHandle(h as HANDLE) })
}

/// Threads of a [`Closer`]'s pool.
const CLOSER_THREADS: usize = 4;
/// Handles waiting for a closer thread at most: with the threads' own,
/// at most `CLOSER_THREADS + CLOSER_QUEUE` finished files are open at once;
/// a worker that finds the queue full waits.
const CLOSER_QUEUE: usize = 64;

/// Closes the destination files the tree code finished on a pool of
/// [`CLOSER_THREADS`] threads, started at the first file. Defender (and
/// other filter drivers) scan a file when its last handle is closed, which
/// makes `CloseHandle` take 1–10 ms; on the pool that time overlaps the
/// copying of the next files instead of adding to it.
///
/// What kopiru guarantees does not change: a file is handed over only once
/// its data and metadata are written and, under `--sync file`/`end`,
/// flushed (`FlushFileBuffers` returned), and every handle is opened with
/// `FILE_SHARE_DELETE`, so the file can be renamed to its final name while
/// the pool still holds it. A `CloseHandle` error is kept with the handle's
/// path and reported by [`Closer::finish`] as that file's error: the run
/// still fails (exit 23), even though the error comes late. (For a valid
/// handle `NtClose` does not fail: the I/O manager ignores the status of
/// the filesystem's cleanup and close requests, so data errors cannot
/// surface there, and FlushFileBuffers has reported them before. The
/// errors are kept all the same.)
///
/// [`Closer::finish`] closes the queue and joins the threads: the run calls
/// it before it renames staged trees into place (Windows refuses to rename
/// a directory with open files below it) and before it returns its summary.
#[derive(Default)]
pub struct Closer {
    pool: std::sync::OnceLock<Option<ClosePool>>,
    errors: std::sync::Arc<std::sync::Mutex<Vec<(PathBuf, io::Error)>>>,
}

struct ClosePool {
    tx: std::sync::Mutex<Option<std::sync::mpsc::SyncSender<Fd>>>,
    threads: std::sync::Mutex<Vec<std::thread::JoinHandle<()>>>,
}

impl Closer {
    /// A closer for one run: its threads start at the first file.
    pub fn new() -> Closer {
        Closer::default()
    }

    /// Hands `fd` to the pool (waiting while its queue is full), or closes
    /// it here when the pool could not start or has finished. `Ok` means
    /// "handed over": a later failure comes from [`Closer::finish`].
    pub fn close(&self, fd: Fd) -> io::Result<()> {
        let pool = self.pool.get_or_init(|| self.start());
        let tx = pool
            .as_ref()
            .and_then(|p| p.tx.lock().expect("closer lock").clone());
        match tx {
            Some(tx) => match tx.send(fd) {
                Ok(()) => Ok(()),
                // Every thread has ended: close it here.
                Err(std::sync::mpsc::SendError(fd)) => close(fd),
            },
            None => close(fd),
        }
    }

    fn start(&self) -> Option<ClosePool> {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Fd>(CLOSER_QUEUE);
        let rx = std::sync::Arc::new(std::sync::Mutex::new(rx));
        let mut threads = Vec::new();
        for i in 0..CLOSER_THREADS {
            let (rx, errors) = (rx.clone(), self.errors.clone());
            let spawned = std::thread::Builder::new()
                .name(format!("kopiru-close-{i}"))
                .stack_size(64 << 10)
                .spawn(move || loop {
                    // The lock is held only while waiting for the next
                    // handle, not while closing it.
                    let next = rx.lock().expect("closer lock").recv();
                    let Ok(fd) = next else { return };
                    let path = fd.path.clone();
                    if let Err(e) = close(fd) {
                        errors.lock().expect("closer lock").push((path, e));
                    }
                });
            match spawned {
                Ok(t) => threads.push(t),
                Err(_) => break,
            }
        }
        if threads.is_empty() {
            return None;
        }
        Some(ClosePool {
            tx: std::sync::Mutex::new(Some(tx)),
            threads: std::sync::Mutex::new(threads),
        })
    }

    /// Closes every handle handed over, joins the pool's threads, and
    /// returns the `CloseHandle` errors with the paths the files were opened
    /// by. Later [`Closer::close`] calls close at once.
    pub fn finish(&self) -> Vec<(PathBuf, io::Error)> {
        if let Some(Some(pool)) = self.pool.get() {
            drop(pool.tx.lock().expect("closer lock").take());
            let threads = std::mem::take(&mut *pool.threads.lock().expect("closer lock"));
            for t in threads {
                let _ = t.join();
            }
        }
        std::mem::take(&mut *self.errors.lock().expect("closer lock"))
    }
}

impl Drop for Closer {
    fn drop(&mut self) {
        self.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::windows::{create_new, open_path, pwrite_all, scratch, AsFd, O_DIRECTORY};
    use std::ffi::CString;
    use std::fs::File;
    use std::os::windows::fs::OpenOptionsExt;
    use std::os::windows::io::FromRawHandle;

    /// Every handle given to the pool is closed once `finish` returns: each
    /// file can then be opened with no sharing at all, which Windows refuses
    /// while any other handle to it is open.
    #[test]
    fn closer_closes_every_handle_by_finish() {
        let d = scratch("closer");
        let dir = open_path(&d, O_DIRECTORY).unwrap();
        let closer = Closer::new();
        let n = 3 * (CLOSER_THREADS + CLOSER_QUEUE);
        for i in 0..n {
            let name = CString::new(format!("f{i}")).unwrap();
            let fd = create_new(dir.as_fd(), &name, 0o644).unwrap();
            pwrite_all(fd.as_fd(), format!("data {i}").as_bytes(), 0).unwrap();
            closer.close(fd).unwrap();
        }
        assert!(closer.finish().is_empty());
        for i in 0..n {
            let p = d.join(format!("f{i}"));
            let exclusive = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .share_mode(0)
                .open(&p);
            assert!(exclusive.is_ok(), "f{i} still open: {exclusive:?}");
            drop(exclusive);
            assert_eq!(std::fs::read(&p).unwrap(), format!("data {i}").as_bytes());
        }
        // After finish, a handle is closed at once.
        let fd = create_new(dir.as_fd(), c"late", 0o644).unwrap();
        closer.close(fd).unwrap();
        drop(dir);
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// A `CloseHandle` failure on the pool is not lost: `finish` returns it
    /// with the path the handle was opened by.
    #[test]
    fn closer_reports_a_failed_close() {
        // A handle value no object has in this test process (handles are
        // small multiples of 4), so CloseHandle fails (ERROR_INVALID_HANDLE).
        let bogus = 0x7fff_fff0usize as HANDLE;
        // SAFETY: the File is never read, written or dropped: the pool takes
        // its raw value back (into_raw_handle) and closes it, which fails
        // without touching any real object.
        let file = unsafe { File::from_raw_handle(bogus as _) };
        let fd = Fd::new(file, PathBuf::from(r"\\?\Z:\nowhere"));
        let closer = Closer::new();
        closer.close(fd).unwrap();
        let errors = closer.finish();
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].0, PathBuf::from(r"\\?\Z:\nowhere"));
        assert_eq!(
            errors[0].1.raw_os_error(),
            Some(windows_sys::Win32::Foundation::ERROR_INVALID_HANDLE as i32)
        );
    }
}
