#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Build the image of an emulated lab board (docs/lab.md) from Debian packages:
# Debian 12's kernel for the board, and an initramfs with static busybox, dropbear
# and the shared libraries it needs (no Python), an init (scripts/lab/init.sh), the
# lab's SSH keys and a manifest. The system's apt configuration and dpkg
# architectures are never touched: packages are resolved and downloaded through a
# private apt configuration in the cache and unpacked with dpkg-deb -x.
#
# The cache is "${RTLAB_LAB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rtlab/lab}":
#   apt/        the private apt configuration, package lists and state
#   debs/       downloaded packages (kept while a board's manifest names them)
#   BOARD/      vmlinuz, initramfs.cpio.gz, config (the kernel's), id_ed25519[.pub]
#               (the lab's client key), dropbear_ed25519_host_key, known_hosts,
#               rootfs.list, manifest.json
# A board is rebuilt only when it is missing or this script, init.sh or the board's
# .conf changed (their hash is the manifest's recipe_sha256); the SSH keys of a
# rebuilt board are kept.
#
# Environment: RTLAB_LAB_CACHE, RTLAB_LAB_MIRROR (default http://deb.debian.org/debian),
# RTLAB_LAB_KEYRING (default /usr/share/keyrings/debian-archive-keyring.gpg).
# Exit codes: 0 built or up to date; 1 error; 2 usage; 3 (--check) missing or stale;
# 77 cannot be built here (packages cannot be downloaded, or a host tool is missing).
set -euo pipefail

prog=build-image.sh
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

known_boards() {
  local f names=()
  for f in "$here"/boards/*.conf; do names+=("$(basename "$f" .conf)"); done
  echo "${names[*]}"
}
usage() {
  cat <<EOF
usage: scripts/lab/build-image.sh [--force | --check | --print-dir] BOARD
Build the emulated lab board BOARD ($(known_boards)) into the cache when it is
missing or its recipe changed. --force rebuilds; --check only tells (exit 0 up to
date, 3 missing or stale); --print-dir prints the board's directory in the cache.
EOF
}
die() { echo "$prog: $*" >&2; exit 1; }
unavailable() { echo "$prog: $*" >&2; exit 77; }
note() { echo "$prog: $*" >&2; }

mode=build
case ${1:-} in
  --force) mode=force; shift ;;
  --check) mode=check; shift ;;
  --print-dir) mode=print; shift ;;
  -h | --help) usage; exit 0 ;;
  -*) usage >&2; exit 2 ;;
esac
[[ $# -eq 1 ]] || { usage >&2; exit 2; }
board=$1
conf=$here/boards/$board.conf
if [[ ! $board =~ ^[A-Za-z0-9_.-]+$ || ! -f $conf ]]; then
  echo "$prog: unknown board kind '$board' (known: $(known_boards))" >&2
  exit 2
fi

cache=${RTLAB_LAB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rtlab/lab}
mirror=${RTLAB_LAB_MIRROR:-http://deb.debian.org/debian}
suite=bookworm
keyring=${RTLAB_LAB_KEYRING:-/usr/share/keyrings/debian-archive-keyring.gpg}
out=$cache/$board
recipe=$(cat "$here/build-image.sh" "$here/init.sh" "$conf" | sha256sum | cut -d' ' -f1)
outputs=(vmlinuz initramfs.cpio.gz config id_ed25519 id_ed25519.pub
         dropbear_ed25519_host_key known_hosts rootfs.list manifest.json)

up_to_date() {
  local f
  for f in "${outputs[@]}"; do [[ -s $out/$f ]] || return 1; done
  grep -q "\"recipe_sha256\": \"$recipe\"" "$out/manifest.json"
}

case $mode in
  print) echo "$out"; exit 0 ;;
  check) if up_to_date; then exit 0; else exit 3; fi ;;
esac

for tool in apt-get apt-cache dpkg-deb cpio gzip readelf ssh-keygen dropbearkey flock sha256sum; do
  command -v "$tool" >/dev/null || unavailable "missing host tool '$tool' (scripts/setup.sh installs it)"
done
[[ -r $keyring ]] || unavailable "missing $keyring (Debian package debian-archive-keyring)"

# shellcheck source=boards/x86_64-rt.conf
source "$conf"
for var in DEB_ARCH KERNEL_META PACKAGES FILES UNAME_M QEMU QEMU_MACHINE QEMU_CPU QEMU_NIC CONSOLE; do
  [[ -n ${!var:-} ]] || die "$conf: $var is not set"
done
: "${MODULES:=}" "${LIBS:=}" "${QEMU_KVM_CPU:=}" "${QEMU_RNG:=}" "${KERNEL_ARGS:=}"

mkdir -p "$cache"
exec 9>"$cache/.build.lock"
flock 9  # one build at a time per cache (they share the apt state and debs/)
if [[ $mode == build ]] && up_to_date; then
  exit 0  # built meanwhile by someone else
fi
note "building board $board into $out"

work=$(mktemp -d "$cache/.build-$board.XXXXXX")
trap 'rm -rf "$work"' EXIT

# ---------------------------------------------------------------- private apt
aptdir=$cache/apt
mkdir -p "$aptdir"/etc/{apt.conf.d,preferences.d,sources.list.d,trusted.gpg.d} \
  "$aptdir"/lists/partial "$aptdir"/archives/partial "$aptdir"/state "$aptdir"/cache "$cache/debs"
touch "$aptdir/state/status"
archs=()
for f in "$here"/boards/*.conf; do
  a=$(sed -n 's/^DEB_ARCH="\{0,1\}\([a-z0-9]*\)"\{0,1\}$/\1/p' "$f")
  if [[ -n $a && " ${archs[*]} " != *" $a "* ]]; then archs+=("$a"); fi
done
[[ " ${archs[*]} " == *" $DEB_ARCH "* ]] || archs+=("$DEB_ARCH")
{
  echo "deb [signed-by=$keyring] $mirror $suite main"
} >"$work/sources.list"
{
  echo "Dir::Etc \"$aptdir/etc\";"
  echo "Dir::Etc::SourceList \"$aptdir/etc/sources.list\";"
  echo "Dir::State \"$aptdir/state\";"
  echo "Dir::State::Lists \"$aptdir/lists\";"
  echo "Dir::State::status \"$aptdir/state/status\";"
  echo "Dir::Cache \"$aptdir/cache\";"
  echo "Dir::Cache::Archives \"$aptdir/archives\";"
  echo 'Dir::Cache::srcpkgcache "";'  # no second 70 MB cache
  echo 'Acquire::GzipIndexes "true";'  # lists stay compressed
  echo "APT::Architecture \"${archs[0]}\";"
  printf 'APT::Architectures {'; printf ' "%s";' "${archs[@]}"; echo ' };'
  echo 'Acquire::Languages "none";'
  echo 'Acquire::Retries "3";'
  echo 'APT::Get::AllowUnauthenticated "false";'
  # As root apt drops to _apt for downloads, which cannot write into a private home.
  if [[ $(id -u) -eq 0 ]]; then echo 'APT::Sandbox::User "root";'; fi
} >"$work/apt.conf"
fresh_config=0
if ! cmp -s "$work/apt.conf" "$aptdir/apt.conf" || ! cmp -s "$work/sources.list" "$aptdir/etc/sources.list"; then
  cp "$work/apt.conf" "$aptdir/apt.conf"
  cp "$work/sources.list" "$aptdir/etc/sources.list"
  fresh_config=1
fi
apt_() { APT_CONFIG=$aptdir/apt.conf "$@"; }

updated=0
apt_update() {
  note "apt-get update ($mirror $suite main, ${archs[*]})"
  # apt-get update exits 0 when an index failed to download: read its warnings too.
  if apt_ apt-get -q update >"$work/update.log" 2>&1 &&
    ! grep -qE '^(E:|W: (Failed to fetch|Some index files failed|GPG error))' "$work/update.log"; then
    updated=1
    touch "$aptdir/updated.stamp"
    return 0
  fi
  if [[ -f $aptdir/updated.stamp && $fresh_config -eq 0 ]]; then
    note "apt-get update failed; using the package lists of $(date -r "$aptdir/updated.stamp")"
    sed 's/^/  /' "$work/update.log" >&2
    return 0
  fi
  sed 's/^/  /' "$work/update.log" >&2
  unavailable "cannot download the package lists from $mirror (no network?)"
}
# Lists older than 6 hours are refreshed (a point release may have replaced a package).
if [[ $fresh_config -eq 1 || -z $(find "$aptdir/updated.stamp" -mmin -360 2>/dev/null) ]]; then
  apt_update
fi

# ------------------------------------------------------------- resolution
declare -A VER FILE SHA SECTION DEPS
# info NAME:ARCH -> fills VER/FILE/SHA/SECTION/DEPS; fails when there is no candidate.
info() {
  [[ -n ${VER[$1]:-} ]] && return 0
  local text
  text=$(apt_ apt-cache show --no-all-versions "$1" 2>/dev/null) || return 1
  [[ -n $text ]] || return 1
  local v f s sec d pd
  v=$(awk '/^Version: /{print $2; exit}' <<<"$text")
  f=$(awk '/^Filename: /{print $2; exit}' <<<"$text")
  s=$(awk '/^SHA256: /{print $2; exit}' <<<"$text")
  sec=$(awk '/^Section: /{print $2; exit}' <<<"$text")
  d=$(awk '/^Depends: /{sub(/^Depends: /, ""); print; exit}' <<<"$text")
  pd=$(awk '/^Pre-Depends: /{sub(/^Pre-Depends: /, ""); print; exit}' <<<"$text")
  [[ -n $v && -n $f && -n $s ]] || return 1
  VER[$1]=$v FILE[$1]=$f SHA[$1]=$s SECTION[$1]=${sec##*/} DEPS[$1]="$pd, $d"
}
# dep_names "a (>= 1) | b, c:any" -> "a c" (first alternative, no versions or qualifiers)
dep_names() {
  local item name
  local -a items
  IFS=',' read -ra items <<<"$1"
  for item in "${items[@]}"; do
    name=${item%%|*}
    name=${name%%(*}
    name=${name//[[:space:]]/}
    name=${name%%:*}
    if [[ -n $name ]]; then echo "$name"; fi
  done
}

resolve() {
  selected=()
  local kmeta=$KERNEL_META:$DEB_ARCH dep
  info "$kmeta" || unavailable "no package $kmeta in $mirror $suite main"
  kpkg=
  for dep in $(dep_names "${DEPS[$kmeta]}"); do
    [[ $dep == linux-image-[0-9]* ]] && { kpkg=$dep:$DEB_ARCH; break; }
  done
  [[ -n $kpkg ]] || die "$KERNEL_META does not depend on a versioned linux-image package"
  info "$kpkg" || unavailable "no package $kpkg in $mirror $suite main"
  selected+=("$kpkg")
  # User space: the listed packages and, through Depends/Pre-Depends, the library
  # packages (Section: libs) they need; other dependencies (openssh-client of the
  # sftp server, ...) are not followed: the ELF check below proves nothing is missing.
  local -a queue=()
  local -A seen=()
  local p
  for p in $PACKAGES; do queue+=("$p:$DEB_ARCH"); done
  while ((${#queue[@]})); do
    p=${queue[0]}
    queue=("${queue[@]:1}")
    [[ -n ${seen[$p]:-} ]] && continue
    seen[$p]=1
    info "$p" || unavailable "no package $p in $mirror $suite main"
    selected+=("$p")
    for dep in $(dep_names "${DEPS[$p]}"); do
      [[ -n ${seen[$dep:$DEB_ARCH]:-} ]] && continue
      info "$dep:$DEB_ARCH" || continue  # virtual or other-arch: not a library we copy
      if [[ ${SECTION[$dep:$DEB_ARCH]} == libs ]]; then queue+=("$dep:$DEB_ARCH"); fi
    done
  done
}

deb_of() { echo "$cache/debs/$(basename "${FILE[$1]}")"; }
download() {
  local p deb tmp
  for p in "${selected[@]}"; do
    deb=$(deb_of "$p")
    if [[ -f $deb ]] && [[ $(sha256sum <"$deb" | cut -d' ' -f1) == "${SHA[$p]}" ]]; then
      continue
    fi
    note "downloading ${p%%:*} ${VER[$p]} (${p##*:})"
    tmp=$(mktemp -d "$work/dl.XXXXXX")
    if ! (cd "$tmp" && apt_ apt-get -q download "${p%%:*}:${p##*:}=${VER[$p]}") >"$work/dl.log" 2>&1; then
      sed 's/^/  /' "$work/dl.log" >&2
      return 1
    fi
    mv "$tmp"/*.deb "$deb.part"
    [[ $(sha256sum <"$deb.part" | cut -d' ' -f1) == "${SHA[$p]}" ]] || die "$deb: SHA256 mismatch"
    mv "$deb.part" "$deb"
  done
}
resolve
if ! download; then
  # The lists may name a version the mirror no longer has: refresh them once.
  ((updated)) && unavailable "cannot download the packages from $mirror (no network?)"
  apt_update
  VER=() FILE=() SHA=() SECTION=() DEPS=()
  resolve
  download || unavailable "cannot download the packages from $mirror (no network?)"
fi

# ---------------------------------------------------------------- unpack
sys=$work/sys    # the user-space packages, unpacked together like an installed system
kdir=$work/kernel
root=$work/root
mkdir -p "$sys" "$kdir" "$root"
dpkg-deb -x "$(deb_of "$kpkg")" "$kdir"
for p in "${selected[@]}"; do
  [[ $p == "$kpkg" ]] || dpkg-deb -x "$(deb_of "$p")" "$sys"
done

# ---------------------------------------------------------------- root file system
# install_path /ABS/PATH: copy it from the unpacked packages into the root, keeping
# symlinks as symlinks (their targets, resolved inside the packages, are installed too).
declare -A INSTALLED
elf_queue=()
install_path() {
  local rel=${1#/} hops=0 target
  while :; do
    [[ -n ${INSTALLED[$rel]:-} ]] && return 0
    [[ -e $sys/$rel || -L $sys/$rel ]] || die "$1: not in the packages ($PACKAGES)"
    mkdir -p "$root/$(dirname "$rel")"
    INSTALLED[$rel]=1
    if [[ -L $sys/$rel ]]; then
      cp -P "$sys/$rel" "$root/$rel"
      target=$(readlink "$sys/$rel")
      if [[ $target == /* ]]; then rel=${target#/}; else rel=$(dirname "$rel")/$target; fi
      rel=$(realpath -ms --relative-to=/ "/$rel")
      ((++hops < 20)) || die "$1: too many symlinks"
      continue
    fi
    cp -p "$sys/$rel" "$root/$rel"
    elf_queue+=("$rel")
    return 0
  done
}
find_lib() {
  local so=$1 d
  for d in "$sys"/lib/*-linux-gnu* "$sys"/usr/lib/*-linux-gnu* "$sys/lib" "$sys/usr/lib"; do
    if [[ -e $d/$so || -L $d/$so ]]; then echo "/${d#"$sys"/}/$so"; return 0; fi
  done
  return 1
}
for f in $FILES; do install_path "$f"; done
for so in libgcc_s.so.1 $LIBS; do  # libgcc_s: glibc dlopens it to unwind threads
  lib=$(find_lib "$so") || die "shared library $so not in the packages"
  install_path "$lib"
done
# Every ELF file's interpreter and NEEDED shared objects, until nothing is missing.
while ((${#elf_queue[@]})); do
  rel=${elf_queue[0]}
  elf_queue=("${elf_queue[@]:1}")
  readelf -h "$root/$rel" >/dev/null 2>&1 || continue
  interp=$(readelf -lW "$root/$rel" | sed -n 's/.*Requesting program interpreter: \(.*\)\]$/\1/p')
  [[ -z $interp ]] || install_path "$interp"
  for so in $(readelf -dW "$root/$rel" | sed -n 's/.*(NEEDED).*Shared library: \[\(.*\)\]$/\1/p'); do
    lib=$(find_lib "$so") || die "/$rel needs $so, which no package of $PACKAGES and their libraries has"
    install_path "$lib"
  done
done
[[ -z $(readelf -lW "$root/bin/busybox" | grep 'program interpreter' || true) ]] ||
  die "/bin/busybox is not static"

# Kernel modules, dependencies first, from each module's own .modinfo depends=.
kver=$(basename "$(ls -d "$kdir"/lib/modules/*)")
mdir=$kdir/lib/modules/$kver
[[ -f $kdir/boot/vmlinuz-$kver ]] || die "no /boot/vmlinuz-$kver in $kpkg"
declare -A KO BUILTIN LOADED
while read -r path; do
  n=$(basename "$path" .ko); KO[${n//-/_}]=$path
done < <(cd "$mdir" && find kernel -name '*.ko' | LC_ALL=C sort)
while read -r path; do
  n=$(basename "$path" .ko); BUILTIN[${n//-/_}]=1
done <"$mdir/modules.builtin"
load_order=() builtin_list=() moddep=()
declare -A TDEPS  # module -> its transitive dependencies (paths), nearest first
mod_deps() { tr '\0' '\n' <"$mdir/${KO[$1]}" | sed -n 's/^depends=//p' | head -n1 | tr ',' ' '; }
# add_module NAME: appends it to load_order after its dependencies.
add_module() {
  local m=${1//-/_} d t=()
  if [[ -n ${BUILTIN[$m]:-} || -n ${LOADED[$m]:-} ]]; then return 0; fi
  [[ -n ${KO[$m]:-} ]] || die "module $1 is neither built into nor a module of $kver"
  LOADED[$m]=1
  for d in $(mod_deps "$m"); do
    add_module "$d"
    d=${d//-/_}
    if [[ -z ${BUILTIN[$d]:-} ]]; then
      # shellcheck disable=SC2206
      t+=("${KO[$d]}" ${TDEPS[$d]})
    fi
  done
  TDEPS[$m]=$(printf '%s\n' "${t[@]}" | awk 'NF && !s[$0]++' | tr '\n' ' ')
  load_order+=("${KO[$m]}")
  moddep+=("${KO[$m]}: ${TDEPS[$m]}")
}
for m in $MODULES; do
  if [[ -n ${BUILTIN[${m//-/_}]:-} ]]; then builtin_list+=("$m"); continue; fi
  add_module "$m"
done
mkdir -p "$root/lib/modules/$kver" "$root/etc/rtlab"
for ko in "${load_order[@]}"; do
  mkdir -p "$root/lib/modules/$kver/$(dirname "$ko")"
  cp -p "$mdir/$ko" "$root/lib/modules/$kver/$ko"
done
printf '%s\n' "${load_order[@]}" >"$root/etc/rtlab/modules.load"
printf '%s\n' "${moddep[@]}" | sed 's/ *$//' >"$root/lib/modules/$kver/modules.dep"
cp -p "$mdir/modules.builtin" "$root/lib/modules/$kver/"

# Users, SSH keys, init.
mkdir -p "$work/out"
for f in id_ed25519 id_ed25519.pub dropbear_ed25519_host_key; do
  if [[ -s $out/$f ]]; then cp -p "$out/$f" "$work/out/$f"; fi
done
if [[ ! -s $work/out/id_ed25519 || ! -s $work/out/id_ed25519.pub ]]; then
  rm -f "$work/out/id_ed25519" "$work/out/id_ed25519.pub"
  ssh-keygen -q -t ed25519 -N '' -C "rtlab-lab-$board" -f "$work/out/id_ed25519"
fi
if [[ ! -s $work/out/dropbear_ed25519_host_key ]]; then
  dropbearkey -t ed25519 -f "$work/out/dropbear_ed25519_host_key" >/dev/null 2>&1 ||
    die "dropbearkey could not make an ed25519 host key"
fi
chmod 600 "$work/out/id_ed25519" "$work/out/dropbear_ed25519_host_key"
hostpub=$(dropbearkey -y -f "$work/out/dropbear_ed25519_host_key" | awk '/^ssh-ed25519 /{print $1" "$2}')
[[ -n $hostpub ]] || die "cannot read the public part of the host key"
alias_name=rtlab-lab-$board
echo "$alias_name $hostpub" >"$work/out/known_hosts"
clientpub=$(cat "$work/out/id_ed25519.pub")

mkdir -p "$root"/{proc,sys,dev,run,tmp,mnt,var/log,etc/dropbear,root/.ssh,home/lab/.ssh}
cp "$work/out/dropbear_ed25519_host_key" "$root/etc/dropbear/"
cat >"$root/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/bin/sh
lab:x:1000:1000:rtlab lab user:/home/lab:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
EOF
cat >"$root/etc/group" <<'EOF'
root:x:0:
tty:x:5:
lab:x:1000:
nogroup:x:65534:
EOF
# "*": no password can log in; public keys only (dropbear refuses "!" as locked).
cat >"$root/etc/shadow" <<'EOF'
root:*:19000:0:99999:7:::
lab:*:19000:0:99999:7:::
nobody:*:19000:0:99999:7:::
EOF
echo /bin/sh >"$root/etc/shells"
printf 'passwd: files\ngroup: files\nshadow: files\nhosts: files\n' >"$root/etc/nsswitch.conf"
cat >"$root/etc/profile" <<'EOF'
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
PS1='\u@\h:\w\$ '
EOF
echo "$clientpub" >"$root/root/.ssh/authorized_keys"
echo "$clientpub" >"$root/home/lab/.ssh/authorized_keys"
chmod 700 "$root/root" "$root/root/.ssh" "$root/home/lab" "$root/home/lab/.ssh"
chmod 600 "$root/root/.ssh/authorized_keys" "$root/home/lab/.ssh/authorized_keys" \
  "$root/etc/dropbear/dropbear_ed25519_host_key" "$root/etc/shadow"
chmod 1777 "$root/tmp"
cp "$here/init.sh" "$root/init"
chmod 755 "$root/init"

pythons=$(cd "$root" && find . -iname 'python*')
[[ -z $pythons ]] || die "Python found in the image: $pythons"

# ---------------------------------------------------------------- outputs
(cd "$root" && find . -mindepth 1 | LC_ALL=C sort >"$work/out/rootfs.list")
(cd "$root" && cpio -o -H newc -R 0:0 --reproducible --quiet <"$work/out/rootfs.list") |
  gzip -9n >"$work/out/initramfs.cpio.gz"
cp "$kdir/boot/vmlinuz-$kver" "$work/out/vmlinuz"
cp "$kdir/boot/config-$kver" "$work/out/config"
rootfs_files=$(wc -l <"$work/out/rootfs.list")
rootfs_bytes=$(du -sb --apparent-size "$root" | cut -f1)

js() { local s=$1; s=${s//\\/\\\\}; s=${s//\"/\\\"}; printf '"%s"' "$s"; }
file_entry() { # NAME
  printf '    %s: {"sha256": "%s", "bytes": %s}' "$(js "$1")" \
    "$(sha256sum <"$work/out/$1" | cut -d' ' -f1)" "$(stat -c %s "$work/out/$1")"
}
json_list() { local first=1 x; printf '['; for x in "$@"; do ((first)) || printf ', '; first=0; js "$x"; done; printf ']'; }
{
  echo '{'
  echo '  "schema": 1,'
  echo "  \"board\": $(js "$board"),"
  echo "  \"recipe_sha256\": \"$recipe\","
  echo "  \"built\": \"$(date -u +%Y-%m-%dT%H:%M:%SZ)\","
  echo "  \"debian\": {\"mirror\": $(js "$mirror"), \"suite\": \"$suite\", \"arch\": $(js "$DEB_ARCH")},"
  echo "  \"kernel\": {\"meta\": $(js "$KERNEL_META"), \"package\": $(js "${kpkg%%:*}"), \"version\": $(js "${VER[$kpkg]}"), \"release\": $(js "$kver")},"
  echo '  "packages": ['
  n=0
  for p in "${selected[@]}"; do
    if ((n++)); then echo ','; fi
    printf '    {"name": %s, "arch": %s, "version": %s, "deb": %s, "sha256": "%s"}' \
      "$(js "${p%%:*}")" "$(js "${p##*:}")" "$(js "${VER[$p]}")" "$(js "$(basename "${FILE[$p]}")")" "${SHA[$p]}"
  done
  echo
  echo '  ],'
  echo "  \"modules\": {\"load\": $(json_list "${load_order[@]}"), \"builtin\": $(json_list "${builtin_list[@]}")},"
  echo "  \"rootfs\": {\"files\": $rootfs_files, \"bytes\": $rootfs_bytes, \"python\": false},"
  echo "  \"uname_m\": $(js "$UNAME_M"),"
  echo "  \"host_key_alias\": $(js "$alias_name"),"
  echo "  \"qemu\": {\"binary\": $(js "$QEMU"), \"machine\": $(js "$QEMU_MACHINE"), \"cpu\": $(js "$QEMU_CPU"), \"kvm_cpu\": $(js "$QEMU_KVM_CPU"), \"nic\": $(js "$QEMU_NIC"), \"rng\": $(js "$QEMU_RNG"), \"console\": $(js "$CONSOLE"), \"kernel_args\": $(js "$KERNEL_ARGS")},"
  echo '  "files": {'
  n=0
  for f in "${outputs[@]}"; do
    [[ $f == manifest.json ]] && continue
    if ((n++)); then echo ','; fi
    file_entry "$f"
  done
  echo
  echo '  }'
  echo '}'
} >"$work/out/manifest.json"

rm -rf "$out.old"
if [[ -d $out ]]; then mv "$out" "$out.old"; fi
mv "$work/out" "$out"
rm -rf "$out.old"

# Drop downloaded packages no board of this cache names any more.
for deb in "$cache"/debs/*.deb; do
  [[ -e $deb ]] || continue
  grep -qsF "\"deb\": \"$(basename "$deb")\"" "$cache"/*/manifest.json || rm -f "$deb"
done

note "board $board: kernel $kver ($(stat -c %s "$out/vmlinuz") bytes), initramfs" \
  "$(stat -c %s "$out/initramfs.cpio.gz") bytes gzipped, root file system $rootfs_files files," \
  "$rootfs_bytes bytes"
