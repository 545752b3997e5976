//! A read-only memory map of a file (Unix), for reading a large file
//! sequentially without a copy through a buffer.

use super::FdRef;
use std::io;
use std::os::fd::{AsFd, AsRawFd};

/// A read-only memory map of a file.
pub struct Mapping {
    ptr: *mut libc::c_void,
    len: usize,
}

// SAFETY: a shared, read-only mapping owned by this value alone (unmapped on drop):
// reading it from, or dropping it on, any thread is safe.
unsafe impl Send for Mapping {}
// SAFETY: as for Send: through `&Mapping` the pages are only read (and madvised),
// never written, so sharing it between threads is sound.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps the first `len` bytes of `file` (read-only, shared), for a
    /// sequential read.
    pub fn new(file: &std::fs::File, len: usize) -> io::Result<Mapping> {
        let fd: FdRef = file.as_fd();
        // SAFETY: a new mapping at an address the kernel picks (null hint); `fd` is borrowed
        // and need not outlive it. Failure (MAP_FAILED) is checked below.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `ptr`..`ptr + len` is the mapping just made; the advice changes no data.
        unsafe { libc::madvise(ptr, len, libc::MADV_SEQUENTIAL) };
        Ok(Mapping { ptr, len })
    }

    /// The mapped bytes.
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: `ptr` is a read-only mapping of `len` bytes that lives until `self` drops,
        // and the returned slice borrows `self`. (As with any file mmap, this assumes no
        // one truncates or rewrites the file meanwhile.)
        unsafe { std::slice::from_raw_parts(self.ptr as *const u8, self.len) }
    }

    /// Drops the process's hold on pages no longer needed (the page cache
    /// keeps them), so they stop counting as resident memory.
    pub fn release(&self, off: usize, len: usize) {
        let page = 4096;
        let start = off.div_ceil(page) * page;
        let end = ((off + len) / page * page).min(self.len);
        if end > start {
            // SAFETY: start < end <= `self.len`, so the range lies inside the mapping; on a shared
            // file mapping MADV_DONTNEED only drops pages, which refault with the file's data.
            unsafe {
                libc::madvise(
                    (self.ptr as *mut u8).add(start).cast(),
                    end - start,
                    libc::MADV_DONTNEED,
                )
            };
        }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are the mapping made in `new`, unmapped once, here; no slice
        // from `bytes` outlives `self`.
        unsafe { libc::munmap(self.ptr, self.len) };
    }
}
