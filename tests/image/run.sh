#!/usr/bin/env bash
# Runs COMMAND in an image's root filesystem the way a Pod with readOnlyRootFilesystem runs
# its container: the root read-only, the given volumes bound over it, COMMAND as PID 1 of a
# fresh PID namespace (so it must handle SIGTERM itself), as the numeric USER, with only the
# environment given by -e. The host's network is shared. `buildah run` has no read-only root
# and keeps its own process as the parent, so this does the few mounts itself.
#
# Usage: run.sh ROOTFS UID:GID [-v SOURCE:TARGET[:ro]]... [-e NAME=VALUE]... -- COMMAND...
# TARGET is a host path inside ROOTFS whose directory or file exists (the caller made the
# mount points while the layer was writable, as a container runtime does). As root, and
# started by `unshare --mount --pid --fork --kill-child --propagation private`.
set -euo pipefail

rootfs=$1 user=$2
shift 2
[[ $user =~ ^[0-9]+:[0-9]+$ ]] || { echo "run.sh: USER must be numeric UID:GID, not $user" >&2; exit 2; }
volumes=() environment=()
while getopts v:e: option; do
  case $option in
  v) volumes+=("$OPTARG") ;;
  e) environment+=("$OPTARG") ;;
  *) exit 2 ;;
  esac
done
shift $((OPTIND - 1))

mount --bind "$rootfs" "$rootfs"
mount -o remount,bind,ro "$rootfs"
mount -t proc proc "$rootfs/proc" # this PID namespace's processes only
mount --rbind /dev "$rootfs/dev"
for volume in "${volumes[@]}"; do
  IFS=: read -r source target mode <<<"$volume"
  mount --bind "$source" "$target"
  [ "$mode" != ro ] || mount -o remount,bind,ro "$target"
done
exec /usr/bin/env -i "${environment[@]}" /usr/sbin/chroot --userspec="$user" "$rootfs" "$@"
