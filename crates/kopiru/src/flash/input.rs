//! The image to flash, opened and recognised before any device is touched:
//! its format from its bytes ([`super::sniff`]), and its decoded size where
//! the format records it (crate::codec::size), so that an image that is not
//! what it claims, or too big for a device, is refused before anything is
//! written. Standard input's first bytes, read to recognise it, are kept
//! and given back first when it is decoded.

use super::http::{self, Download, DownloadStats, HttpOptions};
use super::sniff::{recognise, SNIFF};
use crate::codec::size;
use crate::sys::FileExt;
use crate::sys::{self, Stat};
use crate::Format;
use crate::{Error, Op, Refusal, Side};
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// An image, recognised.
#[derive(Debug)]
pub struct Image {
    /// As given (`-`: standard input).
    pub path: PathBuf,
    /// Its format, from its bytes.
    pub format: Format,
    /// Its size once decoded, where the format records it: a raw file's
    /// length, the sum of an xz file's indexes, every zstd frame's content
    /// size.
    pub size: Option<u64>,
    /// Where the exact size is not recorded, a size it has at least (a
    /// gzip trailer keeps the size modulo 4 GiB; over HTTP, a zstd file's
    /// first frame header).
    pub at_least: Option<u64>,
    /// The image file's status (`None`: standard input).
    pub(crate) stat: Option<Stat>,
    /// Standard input's first bytes, read to recognise it.
    pub(super) stdin_head: Vec<u8>,
    /// The image file, open (`None`: standard input or a URL).
    pub(super) file: Option<std::fs::File>,
    /// A URL's download, its first bytes read (in `stdin_head`): taken
    /// by the reader when the image is decoded.
    pub(super) download: Mutex<Option<Download>>,
    /// What the download has done (`None`: not a URL).
    pub(crate) download_stats: Option<Arc<DownloadStats>>,
}

impl Image {
    /// Opens the image at `path` (`-`: standard input) and recognises it,
    /// as `format` says when given.
    ///
    /// # Errors
    /// It cannot be read ([`Side::Source`]), or it is refused
    /// ([`Refusal::NotAnImage`]): nothing has been written then.
    pub fn open(path: &Path, format: Option<Format>) -> Result<Image, Error> {
        Image::open_with(path, format, &HttpOptions::default())
    }

    /// [`Image::open`], with `http` for an `http://` or `https://` URL:
    /// the download starts, and its first bytes are read to recognise it;
    /// the decoded size is taken from Content-Length (raw), or from the
    /// end of the file, asked for with a Range request (an xz index, a
    /// gzip trailer), where the server gives ranges.
    ///
    /// # Errors
    /// As [`Image::open`]; an HTTP error status is said in the error.
    pub fn open_with(
        path: &Path,
        format: Option<Format>,
        http: &HttpOptions,
    ) -> Result<Image, Error> {
        if http::is_url(path) {
            return Image::open_url(path, format, http);
        }
        let failed = |op: Op| move |e: io::Error| Error::io(Side::Source, path, op, e);
        let refused = |why| Error::refused(Side::Source, path, Op::Read, Refusal::NotAnImage(why));
        if path == Path::new("-") {
            let mut head = Vec::with_capacity(SNIFF);
            io::stdin()
                .lock()
                .take(SNIFF as u64)
                .read_to_end(&mut head)
                .map_err(failed(Op::Read))?;
            let format = recognise(&head, None, format).map_err(refused)?;
            return Ok(Image {
                path: path.to_path_buf(),
                format,
                size: None,
                at_least: None,
                stat: None,
                stdin_head: head,
                file: None,
                download: Mutex::new(None),
                download_stats: None,
            });
        }
        // The status of the file opened, not of the path looked up again:
        // what is checked (its device, against the targets) is what is read.
        let fd = sys::open_path(path, sys::O_RDONLY).map_err(failed(Op::Open))?;
        let stat = sys::fstat(sys::AsFd::as_fd(&fd)).map_err(failed(Op::Stat))?;
        let f = std::fs::File::from(fd);
        let mut head = vec![0u8; SNIFF];
        let mut n = 0;
        while n < head.len() {
            match f.read_at(&mut head[n..], n as u64) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(failed(Op::Read)(e)),
            }
        }
        head.truncate(n);
        let format = recognise(&head, Some(path), format).map_err(refused)?;
        let regular = stat.kind() == sys::FileKind::File;
        let size::DecodedSize {
            exact: size,
            at_least,
        } = match regular {
            true => size::decoded(&f, stat.size, format),
            false => size::DecodedSize::default(),
        };
        Ok(Image {
            path: path.to_path_buf(),
            format,
            size,
            at_least,
            stat: Some(stat),
            stdin_head: Vec::new(),
            file: Some(f),
            download: Mutex::new(None),
            download_stats: None,
        })
    }

    /// A URL: its first bytes read to recognise it, its size where known.
    fn open_url(path: &Path, format: Option<Format>, o: &HttpOptions) -> Result<Image, Error> {
        let failed = |op: Op| move |e: io::Error| Error::io(Side::Source, path, op, e);
        let refused = |why| Error::refused(Side::Source, path, Op::Read, Refusal::NotAnImage(why));
        let url = path.to_string_lossy().into_owned();
        let mut d = Download::open(&url, o).map_err(failed(Op::Open))?;
        let mut head = Vec::with_capacity(SNIFF);
        (&mut d)
            .take(SNIFF as u64)
            .read_to_end(&mut head)
            .map_err(failed(Op::Read))?;
        let name = Path::new(http::file_name(&url));
        let format = recognise(&head, Some(name), format).map_err(refused)?;
        let size::DecodedSize {
            exact: size,
            at_least,
        } = match d.len {
            Some(len) => {
                // The end of the file, asked for once; the start is had.
                let tail_len = len.min(256 << 10);
                let tail = std::cell::OnceCell::new();
                let at = |off: u64, n: usize| -> Option<Vec<u8>> {
                    let end = off.checked_add(n as u64)?;
                    if end <= head.len() as u64 {
                        return Some(head[off as usize..end as usize].to_vec());
                    }
                    let t: &Option<Vec<u8>> =
                        tail.get_or_init(|| d.range(len - tail_len, tail_len as usize));
                    match t {
                        Some(t) if off >= len - tail_len && end <= len => {
                            let from = (off - (len - tail_len)) as usize;
                            Some(t[from..from + n].to_vec())
                        }
                        _ => d.range(off, n),
                    }
                };
                size::decoded_by(&at, len, format, false)
            }
            None => size::DecodedSize::default(),
        };
        let stats = d.stats.clone();
        Ok(Image {
            path: path.to_path_buf(),
            format,
            size,
            at_least,
            stat: None,
            stdin_head: head,
            file: None,
            download: Mutex::new(Some(d)),
            download_stats: Some(stats),
        })
    }

    /// Whether the image comes from a URL.
    pub fn is_url(&self) -> bool {
        self.download_stats.is_some()
    }

    /// A raw image in a non-empty regular file (which is mapped, not
    /// read), and its length.
    pub(super) fn raw_file(&self) -> Option<(&std::fs::File, u64)> {
        let st = self.stat.as_ref()?;
        let raw = self.format == Format::Raw && st.kind() == sys::FileKind::File && st.size > 0;
        raw.then_some((self.file.as_ref()?, st.size))
    }
}
