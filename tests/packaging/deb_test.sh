#!/usr/bin/env bash
# packaging:deb: the .deb CPack makes installs into a clean Debian 12 root and works there.
#   deb_test.sh BUILD_DIR [--trainer]
# 1. cpack -G DEB from BUILD_DIR's configuration into a folder of this test;
# 2. a Debian 12 minbase root (debootstrap; made once and kept as
#    ${XDG_CACHE_HOME:-~/.cache}/hpclaunch/debian12-minbase.tar, ~95 s on the 2-core machine)
#    unpacked into a folder this test owns, with proc mounted, the host's resolv.conf, and apt's
#    downloads kept in ${XDG_CACHE_HOME:-~/.cache}/hpclaunch/apt-archives;
# 3. in it: apt-get installs exactly the package's declared Depends (read with dpkg-deb -f), then
#    `dpkg -i` must succeed alone (no apt-get -f to mend it); hpclaunch --version, presets list,
#    render --preset 2n4g (bash -n clean), man page and completion where the package put them,
#    data read from /usr/share/hpclaunch; dpkg --purge leaves nothing of it.
# With --trainer (and a build with the trainer), the same for hpctrain: its Depends (Debian's
#    libtorch1.13 and what it pulls, ~250 MB) and hpctrain --version.
# Needs root (debootstrap, chroot, mount) and deb.debian.org. Without root it is skipped with a
# WARN, and fails under CI=true.
set -euo pipefail
build_dir=$1
with_trainer=${2:-}
fail() { echo "FAIL: $*" >&2; exit 1; }
missing() {
  [[ ${CI:-} == true ]] && fail "$1"
  echo "WARN: $1: skipped"
  exit 0
}
[[ $(id -u) -eq 0 ]] || missing "needs root (debootstrap, chroot, mount)"
for tool in debootstrap cpack dpkg-deb chroot; do
  command -v "$tool" >/dev/null || missing "$tool not installed (scripts/install-deps.sh)"
done
cache=${XDG_CACHE_HOME:-$HOME/.cache}/hpclaunch
mkdir -p "$cache/apt-archives/partial"
work=$(mktemp -d /var/tmp/hpclaunch-deb-test.XXXXXX)
root="$work/root"
cleanup() {
  for m in "$root/var/cache/apt/archives" "$root/proc"; do
    mountpoint -q "$m" && umount -l "$m"
  done
  rm -rf --one-file-system "$work"
}
trap cleanup EXIT

# 1. The packages.
started=$SECONDS
cpack --config "$build_dir/CPackConfig.cmake" -G DEB -B "$work/debs" >"$work/cpack.log" 2>&1 ||
  { tail -20 "$work/cpack.log"; fail "cpack"; }
launcher_deb=$(find "$work/debs" -maxdepth 1 -name 'hpclaunch_*.deb')
[[ -n $launcher_deb ]] || fail "cpack made no hpclaunch_*.deb: $(ls "$work/debs")"
echo "cpack: $(basename "$launcher_deb") in $((SECONDS - started)) s"
trainer_deb=$(find "$work/debs" -maxdepth 1 -name 'hpctrain_*.deb')
if [[ -n $trainer_deb ]]; then
  depends=$(dpkg-deb -f "$trainer_deb" Depends)
  echo "hpctrain: Depends: $depends"
  [[ $depends == *libtorch* ]] || fail "hpctrain's package does not depend on LibTorch"
  ! dpkg-deb -c "$trainer_deb" | grep -q 'libtorch' || fail "hpctrain's package bundles LibTorch"
fi

# 2. A clean Debian 12 root.
(
  flock 9
  if [[ ! -s $cache/debian12-minbase.tar ]]; then
    started=$SECONDS
    echo "debootstrap --variant=minbase bookworm (once; kept as $cache/debian12-minbase.tar)"
    debootstrap --variant=minbase bookworm "$work/minbase" http://deb.debian.org/debian \
      >"$work/debootstrap.log" 2>&1 || { tail -20 "$work/debootstrap.log"; exit 1; }
    rm -f "$work/minbase"/var/cache/apt/archives/*.deb
    tar -C "$work/minbase" -cf "$cache/debian12-minbase.tar.tmp" .
    mv "$cache/debian12-minbase.tar.tmp" "$cache/debian12-minbase.tar"
    rm -rf --one-file-system "$work/minbase"
    echo "debootstrap: $((SECONDS - started)) s"
  fi
) 9>"$cache/debian12-minbase.lock" || fail "debootstrap"
mkdir "$root"
tar -C "$root" -xf "$cache/debian12-minbase.tar"
mount -t proc proc "$root/proc"
mount --bind "$cache/apt-archives" "$root/var/cache/apt/archives"
cp /etc/resolv.conf "$root/etc/resolv.conf"
cp "$launcher_deb" ${trainer_deb:+"$trainer_deb"} "$root/tmp/"
in_root() { chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
  DEBIAN_FRONTEND=noninteractive "$@"; }

# 3. Declared dependencies only, then dpkg -i alone.
install_deb() {  # install_deb FILE: its Depends through apt, then dpkg -i
  local deb=$1 deps
  deps=$(dpkg-deb -f "$deb" Depends | tr ',' '\n' | sed 's/(.*)//; s/|.*//; s/ //g' | grep -v '^$')
  started=$SECONDS
  # shellcheck disable=SC2086  # one package a word
  in_root apt-get install -y -qq --no-install-recommends $deps >"$work/apt.log" 2>&1 ||
    { tail -20 "$work/apt.log"; fail "apt-get install $deps"; }
  in_root dpkg -i "/tmp/$(basename "$deb")" || fail "dpkg -i $(basename "$deb") (declared Depends incomplete?)"
  echo "installed $(basename "$deb") and its Depends (${deps//$'\n'/ }) in $((SECONDS - started)) s"
}
in_root apt-get update -qq >"$work/apt-update.log" 2>&1 || { tail "$work/apt-update.log"; fail "apt-get update"; }
install_deb "$launcher_deb"
in_root hpclaunch --version
in_root hpclaunch presets list | tee "$work/presets.txt"
grep -q '^2n4g ' "$work/presets.txt" || fail "presets list has no 2n4g"
in_root hpclaunch render --no-project --preset 2n4g --strategy fsdp --cluster jsc \
  --set profile.account=myproj -o /root/job.sbatch
in_root bash -n /root/job.sbatch || fail "the rendered script is not bash -n clean"
grep -q -- '^#SBATCH --nodes=2' "$root/root/job.sbatch" || fail "job.sbatch: no --nodes=2"
# Its presets are the package's: without /usr/share/hpclaunch it has none.
mv "$root/usr/share/hpclaunch" "$root/usr/share/hpclaunch.away"
! in_root hpclaunch presets list >/dev/null 2>&1 || fail "presets found without /usr/share/hpclaunch"
mv "$root/usr/share/hpclaunch.away" "$root/usr/share/hpclaunch"
for f in /usr/share/man/man1/hpclaunch.1 /usr/share/bash-completion/completions/hpclaunch \
  /usr/share/zsh/vendor-completions/_hpclaunch /usr/share/doc/hpclaunch/LICENSE; do
  [[ -s $root$f ]] || fail "$f missing"
done
echo "in the root: --version, presets list, render --preset 2n4g (bash -n), man page, completion, docs"
if [[ $with_trainer == --trainer && -n $trainer_deb ]]; then
  install_deb "$trainer_deb"
  in_root hpctrain --version
fi
in_root dpkg --purge hpclaunch >/dev/null
[[ ! -e $root/usr/bin/hpclaunch && ! -e $root/usr/share/hpclaunch ]] || fail "purge left files"
echo "dpkg --purge hpclaunch: nothing left"
