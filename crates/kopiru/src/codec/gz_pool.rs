//! gzip on several threads: each chunk becomes a gzip member of its own,
//! compressed on a worker and written in order; `gzip -d` and `kopiru
//! flash` read the members as one stream.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::sync::{mpsc, Arc, Mutex};

/// A chunk to compress: its sequence number and bytes.
type Job = (u64, Vec<u8>);
/// A compressed chunk: its number, the member, and the input buffer back.
type Done = (u64, io::Result<Vec<u8>>, Vec<u8>);

/// The pool: chunks queued to the workers, members written in order.
pub(super) struct GzPool {
    out: BufWriter<File>,
    jobs: Option<mpsc::SyncSender<Job>>,
    done: mpsc::Receiver<Done>,
    workers: Vec<std::thread::JoinHandle<()>>,
    /// Members finished out of order, waiting for their turn, with the
    /// length of their input.
    waiting: BTreeMap<u64, (Vec<u8>, usize)>,
    next_in: u64,
    next_out: u64,
    /// Input buffers back from the workers, reused.
    spare: Vec<Vec<u8>>,
    /// Most chunks in flight: memory stays at this many chunks and members.
    limit: u64,
    /// Image bytes whose members are written: the work done.
    done_in: u64,
}

impl GzPool {
    pub(super) fn new(out: BufWriter<File>, level: u32, threads: u32) -> GzPool {
        let (jobs, rx) = mpsc::sync_channel::<Job>(threads as usize);
        let rx = Arc::new(Mutex::new(rx));
        let (done_tx, done) = mpsc::channel::<Done>();
        let workers = (0..threads)
            .map(|_| {
                let rx = Arc::clone(&rx);
                let done_tx = done_tx.clone();
                std::thread::spawn(move || loop {
                    let job = rx.lock().map(|r| r.recv());
                    let Ok(Ok((seq, input))) = job else { return };
                    let level = flate2::Compression::new(level);
                    let mut e =
                        flate2::write::GzEncoder::new(Vec::with_capacity(input.len() / 2), level);
                    let member = e.write_all(&input).and_then(|()| e.finish());
                    if done_tx.send((seq, member, input)).is_err() {
                        return;
                    }
                })
            })
            .collect();
        GzPool {
            out,
            jobs: Some(jobs),
            done,
            workers,
            waiting: BTreeMap::new(),
            next_in: 0,
            next_out: 0,
            spare: Vec::new(),
            limit: 2 * u64::from(threads),
            done_in: 0,
        }
    }

    /// Image bytes compressed and written so far.
    pub(super) fn done_in(&self) -> u64 {
        self.done_in
    }

    /// Queues `data` as the next member; first waits for (and writes) one
    /// member while the pool is full.
    pub(super) fn put(&mut self, data: &[u8]) -> io::Result<()> {
        while self.next_in - self.next_out >= self.limit {
            self.collect_one()?;
        }
        let mut input = self.spare.pop().unwrap_or_default();
        input.clear();
        input.extend_from_slice(data);
        let jobs = self.jobs.as_ref().expect("open");
        jobs.send((self.next_in, input))
            .map_err(|_| io::Error::other("gzip worker stopped"))?;
        self.next_in += 1;
        Ok(())
    }

    /// Waits for one member, then writes every member whose turn it is.
    fn collect_one(&mut self) -> io::Result<()> {
        let (seq, member, input) = self
            .done
            .recv()
            .map_err(|_| io::Error::other("gzip worker stopped"))?;
        self.waiting.insert(seq, (member?, input.len()));
        self.spare.push(input);
        while let Some((m, len)) = self.waiting.remove(&self.next_out) {
            self.out.write_all(&m)?;
            self.next_out += 1;
            self.done_in += len as u64;
        }
        Ok(())
    }

    /// Writes the members still in flight, calling `at` with the work
    /// done after each.
    pub(super) fn finish(mut self, at: &mut dyn FnMut(u64)) -> io::Result<()> {
        while self.next_out < self.next_in {
            self.collect_one()?;
            at(self.done_in);
        }
        self.jobs = None;
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
        self.out.flush()
    }
}

impl Drop for GzPool {
    /// Abandoned (an error, a cancel): the workers see the closed queue
    /// and stop.
    fn drop(&mut self) {
        self.jobs = None;
        while self.done.try_recv().is_ok() {}
    }
}
