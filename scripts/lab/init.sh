#!/bin/busybox sh
# SPDX-License-Identifier: MIT
# /init of an emulated lab board (docs/lab.md). Runs as PID 1 under busybox sh:
# mounts the pseudo file systems, loads the kernel modules listed at build time,
# brings up the network from the kernel command line, then hands PID 1 to busybox
# init, which respawns dropbear (log on the console) and a console shell.
#
# Kernel command line read here (all optional):
#   rtlab.hostname=NAME        the board's host name (default: "board")
#   rtlab.mac=MAC              MAC of the NIC on qemu's user network -> eth0, 10.0.2.15/24
#   rtlab.link=ADDR/PREFIX     address of the board-to-board link NIC -> eth1
#   rtlab.linkmac=MAC          MAC of that NIC (how it is told from eth0)

/bin/busybox mkdir -p /proc /sys /dev /run /tmp /bin /sbin /usr/bin /usr/sbin
/bin/busybox --install -s
export PATH=/usr/sbin:/usr/bin:/sbin:/bin

log() { echo "rtlab-lab: $*" >/dev/console; }

mount -t proc -o nosuid,nodev,noexec proc /proc
mount -t sysfs -o nosuid,nodev,noexec sysfs /sys
mount -t devtmpfs -o nosuid,mode=755 devtmpfs /dev
mkdir -p /dev/pts /dev/shm
mount -t devpts -o nosuid,noexec,gid=5,mode=620,ptmxmode=666 devpts /dev/pts
mount -t tmpfs -o nosuid,nodev,mode=1777 tmpfs /dev/shm
mount -t tmpfs -o nosuid,nodev,mode=755 tmpfs /run
# The host copies the engine here: executable on purpose.
mount -t tmpfs -o nosuid,nodev,mode=1777 tmpfs /tmp
# cgroup v2 only; no controller is enabled in cgroup.subtree_control here: rtlab's
# shield enables what it needs and must find (and restore) the kernel's default.
mount -t cgroup2 -o nosuid,nodev,noexec cgroup2 /sys/fs/cgroup
mount -t debugfs -o nosuid,nodev,noexec debugfs /sys/kernel/debug
mount -t tracefs -o nosuid,nodev,noexec tracefs /sys/kernel/tracing
mkdir -p /run/rtlab /var/log /var/run

host=board mac=52:54:00:12:34:56 link='' linkmac=''
# shellcheck disable=SC2013  # the command line is words, not lines
for arg in $(cat /proc/cmdline); do
    case $arg in
        rtlab.hostname=*) host=${arg#*=} ;;
        rtlab.mac=*) mac=${arg#*=} ;;
        rtlab.link=*) link=${arg#*=} ;;
        rtlab.linkmac=*) linkmac=${arg#*=} ;;
    esac
done
hostname "$host"
echo "$host" >/etc/hostname
printf '127.0.0.1\tlocalhost\n10.0.2.15\t%s\n' "$host" >/etc/hosts

# Kernel modules, dependencies first (the order was resolved from the modules'
# own dependency lists when the image was built: /etc/rtlab/modules.load).
kver=$(uname -r)
if [ -f /etc/rtlab/modules.load ]; then
    while read -r ko; do
        [ -n "$ko" ] || continue
        insmod "/lib/modules/$kver/$ko" || log "insmod $ko failed"
    done </etc/rtlab/modules.load
fi

# The NICs are told apart by MAC, then named eth0 (user network) and eth1 (link).
iface_of() {
    for dev in /sys/class/net/*; do
        [ "$(cat "$dev/address" 2>/dev/null)" = "$1" ] && { echo "${dev##*/}"; return 0; }
    done
    return 1
}
wait_iface() {
    i=0
    while [ $i -lt 100 ]; do
        iface_of "$1" && return 0
        sleep 0.1
        i=$((i + 1))
    done
    return 1
}
name_iface() { # MAC NAME
    cur=$(wait_iface "$1") || { log "no NIC with MAC $1 for $2"; return 1; }
    [ "$cur" = "$2" ] && return 0
    # Move a NIC already holding the wanted name out of the way first.
    [ -e "/sys/class/net/$2" ] && ip link set "$2" name "rtlabtmp$$"
    ip link set "$cur" name "$2"
}
ip link set lo up
if name_iface "$mac" eth0; then
    ip addr add 10.0.2.15/24 dev eth0
    ip link set eth0 up
    ip route add default via 10.0.2.2 dev eth0
fi
if [ -n "$link" ] && [ -n "$linkmac" ] && name_iface "$linkmac" eth1; then
    ip addr add "$link" dev eth1
    ip link set eth1 up
fi

# The unprivileged user's home must be its own for dropbear to accept its key.
chown -R 1000:1000 /home/lab
chmod 700 /root /root/.ssh /home/lab /home/lab/.ssh

# busybox init keeps PID 1: it reaps orphans, respawns dropbear (foreground, log to
# the console, public-key logins only) and a shell on the console, and handles
# poweroff/reboot. A respawned command that fails at once is retried every second.
cat >/etc/inittab <<'END'
::respawn:/bin/sh -c '/usr/sbin/dropbear -F -E -s -p 22 -r /etc/dropbear/dropbear_ed25519_host_key; echo "rtlab-lab: dropbear exited ($?), restarting"; sleep 1'
::respawn:/bin/sh -c 'setsid cttyhack /bin/sh -l; sleep 1'
::ctrlaltdel:/sbin/reboot
::shutdown:/bin/sync
END

log "ready: $host $(uname -r) $(uname -m); ssh on port 22"
exec /bin/busybox init
