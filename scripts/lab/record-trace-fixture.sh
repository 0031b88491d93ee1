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
# shellcheck source=scripts/lab/trace-fixture-lib.sh
. "$(dirname "$0")/trace-fixture-lib.sh"
fixture_args "$@"

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
fx_events sched/sched_switch sched/sched_waking irq/irq_handler_entry irq/irq_handler_exit \
          irq/softirq_entry irq/softirq_exit timer/hrtimer_expire_entry timer/hrtimer_expire_exit \
          timer/timer_expire_entry timer/timer_expire_exit \
          irq_vectors/local_timer_entry irq_vectors/local_timer_exit
cp "$T/events/ftrace/print/format" "$W/formats/ftrace__print.format"
fx_headers
echo 1 > "$I/tracing_on"
taskset -c 0 sh -c "for i in \$(seq 1 20); do echo \"rtlab-fixture marker \$i\" > $I/trace_marker; usleep 2000; done"
echo 0 > "$I/tracing_on"
fx_read 0
fx_facts
tar -C "$W" -cf - .
EOF

fixture_run "sh -s" "$board_script"

# This side: frame the pages as TraceCapture.load reads them and write meta.json.
fixture_frame "$work/rec" "$work/out" 0 recorder=scripts/lab/record-trace-fixture.sh \
  "markers=20 lines 'rtlab-fixture marker N' from a shell on CPU 0, 2 ms apart"
mv "$work/out" "$out"
echo "$prog: recorded $out"
