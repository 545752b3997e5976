# Sourced by the bench scripts: a fresh loop-mounted filesystem holding a
# copy of a corpus, so that no benchmark runs on the machine's root
# filesystem.
#
# corpus_fs FS CORPUS IMG MNT: makes IMG (three times CORPUS's size plus
# 2 GiB, sparse) as FS (ext4 with an inode per 4 KiB, XFS with reflink, or
# Btrfs), mounts it at MNT and copies CORPUS to MNT/src. Whatever was
# mounted at MNT is unmounted first.
corpus_fs() {
  local fs=$1 corpus=$2 img=$3 mnt=$4 need
  need=$(( $(du -sk "$corpus" | cut -f1) * 3 / 1024 + 2048 ))
  if mountpoint -q "$mnt"; then umount "$mnt"; fi
  rm -f "$img"; truncate -s "${need}M" "$img"
  case $fs in
    ext4) mkfs.ext4 -q -F -i 4096 "$img";;
    xfs) mkfs.xfs -q -f -m reflink=1 "$img";;
    btrfs) mkfs.btrfs -q -f "$img" >/dev/null;;
    *) echo "FS must be ext4, xfs or btrfs" >&2; exit 2;;
  esac
  mkdir -p "$mnt"; mount -o loop "$img" "$mnt"; cp -a "$corpus" "$mnt/src"; sync
}
