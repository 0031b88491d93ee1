#!/bin/sh
# SPDX-License-Identifier: MIT
#
# rtlab-lava.sh: measure timer wake-up latency on a board with the static engine
# (rtlab-probe) alone and report it as LAVA test cases (docs/lava.md).
#
# POSIX sh + awk only (busybox is enough): no bash, no Python, no jq on the board.
# It runs `rtlab-probe timer`, keeps the engine's raw JSON Lines output as the
# run's artifact (`rtlab results import FILE` stores it with the board's facts),
# and prints one `lava-test-case` line per check: each CPU's max, p99.99 and
# missed periods, and one per SLO clause and CPU. Outside LAVA (no
# `lava-test-case` on PATH) it prints the very command lines LAVA's helpers would
# have been called with.
#
# Exit codes (as rtlab's): 0 run completed and SLO met (or none given), 1 error,
# 2 usage, 3 SLO not met (violated or undecided) or the engine's stop threshold
# hit, 4 skipped (the engine says why: no root, a missing kernel feature),
# 130 interrupted (SIGINT/SIGTERM: the partial result is still reported and kept).
# Any other engine exit code (killed by a signal: 137, 139; 255) is an error, 1, with
# a failed `engine-exit-code` test case whose measurement is the engine's code.

PROG=rtlab-lava

usage() {
    cat <<'EOF'
usage: rtlab-lava.sh [OPTIONS]

  --engine PATH        rtlab-probe to run (a path or a name on PATH; default rtlab-probe)
  --engine-url URL     download the engine from URL first (wget or curl)
  --engine-sha256 HEX  refuse the engine unless its SHA-256 is HEX
  --cpus LIST          CPUs to measure, e.g. 1 or 0-3 (default: all online CPUs)
  --interval DUR       wake-up period (default 1ms)
  --duration DUR       measuring time (default 60s)
  --priority N         SCHED_FIFO priority of the measuring threads (default 99)
  --engine-args ARGS   further `rtlab-probe timer` options, e.g. "--dma-latency 0"
  --slo EXPR           SLO checked on every CPU, rtlab's syntax, e.g.
                       "max < 100us and p99.99 < 50us" (default: none)
  --output-dir DIR     where the raw output is kept (default /tmp/rtlab-lava)
  --upload-cmd CMD     run `sh -c CMD upload FILE` after the run; the last line it
                       prints is the artifact's URL (recorded with lava-test-reference)
  --input FILE         report on an existing engine output instead of measuring
  -h, --help           this help
EOF
}

die() { # code message
    printf '%s\n' "$PROG: error: $2" >&2
    exit "$1"
}

ENGINE=rtlab-probe
ENGINE_URL=
ENGINE_SHA256=
CPUS=
INTERVAL=1ms
DURATION=60s
PRIORITY=99
ENGINE_ARGS=
SLO=
OUTPUT_DIR=/tmp/rtlab-lava
UPLOAD_CMD=
INPUT=

need_arg() { # option remaining-count
    [ "$2" -ge 2 ] || die 2 "$1 needs a value (see --help)"
}

while [ $# -gt 0 ]; do
    case "$1" in
        --engine) need_arg "$1" $#; ENGINE=$2; shift 2 ;;
        --engine-url) need_arg "$1" $#; ENGINE_URL=$2; shift 2 ;;
        --engine-sha256) need_arg "$1" $#; ENGINE_SHA256=$2; shift 2 ;;
        --cpus) need_arg "$1" $#; CPUS=$2; shift 2 ;;
        --interval) need_arg "$1" $#; INTERVAL=$2; shift 2 ;;
        --duration) need_arg "$1" $#; DURATION=$2; shift 2 ;;
        --priority) need_arg "$1" $#; PRIORITY=$2; shift 2 ;;
        --engine-args) need_arg "$1" $#; ENGINE_ARGS=$2; shift 2 ;;
        --slo) need_arg "$1" $#; SLO=$2; shift 2 ;;
        --output-dir) need_arg "$1" $#; OUTPUT_DIR=$2; shift 2 ;;
        --upload-cmd) need_arg "$1" $#; UPLOAD_CMD=$2; shift 2 ;;
        --input) need_arg "$1" $#; INPUT=$2; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) die 2 "unknown option $1 (see --help)" ;;
    esac
done

case "$CPUS" in all) CPUS= ;; esac

# --- reporting: LAVA's helpers, or the same command lines on stdout ---------------------

if command -v lava-test-case >/dev/null 2>&1; then
    IN_LAVA=1
else
    IN_LAVA=
fi

test_case() { # name --result R [--measurement M --units U]
    if [ -n "$IN_LAVA" ]; then
        lava-test-case "$@"
    else
        printf '%s\n' "lava-test-case $*"
    fi
}

test_reference() { # name --result R --reference URL
    if [ -n "$IN_LAVA" ] && command -v lava-test-reference >/dev/null 2>&1; then
        lava-test-reference "$@"
    else
        printf '%s\n' "lava-test-reference $*"
    fi
}

# printf, not echo: dash's echo would read backslashes in the board's facts
say() { printf '%s\n' "$PROG: $*"; }

# --- the SLO and the analysis: one awk program ------------------------------------------
#
# Reads the engine's JSON Lines (docs/engine-output.md) with a small tokenizer: the
# header (the board's facts) and the last complete result (else the last complete
# snapshot, a valid partial result). Prints lines for the shell:
#   case NAME RESULT [MEASUREMENT UNITS]     one LAVA test case
#   note TEXT                                a line for the log
#   verdict slo met|not_met|none
#   verdict run completed|partial|failed|invalid
# With -v check_only=1 it only parses the SLO and prints `error TEXT` when it is bad.

# shellcheck disable=SC2016  # an awk program: its $ are awk's
ANALYZE='
function fail_parse(msg) { parse_error = msg; return 0 }

# Tokenize one JSON line into V[path] = value (paths like channels/0/hist/buckets/3/1).
# Returns 1 on success, 0 when the line is not one complete JSON object.
function parse_json(line, V,    n, P, i, seg, T, m, j, tok, d, ctype, ckey, expkey, path, k, val, isstr) {
    for (k in V) delete V[k]
    gsub(/\\\\/, "\001", line)
    gsub(/\\"/, "\002", line)
    n = split(line, P, "\"")
    if (n % 2 == 0) return fail_parse("unbalanced quotes")
    d = 0; expkey = 0
    for (i = 1; i <= n; i++) {
        if (i % 2 == 0) {                      # a string
            val = P[i]; gsub(/\001/, "\\", val); gsub(/\002/, "\"", val)
            if (d > 0 && ctype[d] == "o" && expkey) { ckey[d] = val; expkey = 0; continue }
            if (d == 0) return fail_parse("string outside an object")
            path = ckey[1]; for (k = 2; k <= d; k++) path = path "/" ckey[k]
            V[path] = val
            continue
        }
        seg = P[i]
        gsub(/[][{}:,]/, " & ", seg)
        m = split(seg, T, /[ \t\r\n]+/)
        for (j = 1; j <= m; j++) {
            tok = T[j]
            if (tok == "") continue
            if (tok == "{" || tok == "[") {
                if (d > 0 && ctype[d] == "o" && expkey) return fail_parse("object key expected")
                d++; ctype[d] = (tok == "{") ? "o" : "a"
                if (tok == "{") { expkey = 1; ckey[d] = "" } else { expkey = 0; ckey[d] = 0 }
            } else if (tok == "}" || tok == "]") {
                if (d == 0) return fail_parse("unbalanced brackets")
                d--; expkey = 0
            } else if (tok == ",") {
                if (d == 0) return fail_parse("comma outside")
                if (ctype[d] == "o") expkey = 1; else ckey[d]++
            } else if (tok == ":") {
                continue
            } else {                           # number, true, false, null
                if (d == 0) return fail_parse("value outside an object")
                path = ckey[1]; for (k = 2; k <= d; k++) path = path "/" ckey[k]
                V[path] = tok
            }
        }
    }
    if (d != 0) return fail_parse("incomplete record")
    return 1
}

# The first key of a record is "type" in the engine output; read it cheaply (a long
# run has thousands of snapshots, and only the last one is read in full).
function record_type(line,    P, n, rest) {
    if (substr(line, 1, 9) == "{\"type\":\"") {
        rest = substr(line, 10, 24)
        return substr(rest, 1, index(rest, "\"") - 1)
    }
    n = split(line, P, "\"")
    if (n >= 5 && P[2] == "type") return P[4]
    return ""
}

function bucket_lo(idx,    g, m) {
    if (idx < B) return idx
    g = int((idx - B) / B); m = (idx - B) % B
    return (B + m) * POW2[g]
}
function bucket_hi(idx,    g) {
    if (idx < B) return idx
    g = int((idx - B) / B)
    return bucket_lo(idx) + POW2[g] - 1
}

function us(ns) { return sprintf("%.3f", ns / 1000) }

# A fact of the header for the log: n/a when the engine could not read it (null).
function fact(V, key) { return (key in V && V[key] != "null" && V[key] != "") ? V[key] : "n/a" }

# --- SLO expressions (rtlab.analysis.slo grammar) ---

function slo_error(msg) { slo_bad = msg; return 0 }

# The decimal number text times 10^k, exactly (no binary floating-point rounding).
function scaled(num, k,    ip, fp, dot) {
    dot = index(num, ".")
    if (dot) { ip = substr(num, 1, dot - 1); fp = substr(num, dot + 1) } else { ip = num; fp = "" }
    while (length(fp) < k) fp = fp "0"
    fp = substr(fp, 1, k)
    return (ip fp) + 0
}

function parse_slo(text,    parts, n, i, c, metric, op, num, unit, k, pv) {
    nclauses = 0
    text = tolower(text)
    gsub(/^[ \t]+|[ \t]+$/, "", text)
    if (text == "") return 1
    n = split(text, parts, /[ \t]+and[ \t]+/)
    for (i = 1; i <= n; i++) {
        c = parts[i]
        gsub(/^[ \t]+|[ \t]+$/, "", c)
        if (!match(c, /^[a-z][a-z0-9.]*/)) return slo_error("cannot parse SLO clause \"" c "\"")
        metric = substr(c, 1, RLENGTH); c = substr(c, RLENGTH + 1); sub(/^[ \t]+/, "", c)
        if (!match(c, /^(<=|>=|<|>)/)) return slo_error("cannot parse SLO clause \"" parts[i] "\"")
        op = substr(c, 1, RLENGTH); c = substr(c, RLENGTH + 1); sub(/^[ \t]+/, "", c)
        if (!match(c, /^[0-9]+(\.[0-9]+)?/)) return slo_error("cannot parse SLO clause \"" parts[i] "\"")
        num = substr(c, 1, RLENGTH); unit = substr(c, RLENGTH + 1); sub(/^[ \t]+/, "", unit)
        if (metric == "mean") metric = "avg"
        if (metric != "min" && metric != "avg" && metric != "mode" && metric != "max" && metric != "missed") {
            if (metric !~ /^p[0-9][0-9]?(\.[0-9]+)?$/)
                return slo_error("unknown SLO metric \"" metric "\"")
            pv = substr(metric, 2) + 0
            if (pv <= 0 || pv >= 100) return slo_error("percentile must be between 0 and 100 (exclusive): " metric)
        }
        if (metric == "missed") {
            if (unit != "" || index(num, ".") && num + 0 != int(num + 0))
                return slo_error("missed is a count: write e.g. missed <= 0")
            bound = int(num + 0); unitname = ""
        } else {
            if (unit == "") return slo_error("SLO bound needs a unit (ns, us, ms, s): " parts[i])
            if (unit == "ns") k = 0
            else if (unit == "us" || unit == "\302\265s" || unit == "\316\274s") { k = 3; unit = "us" }
            else if (unit == "ms") k = 6
            else if (unit == "s") k = 9
            else return slo_error("unknown unit \"" unit "\" in SLO clause " parts[i])
            bound = scaled(num, k)
        }
        nclauses++
        CM[nclauses] = metric; CO[nclauses] = op; CB[nclauses] = bound
        CT[nclauses] = metric " " op " " num unit
        CN[nclauses] = metric "-" (op == "<" ? "lt" : op == "<=" ? "le" : op == ">" ? "gt" : "ge") "-" num unit
    }
    return never_met()
}

# Metric a is <= metric b on every channel of every run (as rtlab.analysis.slo): a metric
# and itself; min <= anything but mode and missed; anything but those <= max; pA <= pB.
function at_most(a, b) {
    if (a == b) return 1
    if (a == "mode" || b == "mode" || a == "missed" || b == "missed") return 0
    if (a == "min" || b == "max") return 1
    if (a ~ /^p/ && b ~ /^p/) return substr(a, 2) + 0 <= substr(b, 2) + 0
    return 0
}

# An SLO no run can meet is a usage error, as in rtlab: a strict upper bound of 0, or a
# lower bound at or above an upper bound on the same or a larger metric.
function never_met(    i, j, strict) {
    for (i = 1; i <= nclauses; i++)
        if (CO[i] == "<" && CB[i] <= 0)
            return slo_error("SLO can never be met: " CT[i] ": a measured value is never negative")
    for (i = 1; i <= nclauses; i++) {
        if (CO[i] != ">" && CO[i] != ">=") continue
        for (j = 1; j <= nclauses; j++) {
            if (CO[j] != "<" && CO[j] != "<=") continue
            if (!at_most(CM[i], CM[j])) continue
            strict = (CO[i] == ">" || CO[j] == "<")
            if (CB[i] > CB[j] || (CB[i] == CB[j] && strict))
                return slo_error("SLO can never be met: " CT[i] " and " CT[j] " cannot both hold")
        }
    }
    return 1
}

function holds(value, op, bound) {
    if (op == "<") return value < bound
    if (op == "<=") return value <= bound
    if (op == ">") return value > bound
    return value >= bound
}

# --- statistics of one channel (rtlab.results.summary) ---

# Percentile text p ("99.99") -> P (9999) and D (10000): p/100 = P/D, exactly.
function pct_frac(p,    dot, dec, k) {
    dot = index(p, ".")
    dec = dot ? length(p) - dot : 0
    PF_P = scaled(p, dec); PF_D = 100
    for (k = 0; k < dec; k++) PF_D *= 10
}

# Value of percentile p of channel c (rank ceil(p/100 N), the upper edge of its bucket,
# clamped to [min, max]); "" when N is too small to support it.
function percentile(c, p,    n, rank, q, r, j, seen) {
    n = NS[c]
    pct_frac(p)
    if (n <= 0 || n * (PF_D - PF_P) < PF_D) return ""
    q = int(n / PF_D); r = n - q * PF_D
    rank = q * PF_P + int((r * PF_P + PF_D - 1) / PF_D)
    return value_at_rank(c, rank, 1)
}

# The upper (upper=1) or lower edge of the bucket holding rank r, clamped to [min, max].
function value_at_rank(c, r, upper,    j, seen, v) {
    if (upper && r == 1) return MIN[c]
    if (!upper && r == NS[c]) return MAX[c]
    seen = 0
    for (j = 0; j < NB[c]; j++) {
        seen += BC[c, j]
        if (seen >= r) break
    }
    if (j >= NB[c]) j = NB[c] - 1
    v = upper ? bucket_hi(BI[c, j]) : bucket_lo(BI[c, j])
    if (v > MAX[c]) v = MAX[c]
    if (v < MIN[c]) v = MIN[c]
    return v
}

function mode_of(c,    j, lo, hi, width, mid, num, best, bn, bd) {
    best = -1; bn = 0; bd = 1
    for (j = 0; j < NB[c]; j++) {
        lo = bucket_lo(BI[c, j]); hi = bucket_hi(BI[c, j])
        width = hi - lo + 1; mid = lo + int((hi - lo) / 2); if (mid < 1) mid = 1
        num = BC[c, j] * mid
        if (num * bd > bn * width) { best = j; bn = num; bd = width }
    }
    if (best < 0) return ""
    lo = bucket_lo(BI[c, best]); hi = bucket_hi(BI[c, best])
    return lo + int((hi - lo) / 2)
}

# Square root by the Newton iteration (busybox awk may be built without math functions:
# no sqrt, exp, log or ^ here).
function sqrt_(x,    r, i) {
    if (x <= 0) return 0
    r = (x > 1) ? x / 2 : 1
    for (i = 0; i < 200; i++) r = (r + x / r) / 2
    return r
}

# 1-based ranks (RI_L, RI_U) of the 95 % distribution-free interval of percentile p for
# N independent samples (as rtlab.analysis.stats.rank_interval, without its widening
# for dependent samples); 0 for an end that no rank provides. M = samples above the
# true percentile ~ Binomial(N, q): its probabilities are built from the most likely
# count outwards, each from its neighbour, until they are negligible (< 1e-40 of it).
function rank_interval(n, p,    q, mu, sd, md, k, ratio, S, lo, hi, tot, cum, a, b, z) {
    pct_frac(p)
    q = (PF_D - PF_P) / PF_D
    mu = n * q; sd = sqrt_(n * q * (1 - q))
    if (24 * sd > 4000000) {                   # huge N: the normal approximation
        z = 1.959963984540054
        a = mu + z * sd + 0.5; a = (a == int(a)) ? a : int(a) + 1
        b = int(mu - z * sd - 0.5)
    } else {
        md = int((n + 1) * q); if (md > n) md = n
        ratio = q / (1 - q)
        S[md] = 1; tot = 1
        for (k = md; k > 0 && S[k] > 1e-40; k--) { S[k - 1] = S[k] * k / ((n - k + 1) * ratio); tot += S[k - 1] }
        lo = k
        for (k = md; k < n && S[k] > 1e-40; k++) { S[k + 1] = S[k] * (n - k) * ratio / (k + 1); tot += S[k + 1] }
        hi = k
        a = hi + 1; cum = 0
        for (k = hi; k >= lo; k--) { cum += S[k] / tot; if (cum <= 0.025) a = k; else break }
        b = lo - 1; cum = 0
        for (k = lo; k <= hi; k++) { cum += S[k] / tot; if (cum <= 0.025) b = k; else break }
    }
    RI_L = n - a + 1; if (RI_L < 1) RI_L = 0
    RI_U = (b >= 0) ? n - b : 0
}

function load_channels(V,    c, j, key) {
    NCH = 0
    for (c = 0; ("channels/" c "/name") in V; c++) {
        NCH++
        NAME[c] = V["channels/" c "/name"]
        NS[c] = V["channels/" c "/samples"] + 0
        MISSED[c] = V["channels/" c "/missed"] + 0
        MIN[c] = V["channels/" c "/min_ns"]; MAX[c] = V["channels/" c "/max_ns"]
        SUM[c] = V["channels/" c "/sum_ns"] + 0
        B = POW2[V["channels/" c "/hist/sub_bits"] + 0]
        HT[c] = 0
        for (j = 0; ("channels/" c "/hist/buckets/" j "/0") in V; j++) {
            BI[c, j] = V["channels/" c "/hist/buckets/" j "/0"] + 0
            BC[c, j] = V["channels/" c "/hist/buckets/" j "/1"] + 0
            HT[c] += BC[c, j]
        }
        NB[c] = j
    }
}

# Why the numbers of channel c contradict each other ("" when they do not).
function problem(c,    avg) {
    if (HT[c] != NS[c]) return NAME[c] ": histogram holds " HT[c] " samples, the channel says " NS[c]
    if (NS[c] == 0) return ""
    if (MIN[c] == "null" || MAX[c] == "null" || MIN[c] + 0 > MAX[c] + 0) return NAME[c] ": min/max missing or inverted"
    if (bucket_hi(BI[c, 0]) < MIN[c] + 0 || bucket_lo(BI[c, 0]) > MIN[c] + 0) return NAME[c] ": min outside its bucket"
    if (bucket_lo(BI[c, NB[c] - 1]) > MAX[c] + 0 || bucket_hi(BI[c, NB[c] - 1]) < MAX[c] + 0) return NAME[c] ": max outside its bucket"
    avg = SUM[c] / NS[c]
    if (avg < MIN[c] + 0 || avg > MAX[c] + 0) return NAME[c] ": mean outside [min, max]"
    return ""
}

BEGIN {
    POW2[0] = 1
    for (g = 1; g <= 64; g++) POW2[g] = POW2[g - 1] * 2
    B = 128
    if (!parse_slo(slo)) {
        if (check_only) { print "error " slo_bad; exit 2 }
    }
    if (check_only) exit 0
}

{
    t = record_type($0)
    if (t == "header" && header == "") header = $0
    else if (t == "result") result = $0
    else if (t == "snapshot") { prev_snapshot = last_snapshot; last_snapshot = $0 }
}

END {
    if (check_only) exit (slo_bad != "" ? 2 : 0)
    if (header == "" || !parse_json(header, H)) {
        print "note no engine header in the output: nothing was measured"
        print "verdict run failed"; print "verdict slo none"; exit 0
    }
    print "note board " fact(H, "system/hostname") ", kernel " fact(H, "system/release") " (" fact(H, "system/version") "), preemption " fact(H, "system/preempt") ", CPU " fact(H, "system/cpu_model") ", engine " fact(H, "engine_version") " (" fact(H, "engine_arch") ")"
    state = ""; status = ""
    if (result != "" && parse_json(result, R)) { state = "result"; status = R["status"] }
    else if (last_snapshot != "" && parse_json(last_snapshot, R)) { state = "snapshot"; status = "partial" }
    else if (prev_snapshot != "" && parse_json(prev_snapshot, R)) { state = "snapshot"; status = "partial" }
    if (state == "") {
        print "note the engine wrote no snapshot and no result: nothing was measured"
        print "case rt-valid " (H["effective/rt_valid"] == "true" ? "pass" : "fail")
        print "verdict run failed"; print "verdict slo none"; exit 0
    }
    load_channels(R)
    bad = ""
    for (c = 0; c < NCH; c++) { why = problem(c); if (why != "" && bad == "") bad = why }
    elapsed = R["elapsed_ns"] + 0
    if (bad != "") {
        print "note the numbers contradict each other (" bad "): no verdict is drawn from them"
        print "case engine-run fail"
        run = "invalid"
    } else if (status == "completed") {
        print "case engine-run pass " sprintf("%.3f", elapsed / 1e9) " s"
        run = "completed"
    } else {
        print "note the run ended with status " status (R["error"] != "" && R["error"] != "null" ? ": " R["error"] : "") "; what it measured is reported"
        print "case engine-run fail " sprintf("%.3f", elapsed / 1e9) " s"
        run = (status == "threshold") ? "threshold" : "partial"
    }
    print "case rt-valid " (H["effective/rt_valid"] == "true" ? "pass" : "fail")
    for (c = 0; c < NCH; c++) {
        if (NS[c] == 0 || bad != "") {
            print "case " NAME[c] "-max fail"
            print "case " NAME[c] "-p99.99 skip"
            print "case " NAME[c] "-missed " (bad != "" ? "fail" : "pass") " " MISSED[c] " periods"
            continue
        }
        print "case " NAME[c] "-max pass " us(MAX[c]) " us"
        v = percentile(c, "99.99")
        if (v == "") print "case " NAME[c] "-p99.99 skip"
        else print "case " NAME[c] "-p99.99 pass " us(v) " us"
        print "case " NAME[c] "-missed pass " MISSED[c] " periods"
        print "note " NAME[c] ": " NS[c] " samples, min " us(MIN[c]) " avg " us(SUM[c] / NS[c]) " max " us(MAX[c]) " us" (v == "" ? ", p99.99 n/a (needs 10000 samples)" : ", p99.99 " us(v) " us") ", " MISSED[c] " missed"
    }
    if (nclauses == 0) { print "verdict run " run; print "verdict slo none"; exit 0 }
    failed = 0; checks = 0
    for (c = 0; c < NCH; c++) {
        for (i = 1; i <= nclauses; i++) {
            checks++
            name = "slo-" NAME[c] "-" CN[i]
            m = CM[i]; unit = (m == "missed") ? "periods" : "us"
            if (bad != "") { print "note " NAME[c] ": " CT[i] ": not checked: the result failed validation"; print "case " name " fail"; failed++; continue }
            if (m !~ /^p/) {
                if (NS[c] == 0 && m != "missed") { print "note " NAME[c] ": " CT[i] ": " m " unknown (no samples)"; print "case " name " fail"; failed++; continue }
                if (m == "min") val = MIN[c] + 0
                else if (m == "max") val = MAX[c] + 0
                else if (m == "avg") val = SUM[c] / NS[c]
                else if (m == "mode") val = mode_of(c)
                else val = MISSED[c]
                ok = holds(val, CO[i], CB[i])
                shown = (m == "missed") ? val : us(val)
                print "note " NAME[c] ": " CT[i] " " (ok ? "holds" : "violated") ": " m " = " shown (m == "missed" ? "" : " us")
                print "case " name " " (ok ? "pass" : "fail") " " shown " " unit
                if (!ok) failed++
                continue
            }
            p = substr(m, 2)
            if (NS[c] == 0) { print "note " NAME[c] ": " CT[i] " undecided: no samples"; print "case " name " fail"; failed++; continue }
            v = percentile(c, p)
            rank_interval(NS[c], p)
            lo = RI_L ? value_at_rank(c, RI_L, 0) : ""
            hi = RI_U ? value_at_rank(c, RI_U, 1) : ""
            if (CO[i] == "<" || CO[i] == "<=") {
                met = (hi != "" && holds(hi, CO[i], CB[i])); broken = (lo != "" && !holds(lo, CO[i], CB[i]))
            } else {
                met = (lo != "" && holds(lo, CO[i], CB[i])); broken = (hi != "" && !holds(hi, CO[i], CB[i]))
            }
            st = met ? "holds" : broken ? "violated" : "undecided"
            print "note " NAME[c] ": " CT[i] " " st ": " m " = " (v == "" ? "n/a" : us(v) " us") ", 95 % interval [" (lo == "" ? "-inf" : us(lo)) ", " (hi == "" ? "unbounded" : us(hi)) "] us (independent samples assumed)" (st == "undecided" ? ": the run is too short to decide" : "")
            if (v == "") print "case " name " " (met ? "pass" : "fail")
            else print "case " name " " (met ? "pass" : "fail") " " us(v) " us"
            if (!met) failed++
        }
    }
    print "case slo " (failed ? "fail" : "pass") " " failed " checks"
    print "note SLO " (failed ? "NOT MET: " failed " of " checks " check(s) not met" : "met: " checks " check(s) passed") " (" slo ")"
    print "verdict run " run
    print "verdict slo " (failed ? "not_met" : "met")
}
'

# --- the SLO is checked before anything runs ----------------------------------------------

if [ -n "$SLO" ]; then
    bad=$(awk -v check_only=1 -v slo="$SLO" "$ANALYZE" </dev/null) || {
        die 2 "${bad#error }"
    }
fi

# --- the engine ---------------------------------------------------------------------------

mkdir -p "$OUTPUT_DIR" || die 1 "cannot create $OUTPUT_DIR"

if [ -z "$INPUT" ]; then
    if [ -n "$ENGINE_URL" ]; then
        dest="$OUTPUT_DIR/rtlab-probe"
        say "downloading the engine from $ENGINE_URL"
        if command -v wget >/dev/null 2>&1; then
            wget -q -O "$dest.part" "$ENGINE_URL" || die 1 "cannot download $ENGINE_URL"
        elif command -v curl >/dev/null 2>&1; then
            curl -fsSL -o "$dest.part" "$ENGINE_URL" || die 1 "cannot download $ENGINE_URL"
        else
            die 1 "neither wget nor curl on this board to download $ENGINE_URL"
        fi
        mv "$dest.part" "$dest" || die 1 "cannot install $dest"
        chmod 755 "$dest" || die 1 "cannot make $dest executable"
        ENGINE=$dest
    fi
    case "$ENGINE" in
        */*) [ -x "$ENGINE" ] || die 1 "engine $ENGINE not found or not executable" ;;
        *) command -v "$ENGINE" >/dev/null 2>&1 || die 1 "engine $ENGINE not on PATH (give --engine PATH or --engine-url URL)" ;;
    esac
    if [ -n "$ENGINE_SHA256" ]; then
        path=$ENGINE
        case "$path" in */*) ;; *) path=$(command -v "$ENGINE") ;; esac
        sum=$(sha256sum "$path" 2>/dev/null) || die 1 "cannot compute the SHA-256 of $path (no sha256sum)"
        [ "${sum%% *}" = "$ENGINE_SHA256" ] || die 1 "engine $path has SHA-256 ${sum%% *}, expected $ENGINE_SHA256"
    fi
    version=$("$ENGINE" --version --json 2>&1) || die 1 "engine $ENGINE does not run here: $version"
    say "engine: $version"

    host=$(uname -n 2>/dev/null || echo board)
    stamp=$(date -u +%Y%m%dT%H%M%SZ)
    RAW="$OUTPUT_DIR/rtlab-$host-$stamp.jsonl"
    set -- timer --interval "$INTERVAL" --duration "$DURATION" --output "$RAW"
    [ -n "$CPUS" ] && set -- "$@" --cpus "$CPUS"
    [ -n "$PRIORITY" ] && set -- "$@" --priority "$PRIORITY"
    say "running: $ENGINE $*${ENGINE_ARGS:+ $ENGINE_ARGS}"

    child=
    interrupted=
    # the engine stops on SIGTERM and writes its (interrupted) result; SIGINT would not
    # reach it (a background job of a non-interactive shell ignores SIGINT)
    # shellcheck disable=SC2317,SC2329  # called by the trap
    on_signal() {
        interrupted=1
        [ -n "$child" ] && kill -TERM "$child" 2>/dev/null
    }
    trap on_signal TERM INT
    # the engine's stderr is kept to name the reason of a skip (exit 4: no root, a CPU
    # outside the job's cpuset, a missing kernel feature); it is shown when it ends
    errlog="$OUTPUT_DIR/.rtlab-lava-engine-stderr.$$"
    # shellcheck disable=SC2086  # ENGINE_ARGS is a list of options, split on purpose
    "$ENGINE" "$@" $ENGINE_ARGS 2>"$errlog" &
    child=$!
    while :; do
        wait "$child"
        rc=$?
        # a signal interrupts wait; wait again until the engine has really ended
        if [ "$rc" -gt 128 ] && kill -0 "$child" 2>/dev/null; then
            continue
        fi
        break
    done
    trap - TERM INT
    skip_reason=
    if [ -s "$errlog" ]; then
        cat "$errlog" >&2
        # the engine says `rtlab-probe PROBE: skipped: REASON` (docs/engine.md)
        skip_reason=$(awk 'sub(/^rtlab-probe [a-z]+: skipped: /, "") { r = $0 } END { print r }' "$errlog")
    fi
    rm -f "$errlog"
    say "engine exit code $rc"
    if [ "$rc" -eq 4 ]; then
        say "skipped: ${skip_reason:-the engine gave no reason}"
    fi
else
    [ -r "$INPUT" ] || die 2 "cannot read $INPUT"
    RAW=$INPUT
    rc=0
fi

# an exit code the engine does not document (killed by a signal: 137 SIGKILL, e.g. the
# out-of-memory killer, 139 SIGSEGV; 255) is an error (1), never passed through
odd_rc=
case "$rc" in
    0|1|2|3|4|130) ;;
    *)
        odd_rc=$rc
        rc=1 ;;
esac

# --- report -------------------------------------------------------------------------------

slo_verdict=none
run_verdict=failed
if [ -s "$RAW" ]; then
    report=$(awk -v slo="$SLO" "$ANALYZE" "$RAW") || die 1 "cannot analyze $RAW"
else
    report="note the engine wrote nothing to $RAW"
fi
# the lines are read from a here-document, not a pipe, so the verdicts stay in this shell
set -f  # the words of a `case` line are split, never globbed
while IFS= read -r line; do
    kind=${line%% *}
    rest=${line#* }
    case "$kind" in
        case)
            # shellcheck disable=SC2086  # NAME RESULT [MEASUREMENT UNITS]: split on purpose
            set -- $rest
            if [ $# -ge 4 ]; then
                test_case "$1" --result "$2" --measurement "$3" --units "$4"
            else
                test_case "$1" --result "$2"
            fi ;;
        note) say "$rest" ;;
        verdict)
            case "$rest" in
                "slo "*) slo_verdict=${rest#slo } ;;
                "run "*) run_verdict=${rest#run } ;;
            esac ;;
    esac
done <<EOF
$report
EOF

if [ "$run_verdict" = failed ]; then
    # nothing measured: the run (and an SLO, which cannot be met without numbers) is
    # skipped when the engine says so (no privilege, a missing kernel feature), else failed
    skipped=fail
    [ "$rc" -eq 4 ] && skipped=skip
    test_case engine-run --result "$skipped"
    [ -n "$SLO" ] && test_case slo --result "$skipped"
fi

if [ -n "$odd_rc" ]; then
    why=
    if [ "$odd_rc" -gt 128 ] && [ "$odd_rc" -le 192 ]; then
        why=" (killed by signal $((odd_rc - 128)))"
    fi
    say "the engine's exit code $odd_rc$why is not one of its documented codes (0, 1, 2, 3, 4, 130): reported as an error (1)"
    test_case engine-exit-code --result fail --measurement "$odd_rc" --units code
fi

# --- the artifact -------------------------------------------------------------------------

if [ -s "$RAW" ]; then
    say "raw output (rtlab results import FILE): $RAW"
    if [ -n "$UPLOAD_CMD" ]; then
        if url=$(sh -c "$UPLOAD_CMD" upload "$RAW" | tail -n 1) && [ -n "$url" ]; then
            test_reference rtlab-raw-output --result pass --reference "$url"
        else
            test_case rtlab-raw-output-upload --result fail
        fi
    fi
fi

# --- exit code ----------------------------------------------------------------------------

if [ -n "${interrupted:-}" ] || [ "$rc" -eq 130 ]; then
    exit 130
fi
[ -n "$odd_rc" ] && exit 1  # an error, whatever was measured (as rtlab: error > SLO)
case "$run_verdict" in
    failed|invalid)
        case "$rc" in 0|3) exit 1 ;; *) exit "$rc" ;; esac ;;
esac
[ "$run_verdict" = threshold ] && exit 3
[ "$run_verdict" = partial ] && [ "$rc" -eq 0 ] && exit 1
[ "$slo_verdict" = not_met ] && exit 3
if [ "$rc" -ne 0 ]; then
    exit "$rc"
fi
exit 0
