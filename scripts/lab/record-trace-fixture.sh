#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Record a small trace capture on a board, for the decoder's tests
# (tests/trace/fixtures/boards/<arch>/, docs/tracing.md "Reading the kernel's binary
# format"). The board needs only busybox and tracefs, no Python: everything on it
# is done by shell commands over ssh.
#
# On the board, in a tracefs instance of its own ("rtlab-fixture", removed at the
# end, also on error): trace clock mono, a small buffer (64 KiB per CPU), the
# scheduler, IRQ and timer events that attribution reads, then a shell pinned to
# CPU 0 writes numbered markers to the instance's trace_marker, sleeping 2 ms
# between them. CPU 0's trace_pipe_raw is read into a file, with the board's
# header_page, header_event and the format files of the events that exist there.
#
# On this side the pages are cut at the page size the board's header_page states,
# trimmed to their commit size and framed as TraceCapture.load reads them
# (DIR/meta.json, DIR/formats/, DIR/cpu0.pages). meta.json says the board's
# byte order (from the ELF header of the board's /bin/busybox), its word size
# (the size of header_page's commit field), uname -m and the kernel release.
#
# Usage:
#   python3 tests/lab/boards.py armhf-rt        # prints: ssh -F FILE board1
#   scripts/lab/record-trace-fixture.sh -F FILE board1 tests/trace/fixtures/boards/armhf
# OUTDIR must not exist yet (a fixture is never overwritten in place).
# Exit codes: 0 recorded; 1 error; 2 usage.
set -euo pipefail

prog=record-trace-fixture.sh
usage() {
  echo "usage: $prog [-F SSH_CONFIG] HOST OUTDIR" >&2
  exit 2
}

ssh_opts=()
while getopts "F:h" opt; do
  case $opt in
    F) ssh_opts=(-F "$OPTARG") ;;
    *) usage ;;
  esac
done
shift $((OPTIND - 1))
[[ $# -eq 2 ]] || usage
host=$1
out=$2
if [[ -e $out ]]; then
  echo "$prog: $out exists; remove it or name a new directory" >&2
  exit 2
fi
if [[ ! -d $(dirname "$out") ]]; then
  echo "$prog: $(dirname "$out") is not a directory; create it first" >&2
  exit 2
fi

# The board side: a busybox sh script, run as root and read from stdin. It prints a
# tar archive of the recorded files on stdout and nothing else.
read -r -d '' board_script <<'EOF' || true
set -e
T=/sys/kernel/tracing
I=$T/instances/rtlab-fixture
W=/tmp/rtlab-fixture.$$
[ -d "$T/events" ] || { echo "no tracefs at $T" >&2; exit 1; }
[ ! -e "$I" ] || { echo "$I exists: another recording is running (or remove it)" >&2; exit 1; }
cleanup() {
  [ -d "$I" ] && { echo 0 > "$I/tracing_on"; echo 0 > "$I/events/enable"; rmdir "$I"; }
  rm -rf "$W"
}
trap cleanup EXIT
mkdir "$W" "$W/formats" "$I"
echo mono > "$I/trace_clock"
echo 64 > "$I/buffer_size_kb"
echo 0 > "$I/tracing_on"
for e in sched/sched_switch sched/sched_waking irq/irq_handler_entry irq/irq_handler_exit \
         irq/softirq_entry irq/softirq_exit timer/hrtimer_expire_entry timer/hrtimer_expire_exit \
         timer/timer_expire_entry timer/timer_expire_exit \
         irq_vectors/local_timer_entry irq_vectors/local_timer_exit; do
  [ -e "$T/events/$e/format" ] || continue
  echo 1 > "$I/events/$e/enable"
  cp "$T/events/$e/format" "$W/formats/${e%%/*}__${e#*/}.format"
done
cp "$T/events/ftrace/print/format" "$W/formats/ftrace__print.format"
cp "$T/events/header_page" "$T/events/header_event" "$W/formats/"
echo 1 > "$I/tracing_on"
taskset -c 0 sh -c "for i in \$(seq 1 20); do echo \"rtlab-fixture marker \$i\" > $I/trace_marker; usleep 2000; done"
echo 0 > "$I/tracing_on"
# trace_pipe_raw blocks once it is drained: read what there is, one page per read.
timeout 5 dd if="$I/per_cpu/cpu0/trace_pipe_raw" of="$W/cpu0.raw" bs=4096 2>/dev/null || true
cat "$I/per_cpu/cpu0/stats" > "$W/stats"
uname -m > "$W/machine"
uname -r > "$W/release"
od -An -tu1 -j4 -N2 /bin/busybox > "$W/elf"
tar -C "$W" -cf - .
EOF

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ssh "${ssh_opts[@]}" "$host" sh -s > "$work/board.tar" <<< "$board_script"
mkdir "$work/rec"
tar -C "$work/rec" -xf "$work/board.tar"

# This side: frame the pages as TraceCapture.load reads them and write meta.json.
python3 - "$work/rec" "$work/out" <<'EOF'
import json, re, shutil, struct, sys
from pathlib import Path

rec, out = Path(sys.argv[1]), Path(sys.argv[2])
fields = {}
for m in re.finditer(r"field:[^;]*?(\w+);\s*offset:(\d+);\s*size:(\d+);",
                     (rec / "formats" / "header_page").read_text()):
    fields[m[1]] = (int(m[2]), int(m[3]))
commit_off, commit_size = fields["commit"]
data_off, data_size = fields["data"]
page_size = data_off + data_size
ei_class, ei_data = (int(x) for x in (rec / "elf").read_text().split())
order = {1: "little", 2: "big"}[ei_data]
word = {(4, "little"): "<I", (8, "little"): "<Q", (4, "big"): ">I", (8, "big"): ">Q"}
blob = (rec / "cpu0.raw").read_bytes()
pages = []
for i in range(0, len(blob) - page_size + 1, page_size):
    page = blob[i : i + page_size]
    (raw,) = struct.unpack_from(word[commit_size, order], page, commit_off)
    commit = raw & ((1 << 30) - 1)
    keep = data_off + commit + (commit_size if raw & (1 << 30) else 0)
    if commit:
        pages.append(page[:keep])
stats = {}
for line in (rec / "stats").read_text().splitlines():
    key, _, val = line.rpartition(":")
    if key and val.strip().isdigit():
        stats[key.strip().replace(" ", "_")] = int(val)
out.mkdir()
shutil.copytree(rec / "formats", out / "formats")
for f in (out / "formats").iterdir():
    f.chmod(0o644)  # tracefs files are root-only; a fixture is readable by all
with open(out / "cpu0.pages", "wb") as f:
    for p in pages:
        f.write(struct.pack("<I", len(p)) + p)
meta = {
    "version": 1,
    "clock": "mono",
    "cpus": [0],
    "lost": {"0": {k: stats.get(k, 0) for k in ("overrun", "dropped_events")}},
    "evicted": {},
    "meta": {
        "recorder": "scripts/lab/record-trace-fixture.sh",
        "byte_order": order,
        "long_bits": commit_size * 8,
        "machine": (rec / "machine").read_text().strip(),
        "kernel": (rec / "release").read_text().strip(),
        "pages": {"0": len(pages)},
        "markers": "20 lines 'rtlab-fixture marker N' from a shell on CPU 0, 2 ms apart",
    },
    "symbols": {},
}
(out / "meta.json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
print(f"{out}: {len(pages)} pages, {sum(map(len, pages))} bytes, "
      f"{meta['meta']['machine']} {order}-endian {commit_size * 8}-bit")
EOF
mv "$work/out" "$out"
echo "$prog: recorded $out"
