//! Sharded copies: one copy of a directory tree made by N processes (MPI or
//! Slurm ranks, or N commands started by hand), each copying one share.
//!
//! - **The pieces.** Every rank lists the source the same way (names in
//!   byte order, depth first, kinds from the listings: no stat per entry)
//!   and cuts the list into the same [`pieces`]. Each rank claims pieces
//!   one at a time (the first to create `piece.P` in the coordination
//!   directory copies it), from its own part of the tree on, then whatever
//!   is left: a rank slowed by one huge file claims fewer, and one flat
//!   directory of 100,000 entries is cut like any other. No rank waits for
//!   another to partition, and nothing else is sent between them.
//! - **Hard links.** A rank meets only some names of an inode, so
//!   hard-linked files are set aside as met (`links.K`) and rank 0 copies
//!   them all at the end, in one process, where they stay one inode.
//! - **Coordination** goes through the destination's filesystem, in a
//!   directory beside DEST (`.kopiru-tmp.shard.<hash>`): each rank holds an
//!   `flock` on its `member.K` file while it runs (so the others can tell a
//!   dead rank from a slow one), and writes `done.K` when its share is
//!   copied and flushed. Joining is serialised by a lock file beside it; the
//!   first rank to join a directory no live rank holds (left by an earlier
//!   run) resets it.
//! - **The end.** Rank 0 waits for every `done.K`, copies the hard-linked
//!   files, then gives every directory its metadata (deepest first),
//!   flushes, renames the staged tree into place (a new DEST; a DEST that
//!   existed was merged into directly) and writes `published` with the
//!   number of failed entries;
//!   every rank exits 0 only if the whole copy is in place, durable and
//!   complete. A rank that fails, is stopped or dies makes rank 0 write
//!   `failed` instead, and the staged tree is kept: the same command with
//!   `--resume` finishes the copy, whichever ranks died.

use std::fmt;

/// One share of a copy: this process is rank `index` of `count`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    /// This process's rank, from 0.
    pub index: usize,
    /// How many processes share the copy.
    pub count: usize,
    /// How many of them run on this machine, when the launcher says (the
    /// default worker count is the CPUs divided among them).
    pub per_node: Option<usize>,
}

impl Shard {
    /// `K/N` (rank K of N, from 0).
    ///
    /// # Errors
    /// Not of that form, or K not below N.
    pub fn parse(s: &str) -> Result<Shard, String> {
        let bad =
            || format!("--shard {s}: want K/N, rank K of N counted from 0 (e.g. 0/4), or auto");
        let (k, n) = s.split_once('/').ok_or_else(bad)?;
        let (index, count) = (k.parse().map_err(|_| bad())?, n.parse().map_err(|_| bad())?);
        if count == 0 || index >= count {
            return Err(bad());
        }
        Ok(Shard {
            index,
            count,
            per_node: None,
        })
    }

    /// From the launcher's environment: OpenMPI (`OMPI_COMM_WORLD_RANK`,
    /// `_SIZE`, `_LOCAL_SIZE`), PMI as MPICH's hydra sets it (`PMI_RANK`,
    /// `PMI_SIZE`, `MPI_LOCALNRANKS`), or Slurm (`SLURM_PROCID`,
    /// `SLURM_NTASKS`, `SLURM_NTASKS_PER_NODE`).
    ///
    /// # Errors
    /// None of them is set (or they do not make sense).
    pub fn from_env(get: impl Fn(&str) -> Option<String>) -> Result<Shard, String> {
        let num = |k: &str| get(k).and_then(|v| v.trim().parse::<usize>().ok());
        let launchers = [
            (
                "OMPI_COMM_WORLD_RANK",
                "OMPI_COMM_WORLD_SIZE",
                "OMPI_COMM_WORLD_LOCAL_SIZE",
            ),
            ("PMI_RANK", "PMI_SIZE", "MPI_LOCALNRANKS"),
            ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_NTASKS_PER_NODE"),
        ];
        for (rank, size, local) in launchers {
            if let (Some(index), Some(count)) = (num(rank), num(size)) {
                if count == 0 || index >= count {
                    return Err(format!("--shard auto: {rank}={index} with {size}={count}"));
                }
                let per_node = num(local).filter(|&n| n > 0);
                return Ok(Shard {
                    index,
                    count,
                    per_node,
                });
            }
        }
        Err(
            "--shard auto: no launcher's rank in the environment (OMPI_COMM_WORLD_RANK, \
             PMI_RANK or SLURM_PROCID); run under mpirun or srun, or give --shard K/N"
                .into(),
        )
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// How many pieces the walk of `entries` is cut into for `ranks` ranks:
/// [`PIECES_PER_RANK`] each, none under [`PIECE_MIN_ENTRIES`] entries.
pub(crate) fn pieces(entries: usize, ranks: usize) -> usize {
    (entries / PIECE_MIN_ENTRIES).clamp(1, PIECES_PER_RANK * ranks)
}

/// Pieces per rank: the ranks claim them one at a time, so a rank slowed
/// by a big file or a busy disk claims fewer, and all finish within about
/// one piece (a 64th of a share) of each other.
const PIECES_PER_RANK: usize = 64;

/// The fewest entries in a piece: each costs a claim (one file made in the
/// coordination directory) and a start of the rank's workers, about a
/// millisecond together.
const PIECE_MIN_ENTRIES: usize = 512;

/// Which of `count` pieces holds entry `i` of `entries`: runs of equal
/// length, in walk order (neighbours in the tree stay together).
pub(crate) fn piece_of(i: usize, entries: usize, count: usize) -> usize {
    (i as u128 * count as u128 / entries.max(1) as u128) as usize
}

mod coord;
mod run;
pub(crate) use run::copy;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_k_of_n() {
        let s = Shard::parse("2/4").unwrap();
        assert_eq!((s.index, s.count), (2, 4));
        assert!(Shard::parse("4/4").is_err());
        assert!(Shard::parse("1/0").is_err());
        assert!(Shard::parse("x").is_err());
    }

    #[test]
    fn reads_the_launchers() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        let s = Shard::from_env(env(&[
            ("OMPI_COMM_WORLD_RANK", "1"),
            ("OMPI_COMM_WORLD_SIZE", "4"),
            ("OMPI_COMM_WORLD_LOCAL_SIZE", "2"),
        ]))
        .unwrap();
        assert_eq!((s.index, s.count, s.per_node), (1, 4, Some(2)));
        let s = Shard::from_env(env(&[("SLURM_PROCID", "63"), ("SLURM_NTASKS", "64")])).unwrap();
        assert_eq!((s.index, s.count, s.per_node), (63, 64, None));
        assert!(Shard::from_env(env(&[])).is_err());
        assert!(Shard::from_env(env(&[("PMI_RANK", "3"), ("PMI_SIZE", "3")])).is_err());
    }

    #[test]
    fn pieces_are_equal_runs() {
        // 100,000 entries of one directory in 4 pieces: a quarter each, in order.
        let of: Vec<_> = (0..100_000).map(|i| piece_of(i, 100_000, 4)).collect();
        for p in 0..4 {
            assert_eq!(of.iter().filter(|&&x| x == p).count(), 25_000);
        }
        assert!(of.windows(2).all(|w| w[0] <= w[1]));
        // How many pieces: none under the minimum, at most 64 per rank.
        assert_eq!(pieces(10, 4), 1);
        assert_eq!(pieces(17_012, 2), 17_012 / PIECE_MIN_ENTRIES);
        assert_eq!(pieces(262_144, 2), 128);
    }
}
