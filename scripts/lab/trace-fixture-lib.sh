# SPDX-License-Identifier: MIT
# What the scripts that record trace fixtures on a board share (sourced by
# scripts/lab/record-trace-fixture.sh and record-timerlat-fixture.sh; bash, set -euo
# pipefail, with $prog set):
#   fixture_args "$@"        -F SSH_CONFIG HOST OUTDIR: sets ssh_opts, host, out
#                            (exit 2 with a usage line when they are wrong)
#   fixture_board_steps      busybox sh functions for the board side's script
#   fixture_run REMOTE_CMD SCRIPT
#                            runs SCRIPT on the board, its tar archive unpacked into
#                            $work/rec ($work: a temporary directory, removed on exit)
#   fixture_frame REC CAPDIR CPU KEY=VALUE...
#                            frames REC/cpu.raw's pages as TraceCapture.load reads them
#                            into CAPDIR (formats/, cpuCPU.pages, meta.json with each
#                            KEY's string VALUE added to "meta")

usage() {
  echo "usage: $prog [-F SSH_CONFIG] HOST OUTDIR" >&2
  exit 2
}

fixture_args() {
  ssh_opts=()
  local opt OPTIND=1
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
}

# The board side's shared steps, with T (tracefs), I (our instance) and W (the work
# directory) set by the script that uses them.
read -r -d '' fixture_board_steps <<'EOF' || true
# fx_events EVENT...: enable those that exist in $I and keep their format files
fx_events() {
  for e in "$@"; do
    [ -e "$T/events/$e/format" ] || continue
    echo 1 > "$I/events/$e/enable"
    cp "$T/events/$e/format" "$W/formats/${e%%/*}__${e#*/}.format"
  done
}
# fx_headers: the ring buffer's header_page and header_event
fx_headers() {
  cp "$T/events/header_page" "$T/events/header_event" "$W/formats/"
}
# fx_read CPU: what CPU's trace_pipe_raw holds into $W/cpu.raw, its stats into $W/stats.
# trace_pipe_raw blocks once it is drained: read what there is, one page per read.
fx_read() {
  timeout 5 dd if="$I/per_cpu/cpu$1/trace_pipe_raw" of="$W/cpu.raw" bs=4096 2>/dev/null || true
  cat "$I/per_cpu/cpu$1/stats" > "$W/stats"
}
# fx_facts: uname -m, the kernel release and the ELF header's class and byte order
fx_facts() {
  uname -m > "$W/machine"
  uname -r > "$W/release"
  od -An -tu1 -j4 -N2 /bin/busybox > "$W/elf"
}
EOF

fixture_run() {
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  ssh "${ssh_opts[@]}" "$host" "$1" > "$work/board.tar" <<< "$fixture_board_steps
$2"
  mkdir "$work/rec"
  tar -C "$work/rec" -xf "$work/board.tar"
}

fixture_frame() {
  python3 - "$@" <<'EOF'
import json, re, shutil, struct, sys
from pathlib import Path

rec, cap, cpu = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
extra = dict(arg.split("=", 1) for arg in sys.argv[4:])
fields = {}
for m in re.finditer(r"field:[^;]*?(\w+);\s*offset:(\d+);\s*size:(\d+);",
                     (rec / "formats" / "header_page").read_text()):
    fields[m[1]] = (int(m[2]), int(m[3]))
commit_off, commit_size = fields["commit"]
data_off, data_size = fields["data"]
page_size = data_off + data_size
_, ei_data = (int(x) for x in (rec / "elf").read_text().split())
order = {1: "little", 2: "big"}[ei_data]
word = {(4, "little"): "<I", (8, "little"): "<Q", (4, "big"): ">I", (8, "big"): ">Q"}
blob = (rec / "cpu.raw").read_bytes()
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
cap.mkdir()
shutil.copytree(rec / "formats", cap / "formats")
for f in (cap / "formats").iterdir():
    f.chmod(0o644)  # tracefs files are root-only; a fixture is readable by all
with open(cap / f"cpu{cpu}.pages", "wb") as f:
    for p in pages:
        f.write(struct.pack("<I", len(p)) + p)
meta = {
    "version": 1,
    "clock": "mono",
    "cpus": [int(cpu)],
    "lost": {cpu: {k: stats.get(k, 0) for k in ("overrun", "dropped_events")}},
    "evicted": {},
    "meta": {
        "byte_order": order,
        "long_bits": commit_size * 8,
        "machine": (rec / "machine").read_text().strip(),
        "kernel": (rec / "release").read_text().strip(),
        "pages": {cpu: len(pages)},
        **extra,
    },
    "symbols": {},
}
(cap / "meta.json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
print(f"{cap}: {len(pages)} pages, {sum(map(len, pages))} bytes, "
      f"{meta['meta']['machine']} {order}-endian {commit_size * 8}-bit")
EOF
}
