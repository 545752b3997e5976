// Types of the `kopiru` package (written by hand; the native layer's own
// generated types are in binding.d.ts and are not part of the API).

/** One failure (or, in `warnings`, one piece of metadata not kept). */
export interface EntryError {
  /** The path concerned (UTF-8 as it is; other bytes as `\xHH`, `\` as `\\`). */
  path: string
  /** Which side of the operation `path` is on. */
  side: 'source' | 'destination'
  /** What was being done: 'stat', 'open', 'read', 'write', 'copy', 'verify', ... (`operation`
   * as in `--json`; this field was `op` before 0.1.0's summaries were unified) */
  operation: string
  /** The OS's message, or the engine's refusal. */
  reason: string
  /** The OS error number (on Windows the Windows error code, such as 5);
   * null when the engine refused by itself. */
  errno: number | null
  /** Its name as Node's fs gives it ('ENOENT', 'EACCES'; on Windows
   * ERROR_ACCESS_DENIED is 'EPERM', as in fs), or null. */
  code: string | null
  /** When the engine refused by itself: the refusal's stable name
   * ('same-file', 'into-itself', 'not-a-directory', ...), which does not
   * change with the wording of `reason`; null when the OS said no. */
  refusal: string | null
}

/** What a copy did: the fields of `kopiru copy --json`, in camelCase. */
export interface Summary {
  files: number
  bytes: number
  directories: number
  symlinks: number
  specialFiles: number
  hardLinks: number
  /** Left as they were: complete already (`resume`) or existing (`noClobber`). */
  skipped: number
  /** Counted, then removed again because the final flush failed. */
  withdrawn: number
  /** Directories that could not be made (each also in `errors`). */
  directoriesNotMade: number
  /** Entries inside those directories, at any depth, not copied because of it. */
  entriesNotCopied: number
  /** Removed from the destination by `delete`. */
  deleted: number
  /** Of `errors`, the first this many are sources turned down whole before anything was
   * written (missing, the destination itself or inside it, ...); when they are all the
   * errors, the copy rejects with 'KOPIRU_REFUSED'. */
  refused: number
  verifiedFiles: number
  /** Files per data method. */
  methods: { clone: number; offload: number; stream: number; sparse: number; link: number }
  /** Worker threads that ran at once, at most. */
  workers: number
  /** The share ('nfs', 'smb', 'fuse', ... or a timed one, 'overlayfs (timed: ...)') whose round
   * trips gave the copy more workers than CPUs; null on local disks. */
  roundTripFilesystem: string | null
  /** On such a share without `jobs`: each worker count tried (32, doubled while a doubling
   * raised the rate by 15%, up to 256) with the rate of finished entries it gave. */
  workerSteps: Array<{ workers: number; entriesPerSecond: number }>
  /** Files the share's server cloned or copied (NFS CLONE/COPY, SMB copychunk). */
  serverSideFiles: number
  errors: EntryError[]
  warnings: EntryError[]
  elapsedSeconds: number
  cancelled: boolean
  /** The copy was a `dryRun`: nothing was written, the counts are what it would do. */
  dryRun: boolean
  /** The command's exit code for this outcome: 0, 1 (nothing copied), 20 (cancelled), 23 (partial). */
  exitCode: number
}

export interface CopyProgress {
  /** Regular files copied so far. */
  files: number
  /** Bytes of file data copied so far. */
  bytes: number
  /** Files the whole copy moves, once a walk of the sources beside the copy (the engine's,
   * through the same filters and links as the copy) has counted them; null while it is still
   * counting. Never below `files`, so `files / totalFiles` is at most 1. In the final call:
   * `files`. */
  totalFiles: number | null
  /** Bytes the whole copy moves (a file with holes counts its allocated bytes); null while
   * counting. Never below `bytes`. In the final call: `bytes`. */
  totalBytes: number | null
  /** Whether `totalFiles` and `totalBytes` are known (they are in the final call). */
  totalsKnown: boolean
  /** Seconds left, from the rates of the last 5 seconds and the totals; null until both are
   * known, and outside the 'copying' phase. 0 in the final call. */
  etaSeconds: number | null
  /** 'done' in the final call only. */
  phase: 'copying' | 'flushing' | 'verifying' | 'done'
}

export interface CopyOptions {
  /** Keep everything (`cp -a`): mode, times, owner, xattrs (ACLs), hard links. */
  archive?: boolean
  /** Metadata to keep, replacing the default (times, links; the mode is then cp's: the
   * source's less the umask, no set-uid/set-gid; a file replacing another keeps its mode). */
  preserve?: Array<'mode' | 'times' | 'timestamps' | 'owner' | 'ownership' | 'xattrs' | 'xattr' | 'links' | 'all'>
  /** 'auto' (default): clone, else in-kernel copy, else stream, per file. 'clone' refuses the
   * whole request when the filesystems cannot clone. */
  method?: 'auto' | 'clone' | 'offload' | 'stream'
  /** 'end' (default): everything durable when the promise resolves; 'file': each file;
   * 'none': like cp, data may still be in the page cache. */
  sync?: 'none' | 'end' | 'file'
  /** Holes: 'auto' (default) keeps those of sparse files. */
  sparse?: 'auto' | 'always' | 'never'
  /** Symlinks: 'never' (default) copies them as links; 'command-line' follows those named in
   * `sources`; 'always' follows all. */
  follow?: 'never' | 'command-line' | 'always'
  /** Finish an interrupted copy: keep complete files, redo the rest. */
  resume?: boolean
  /** Never replace an existing destination entry. */
  noClobber?: boolean
  /** `dest` is the copy itself even if it is an existing directory (`cp -T`). */
  noTargetDirectory?: boolean
  /** Read every copied file back from the device and compare (BLAKE3). */
  verify?: boolean
  /** Worker threads; 0 (default) picks from the machine. */
  jobs?: number
  /** Entries inside copied directories left out, as the command's `--exclude` (rsync's
   * patterns, matched against the path below the copied source directory): `'*.o'` (a name at
   * any depth), `'/build'` (anchored), `'cache/'` (directories only), `'a/**'`. An excluded
   * directory is not entered. `'+ PATTERN'` makes an include, `'- PATTERN'` an exclude. */
  exclude?: string[]
  /** Entries copied even though an `exclude` matches them: all of `include` is tried before
   * `exclude` (the command's `--include ... --exclude ...`); the first rule that matches
   * decides. With `include: ['*.rs', 'src/']` and `exclude: ['*']`, only the `.rs` files at the top
   * and inside directories named `src` are copied. */
  include?: string[]
  /** After the copy, remove what `dest` holds that the sources do not (excluded entries are
   * kept). Only when `dest` is the copy itself: with `noTargetDirectory`, or a source ending
   * in `/.`; otherwise the copy is refused. */
  delete?: boolean
  /** Replace an existing destination file only when the source is newer (`cp -u`). */
  update?: boolean
  /** A file unchanged (same size and modification time) against the same path in this
   * directory is hard-linked from there instead of copied (rsync's `--link-dest`); a
   * relative path is relative to `dest`. */
  linkDest?: string | URL
  /** As `linkDest`, but the unchanged file is cloned from there (another method where the
   * filesystem cannot clone). Not with `linkDest`. */
  cloneDest?: string | URL
  /** Write nothing: the summary counts what the copy would create or replace. */
  dryRun?: boolean
  /** Aborting stops work already started (within a chunk of a large file); nothing
   * half-written keeps a final name; `resume: true` finishes later. */
  signal?: AbortSignal
  /** At most ~10 calls a second while copying, plus one at the end with the summary's
   * totals; counts never decrease. The sources are walked for the totals only when this is
   * given. */
  onProgress?: (p: CopyProgress) => void
}

/**
 * Copies `sources` to `dest` with cp's rules (one source to a new name or into an existing
 * directory; several into an existing directory), by the fastest method per file.
 *
 * Resolves with the summary when everything was copied. Rejects with a {@link KopiruError}:
 * `code` 'KOPIRU_PARTIAL' (some entries failed, the rest was copied; `.summary`),
 * 'KOPIRU_FAILED' (nothing could be copied; `.summary`), 'KOPIRU_REFUSED' (the request was
 * refused before anything was written: a missing source, a directory into itself, a file onto
 * itself, `method: 'clone'` where no clone is possible); or with an {@link AbortError}
 * (`.summary` tells what was done).
 */
export function copy(sources: string | URL | Array<string | URL>, dest: string | URL, options?: CopyOptions): Promise<Summary>

export interface Difference {
  /** Relative to the compared roots ('' for the roots themselves). */
  path: string
  /** The same entry under `dest`. */
  destPath: string
  /** 'missing in destination', 'content differs', 'size differs: 3 vs 4 bytes', ... */
  what: string
}

export interface VerifyReport {
  /** Regular files compared by content. */
  files: number
  /** Bytes hashed on each side. */
  bytes: number
  /** No difference and nothing unreadable. */
  equal: boolean
  differences: Difference[]
  errors: EntryError[]
  /** Stopped by the signal: the comparison is incomplete. */
  cancelled: boolean
  /** As `kopiru verify` (like diff): 0 equal, 1 different, 2 trouble, 20 cancelled. */
  exitCode: number
}

export interface VerifyOptions {
  /** Hashing threads; 0 (default) picks from the machine. */
  jobs?: number
  /** Entries only in `dest` are not differences. */
  ignoreExtra?: boolean
  /** Rejects at once with an AbortError; the comparison (read-only) stops within a chunk in
   * the background. */
  signal?: AbortSignal
}

/** Compares `dest` with `source` by content (the destination read around the page cache).
 * Resolves with the report whether or not they differ. */
export function verify(source: string | URL, dest: string | URL, options?: VerifyOptions): Promise<VerifyReport>

export interface FlashProgress {
  phase: 'writing' | 'verifying' | 'done'
  /** Bytes acknowledged by every device. */
  written: number
  /** The decoded image size, when the format or the block map records it. */
  total: number | null
  /** Bytes read back (all devices together). */
  verified: number
  verifyTotal: number | null
  /** An image from an http(s) URL: bytes of the file as published (compressed) downloaded,
   * each counted once (null: not a URL). */
  downloaded: number | null
  /** The file's length (its Content-Length), when the server gave one: with a compressed
   * image, `downloaded / downloadTotal` is the better measure of how far the flash is. */
  downloadTotal: number | null
  /** Connections resumed after a drop or a stall (null: not a URL). */
  resumes: number | null
}

export interface FlashOptions {
  /** Read every device back and compare (default true). */
  verify?: boolean
  /** Allow regular files as targets. */
  allowFile?: boolean
  /** Write even to a partition, a mounted device, or the one holding the root filesystem or
   * the image. */
  force?: boolean
  /** A block map (bmaptool's XML): write only the ranges it lists, and check them. A path,
   * an http(s) URL, or 'auto': the image's URL with '.bmap' added, if the server has one. */
  bmap?: string | URL
  /** The devices already read as zeros: all-zero blocks are not written. */
  zeroed?: boolean
  /** Zero each device first (BLKZEROOUT), then skip all-zero blocks. */
  zeroFirst?: boolean
  /** Skip blocks that already hold the image's bytes. */
  skipIdentical?: boolean
  /** The image's format: 'auto' (default: known by its bytes; an image named as a compressed
   * format its bytes are not, text or a web page is refused), 'raw' (the bytes as they are),
   * 'xz', 'gzip', 'zstd' or 'bzip2' (that format required). */
  format?: 'auto' | 'raw' | 'xz' | 'gzip' | 'zstd' | 'bzip2'
  /** The SHA-256 (hex) of the image file as published (compressed, as a SHA256SUMS lists
   * it): on a mismatch the flash fails and the first MiB is not written. */
  sha256?: string
  /** For an http(s) image: seconds without a byte before the connection is dropped and
   * resumed (default 30). */
  stallTimeout?: number
  /** Stops within a chunk; the first MiB (written last) is then not written. */
  signal?: AbortSignal
  onProgress?: (p: FlashProgress) => void
}

export interface FlashDevice {
  path: string
  /** O_DIRECT was used (else buffered writes, flushed often). */
  direct: boolean
  /** Whether the read-back matched (null: not verified). */
  verified: boolean | null
  /** Offset of the first 64 KiB block that differed. */
  mismatchAt: number | null
  identicalBytes: number
  /** The end of the furthest piece of the image written (0: nothing was). */
  writtenTo: number
  /** Whether its first MiB (written last) was written. */
  firstMibWritten: boolean
  /** What failed; `at` is the offset of a failed write, `message` what it means ('too small:
   * the image goes on past offset N', 'the device disappeared ...'). */
  error: (EntryError & { at: number | null; message: string | null }) | null
}

export interface FlashReport {
  /** 'raw', 'xz', 'gzip', 'zstd', 'bzip2'. */
  format: string
  /** Bytes of (decoded) image written to each device. */
  imageBytes: number
  writeSeconds: number
  elapsedSeconds: number
  sourceError: EntryError | null
  cancelled: boolean
  /** The image's SHA-256, hex, once every device read it back the same (else null). */
  sha256: string | null
  /** An image from an http(s) URL: bytes of the file as published downloaded, each counted
   * once (null: not a URL). */
  downloadedBytes: number | null
  /** An image from an http(s) URL: connections resumed after a drop or a stall (null: not a
   * URL). */
  resumes: number | null
  devices: FlashDevice[]
  /** `sourceError` and every device's error. */
  errors: EntryError[]
  exitCode: number
}

/**
 * Writes a disk image (raw, or xz/gzip/zstd/bzip2, decoded as a stream; a file, or an http: or
 * https: URL, downloaded as a stream and resumed with Range where the connection drops) to
 * whole block devices
 * and reads each back to compare. There is no prompt: the targets get the command's checks and
 * refusals (not a block device, a partition, mounted, holding the root filesystem or the image,
 * too small) as a 'KOPIRU_REFUSED' rejection. Some devices failed: 'KOPIRU_PARTIAL'; all:
 * 'KOPIRU_FAILED'.
 */
export function flash(image: string | URL, devices: string | URL | Array<string | URL>, options?: FlashOptions): Promise<FlashReport>

export interface ImageOptions {
  /** Read a regular file (a saved image), not only a block device. */
  allowFile?: boolean
  /** Read a device mounted read-write (its image may be inconsistent); replace an existing
   * output once the new one is complete and verified. */
  force?: boolean
  /** Compression level (zstd 1–19, xz 0–9, gzip 1–9); the format's default if absent. The
   * format comes from the output's extension: .zst, .xz, .gz, else raw. */
  level?: number
  /** Compression threads; 0 (default) picks from the machine. */
  jobs?: number
  /** Also write a block map (bmaptool's XML, version 2, SHA-256) of the non-zero ranges. */
  bmap?: string | URL
  /** Stop after the end of the last partition (MBR or GPT). */
  partitionsOnly?: boolean
  /** Read the image back, decode it and compare its SHA-256 with the device's (default true). */
  verify?: boolean
  /** Stops within a chunk; nothing is left under the output's name. */
  signal?: AbortSignal
  onProgress?: (p: ImageProgress) => void
}

export interface ImageProgress {
  phase: 'reading' | 'verifying' | 'done'
  /** Bytes read from the device. */
  read: number
  /** Bytes to read. */
  total: number
  /** Bytes of image read back and decoded. */
  verified: number
  verifyTotal: number | null
}

export interface ImageReport {
  device: string
  output: string
  bmap: string | null
  /** 'raw', 'zstd', 'xz' or 'gzip'. */
  format: string
  /** The compression level used (0 for raw). */
  level: number
  /** Bytes read into the image. */
  imageBytes: number
  deviceBytes: number
  /** With partitionsOnly: the table ('GPT', 'MBR') and the partition that ends last. */
  partitionsOnly: { table: string; lastPartition: number } | null
  /** Bytes of the written file. */
  outputBytes: number
  /** Bytes in 4 KiB blocks that are not all zeros. */
  mappedBytes: number
  /** SHA-256 of the image's bytes, hex (null unless the image is complete and in place). */
  sha256: string | null
  /** Whether the read-back matched (null: not verified). */
  verified: boolean | null
  /** The device was read with O_DIRECT. */
  direct: boolean
  writeSeconds: number
  elapsedSeconds: number
  /** The offset of the device read that failed. */
  errorAt: number | null
  errors: EntryError[]
  cancelled: boolean
  exitCode: number
}

/**
 * Reads a block device (or, with allowFile, a regular file) into an image at `output`, written
 * under a temporary name, flushed, read back and verified, then renamed. Refusals (not a block
 * device, mounted read-write, the output on the device or existing) reject with
 * 'KOPIRU_REFUSED'; a failed read or write with 'KOPIRU_FAILED' (nothing is left under the
 * output's name). Linux only.
 */
export function image(device: string | URL, output: string | URL, options?: ImageOptions): Promise<ImageReport>

export interface DedupeOptions {
  /** Find and report, change nothing. */
  dryRun?: boolean
  /** Files smaller than this many bytes are skipped (default: one filesystem block). */
  minSize?: number
  /** Threads; 0 (default) picks from the machine. */
  jobs?: number
  signal?: AbortSignal
  /** Bytes hashed so far. */
  onProgress?: (p: { bytes: number }) => void
}

export interface DedupeReport {
  dryRun: boolean
  /** Regular files of at least minSize found (hard links once), those in `unsupported` included. */
  filesScanned: number
  bytesHashed: number
  /** Groups of identical files with something to share. */
  groups: number
  /** Files that now share (with dryRun: would share) another's blocks. */
  filesShared: number
  bytesShared: number
  alreadyShared: number
  /** Changed between hashing and sharing: left alone. */
  changed: number
  /** Free space gained, as the filesystems report it (0 with dryRun). */
  spaceFreed: number
  /** Filesystems that cannot share blocks: the path given under which each was found, its type, where it is mounted, and how many files on it were left alone. */
  unsupported: Array<{ path: string; fsType: string; mountPoint: string; files: number }>
  errors: EntryError[]
  elapsedSeconds: number
  cancelled: boolean
  exitCode: number
}

/** Finds identical regular files under `paths` and makes them share blocks (the kernel's
 * verified dedupe). */
export function dedupe(paths: string | URL | Array<string | URL>, options?: DedupeOptions): Promise<DedupeReport>

export interface Trial {
  works: boolean
  /** Why not, e.g. 'Operation not supported (EOPNOTSUPP)'. */
  detail: string | null
}

export interface ProbeReport {
  paths: Array<{ path: string; filesystem: string }>
  /** Clone from `path`'s filesystem to `other`'s (or within `path`'s). */
  clone: Trial
  /** In-kernel copy, the same way. */
  offload: Trial
}

/** Filesystem types, and whether clone and offload work, by trying them on scratch files. */
export function probe(path: string | URL, other?: string | URL): Promise<ProbeReport>

export type KopiruErrorCode = 'KOPIRU_PARTIAL' | 'KOPIRU_FAILED' | 'KOPIRU_REFUSED'

export class KopiruError extends Error {
  name: 'KopiruError'
  code: KopiruErrorCode
  /** Every failure (for a refusal: the refused sources or targets). */
  errors: EntryError[]
  /** The operation's summary (not for a flash refused before writing, nor for probe). */
  summary?: Summary | FlashReport | ImageReport | DedupeReport
  /** With one refused path: its path, errno, reason and the refusal's
   * stable name. */
  path?: string
  errno?: number | null
  reason?: string
  refusal?: string | null
}

export class AbortError extends Error {
  name: 'AbortError'
  code: 'ABORT_ERR'
  /** What was done before the abort (copy, flash, image, dedupe). */
  summary?: Summary | FlashReport | ImageReport | DedupeReport
}

/** The names each option takes (copy's `method`, `sync`, `sparse`, `follow`, `preserve`; flash's
 * `format`), from the engine's tables: the command line's `--method`, `--sync`, `--sparse`,
 * `--preserve` and `flash --format` take the same. */
export const choices: Readonly<Record<'method' | 'sync' | 'sparse' | 'follow' | 'preserve' | 'format', readonly string[]>>
