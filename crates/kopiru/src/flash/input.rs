//! The image to flash, opened and recognised before any device is touched:
//! its format from its bytes ([`super::sniff`]), and its decoded size where
//! the format records it ([`super::size`]), so that an image that is not
//! what it claims, or too big for a device, is refused before anything is
//! written. Standard input's first bytes, read to recognise it, are kept
//! and given back first when it is decoded.

use super::size;
use super::sniff::{recognise, Format, SNIFF};
use crate::sys::FileExt;
use crate::sys::{self, Stat};
use crate::{Error, Op, Refusal, Side};
use std::io::{self, Read};
use std::path::{Path, PathBuf};

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
    /// gzip trailer keeps the size modulo 4 GiB).
    pub at_least: Option<u64>,
    /// The image file's status (`None`: standard input).
    pub(crate) stat: Option<Stat>,
    /// Standard input's first bytes, read to recognise it.
    pub(super) stdin_head: Vec<u8>,
    /// The image file, open (`None`: standard input).
    pub(super) file: Option<std::fs::File>,
}

impl Image {
    /// Opens the image at `path` (`-`: standard input) and recognises it,
    /// as `format` says when given.
    ///
    /// # Errors
    /// It cannot be read ([`Side::Source`]), or it is refused
    /// ([`Refusal::NotAnImage`]): nothing has been written then.
    pub fn open(path: &Path, format: Option<Format>) -> Result<Image, Error> {
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
            });
        }
        // The status of the file opened, not of the path looked up again:
        // what is checked (its device, against the targets) is what is read.
        let f = std::fs::File::open(path).map_err(failed(Op::Open))?;
        let stat = sys::fstat(sys::AsFd::as_fd(&f)).map_err(failed(Op::Stat))?;
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
        let (size, at_least) = match regular {
            true => size::decoded(&f, stat.size, format),
            false => (None, None),
        };
        Ok(Image {
            path: path.to_path_buf(),
            format,
            size,
            at_least,
            stat: Some(stat),
            stdin_head: Vec::new(),
            file: Some(f),
        })
    }

    /// A raw image in a non-empty regular file (which is mapped, not
    /// read), and its length.
    pub(super) fn raw_file(&self) -> Option<(&std::fs::File, u64)> {
        let st = self.stat.as_ref()?;
        let raw = self.format == Format::Raw && st.kind() == sys::FileKind::File && st.size > 0;
        raw.then_some((self.file.as_ref()?, st.size))
    }
}
