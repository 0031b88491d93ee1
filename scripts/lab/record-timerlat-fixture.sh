#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Record the kernel's own latency split on a board, with a known cause, for
# rtlab.trace.timerlat's tests (tests/trace/fixtures/timerlat/<arch>/, docs/tracing.md
# "The kernel's own split"). The board needs busybox, tracefs with the timerlat
# tracer, rtla, and the static rtlab-probe of its architecture (copied to /tmp).
#
# On the board, with the engine's duty-cycle spinner running
#   rtlab-probe load --cpu 1 --cpu-duty ON/PERIOD --cpus CPU --policy fifo --priority 97
# (comm rtlab-spin, above the timerlat thread's FIFO 95):
#  1. a tracefs instance of its own ("rtlab-timerlat-fixture", removed at the end, also
#     on error): trace clock mono, current_tracer timerlat, osnoise/cpus = CPU (the old
#     value and timerlat_period_us are put back), the osnoise noise events and
#     sched_switch enabled; CPU's trace_pipe_raw is read after SECONDS, with the board's
#     header_page, header_event and the format files;
#  2. then, the instance gone and the spinner still running, `rtla timerlat top -a
#     THRESH_US -c CPU -q`, whose output and saved trace (timerlat_trace.txt) are kept.
# On this side the pages are cut at the page size header_page states, trimmed to their
# commit size and framed as TraceCapture.load reads them (OUTDIR/capture/), and the
# spinner's `load` record (its pid) is kept as OUTDIR/spinner.json.
#
# Usage:
#   python3 tests/lab/boards.py x86_64-rt          # prints: ssh -F FILE board1
#   scripts/lab/record-timerlat-fixture.sh -F FILE board1 tests/trace/fixtures/timerlat/x86_64
# Environment: CPU (1), SECONDS_REC (2), DUTY (5ms/50ms), THRESH_US (2500),
#   RTLAB_ENGINES (the installed engines: .venv/share/rtlab/engines).
# OUTDIR must not exist yet (a fixture is never overwritten in place).
# Exit codes: 0 recorded; 1 error; 2 usage.
set -euo pipefail

prog=record-timerlat-fixture.sh
# shellcheck source=scripts/lab/trace-fixture-lib.sh
. "$(dirname "$0")/trace-fixture-lib.sh"
fixture_args "$@"
cpu=${CPU:-1}
secs=${SECONDS_REC:-2}
duty=${DUTY:-5ms/50ms}
thresh=${THRESH_US:-2500}
engines=${RTLAB_ENGINES:-$(cd "$(dirname "$0")/../.." && pwd)/.venv/share/rtlab/engines}
machine=$(ssh "${ssh_opts[@]}" "$host" uname -m)
engine=$engines/$machine/rtlab-probe
[[ -x $engine ]] || { echo "$prog: no engine for $machine at $engine; run scripts/setup.sh" >&2; exit 1; }
scp -q "${ssh_opts[@]}" "$engine" "$host:/tmp/rtlab-probe"

# The board side: a busybox sh script read from stdin; a tar archive on stdout.
read -r -d '' board_script <<'EOF' || true
set -e
T=/sys/kernel/tracing
I=$T/instances/rtlab-timerlat-fixture
W=/tmp/rtlab-timerlat-fixture.$$
[ -e "$T/osnoise/cpus" ] && grep -qw timerlat "$T/available_tracers" ||
  { echo "no timerlat tracer in $T" >&2; exit 1; }
[ ! -e "$I" ] || { echo "$I exists: another recording is running (or remove it)" >&2; exit 1; }
old_cpus=$(cat "$T/osnoise/cpus")
old_period=$(cat "$T/osnoise/timerlat_period_us")
spin=
cleanup() {
  if [ -d "$I" ]; then
    echo 0 > "$I/tracing_on"; echo nop > "$I/current_tracer"; echo 0 > "$I/events/enable"
    rmdir "$I"
  fi
  echo "$old_cpus" > "$T/osnoise/cpus"
  echo "$old_period" > "$T/osnoise/timerlat_period_us"
  [ -z "$spin" ] || kill "$spin" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$W"
}
trap cleanup EXIT
mkdir "$W" "$W/formats" "$W/rtla"
/tmp/rtlab-probe load --cpu 1 --cpu-duty "$DUTY" --cpus "$CPU" --policy fifo --priority 97 \
  > "$W/spinner.jsonl" &
spin=$!
sleep 1
mkdir "$I"
echo 0 > "$I/tracing_on"
echo mono > "$I/trace_clock"
echo 4096 > "$I/buffer_size_kb"
echo "$CPU" > "$T/osnoise/cpus"
echo 1000 > "$T/osnoise/timerlat_period_us"
fx_events osnoise/irq_noise osnoise/thread_noise osnoise/softirq_noise osnoise/nmi_noise \
          sched/sched_switch
cp "$T/events/ftrace/timerlat/format" "$W/formats/ftrace__timerlat.format"
fx_headers
echo timerlat > "$I/current_tracer"
echo 1 > "$I/tracing_on"
sleep "$SECS"
echo 0 > "$I/tracing_on"
fx_read "$CPU"
echo nop > "$I/current_tracer"
echo 0 > "$I/events/enable"
rmdir "$I"
# rtla in the same conditions (its own instance; it sets osnoise/cpus itself)
cd "$W/rtla"
timeout 120 rtla timerlat top -a "$THRESH" -c "$CPU" -d 60 -q > stdout.txt 2> stderr.txt || true
echo "$old_cpus" > "$T/osnoise/cpus"
fx_facts
kill "$spin"; wait "$spin" 2>/dev/null || true; spin=
cd /
tar -C "$W" -cf - .
EOF

fixture_run "CPU=$cpu SECS=$secs DUTY=$duty THRESH=$thresh sh -s" "$board_script"

# This side: frame the pages as TraceCapture.load reads them (OUTDIR/capture/), then
# the spinner's record and rtla's files.
mkdir "$work/out"
fixture_frame "$work/rec" "$work/out/capture" "$cpu" \
  recorder=scripts/lab/record-timerlat-fixture.sh tracer=timerlat \
  "cause=rtlab-probe load --cpu 1 --cpu-duty $duty --cpus $cpu --policy fifo --priority 97 (comm rtlab-spin)"
python3 - "$work/rec" "$work/out" "$cpu" "$thresh" <<'EOF'
import json, shutil, sys
from pathlib import Path

rec, out, cpu, thresh = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], sys.argv[4]
spinner = next(json.loads(line) for line in (rec / "spinner.jsonl").read_text().splitlines()
               if '"load"' in line)
(out / "spinner.json").write_text(json.dumps(
    {k: spinner.get(k) for k in ("argv", "pid", "config", "workers")}, indent=1) + "\n")
rtla = out / "rtla"
rtla.mkdir()
for name in ("stdout.txt", "stderr.txt", "timerlat_trace.txt"):
    src = rec / "rtla" / name
    if src.exists():
        shutil.copy(src, rtla / name)
        (rtla / name).chmod(0o644)
(rtla / "command.txt").write_text(f"rtla timerlat top -a {thresh} -c {cpu} -d 60 -q\n")
print(f"{out}: rtla: {(rtla / 'stdout.txt').read_text().strip().splitlines()[-2:]}")
EOF
mv "$work/out" "$out"
echo "$prog: recorded $out"
