#!/bin/sh
# tests/fresh/run.sh — the README's commands on a brand-new machine: a Debian 12 root made
# with debootstrap, a clean clone of the committed HEAD in it, nothing installed but make,
# and `make demo` then `make test` run inside it with a clean environment.
#
#   sh tests/fresh/run.sh                 make demo, then make test
#   sh tests/fresh/run.sh 'make demo'     other commands, run in order from the clone's top
#
# Needs root (debootstrap, chroot, mounts) and the Debian archive this machine's apt uses.
# The pristine root is made once and cached in $IPUOF_FRESH_CACHE (default
# /var/cache/ipuofd-fresh/bookworm); every run works on a throw-away copy, removed at exit
# (IPUOF_FRESH_KEEP=1 keeps it). Logs: $IPUOF_FRESH_LOGS (default /tmp/ipuofd-fresh), one
# per command. Exit status: 0 every command passed, 1 one failed, 2 the root could not be
# made or entered. Uncommitted changes are not tested: the clone is of HEAD.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
cache=${IPUOF_FRESH_CACHE:-/var/cache/ipuofd-fresh}
logs=${IPUOF_FRESH_LOGS:-/tmp/ipuofd-fresh}
base=$cache/bookworm
[ $# -gt 0 ] || set -- 'make demo' 'make test'

die() { echo "fresh: $*" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || die "needs root (debootstrap, chroot and mounts)"
head=$(git -C "$top" rev-parse HEAD 2>/dev/null) || die "$top is not a git work tree"
mkdir -p "$cache" "$logs" || die "cannot create $cache or $logs"
if [ -n "$(git -C "$top" status --porcelain --untracked-files=no)" ]; then
    echo "fresh: note: uncommitted changes are not part of this run (it tests $head)"
fi

# The archive this machine's apt already uses (deb822 sources first, then sources.list).
archive() {
    u=$(awk '/^URIs:/ { print $2; exit }' /etc/apt/sources.list.d/*.sources 2>/dev/null)
    [ -n "$u" ] || u=$(awk '$1 == "deb" { print $2; exit }' /etc/apt/sources.list 2>/dev/null)
    echo "${u:-http://deb.debian.org/debian}"
}

if [ ! -f "$base/.ready" ]; then
    command -v debootstrap >/dev/null 2>&1 ||
        { apt-get install -y -qq debootstrap >/dev/null 2>&1 || die "debootstrap is missing and could not be installed"; }
    rm -rf "$base"
    echo "fresh: making a Debian 12 root in $base (once; later runs copy it)"
    debootstrap --variant=minbase bookworm "$base" "$(archive)" >"$logs/debootstrap.log" 2>&1 ||
        die "debootstrap failed; see $logs/debootstrap.log"
    # debootstrap wrote a sources.list for the archive above; nothing else is added, so
    # apt sees each source once.
    cp /etc/resolv.conf "$base/etc/resolv.conf" 2>/dev/null
    # A new machine has make, to type the README's commands, and nothing of ours.
    chroot "$base" /bin/sh -c 'apt-get update -qq && apt-get install -y -qq make' \
        >>"$logs/debootstrap.log" 2>&1 || die "could not install make in the root; see $logs/debootstrap.log"
    chroot "$base" apt-get clean
    touch "$base/.ready"
fi

root=$(mktemp -d /var/tmp/ipuofd-fresh.XXXXXX) || die "mktemp failed"
mounted=""
cleanup() {
    for m in $mounted; do umount -l "$root/$m" 2>/dev/null; done
    if [ "${IPUOF_FRESH_KEEP:-0}" = 1 ]; then
        echo "fresh: kept $root"
    else
        rm -rf --one-file-system "$root"
    fi
}
trap cleanup EXIT
trap 'exit 1' HUP INT TERM
cp -a "$base/." "$root/" || die "cannot copy the root"
# Mounted in this order, unmounted in reverse (the list is built front to back).
mount -t proc proc "$root/proc" && mounted="proc $mounted"
mount --bind /dev "$root/dev" && mounted="dev $mounted"
mount -t devpts devpts "$root/dev/pts" 2>/dev/null && mounted="dev/pts $mounted"
mount -t tmpfs tmpfs "$root/dev/shm" 2>/dev/null && mounted="dev/shm $mounted"
mount -t sysfs sysfs "$root/sys" 2>/dev/null && mounted="sys $mounted"
git clone -q --no-hardlinks "$top" "$root/root/ipuofd" && git -C "$root/root/ipuofd" checkout -q "$head" ||
    die "cannot clone $top at $head"
echo "fresh: clean clone of $(git -C "$top" rev-parse --short HEAD) in a new Debian 12 root"

i=0
for cmd in "$@"; do
    i=$((i + 1))
    log="$logs/$i.log"
    start=$(date +%s)
    chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        /bin/sh -c "cd /root/ipuofd && $cmd" >"$log" 2>&1
    rc=$?
    secs=$(( $(date +%s) - start ))
    if [ "$rc" -ne 0 ]; then
        echo "fresh: FAILED '$cmd' (exit $rc after ${secs}s); the end of $log:"
        tail -n 30 "$log" | sed 's/^/    /'
        exit 1
    fi
    echo "fresh: ok '$cmd' (${secs}s) $(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 2 | tr '\n' ' ')"
done
exit 0
