#!/usr/bin/env bash
# The distributed layer's fault matrix (ctest test_fault_matrix, label
# "faults"): for each workload (DDP, ZeRO, RPC sync / async / RRef, the
# pipeline, a checkpoint save), rank 1 of 2 is killed (SIGKILL) or stopped
# (SIGSTOP) at a chosen point by CFT_FAULT (src/dist/fault.c), with errors
# returned and with the job aborted on a timeout. Each case passes when
#   - rank 0 reports an error that names the call or collective and a rank
#     (its own "FM" line, or the engine's line before aborting the job),
#   - rank 0 has ended (or mpirun has, when the job was aborted) within the
#     deadline (CFT_DIST_TIMEOUT=2) + 2 s of the fault,
#   - nothing hangs (each run is bounded by timeout 60), and
#   - after a killed checkpoint save, the previous checkpoint loads whole.
# Killed ranks run under "mpirun --enable-recovery" (without it mpirun takes
# the job down itself at once, which the last row checks), so that the
# survivors meet a dead peer as a user of a recovering launcher would.
#
#   scripts/fault-matrix.sh <fault_matrix binary> <mpirun> [mpirun flags...]
set -uo pipefail
bin=$1 mpirun=$2
shift 2
flags=("$@")
deadline=2
work=$(mktemp -d "${TMPDIR:-/tmp}/cft-faults.XXXXXX")
trap 'rm -rf "$work"' EXIT

# workload and the fault point of rank 1 (its n-th operation of that name)
cases=(
    "ddp *:6"
    "zero *:8"
    "rpc_sync rpc_call:3"
    "rpc_async rpc_call:3"
    "rref rpc_fetch:2"
    "pipeline *:10"
    "checkpoint checkpoint_write:2"
)
pass=0 fail=0
printf '%-11s %-22s %-5s %-8s %-7s %-7s %s\n' workload fault how errors ended verdict \
    "rank 0's error"
run_case() { # workload point how abort recovery
    local w=$1 point=$2 how=$3 ab=$4 rec=$5 out=$work/out err=$work/err
    local ck=$work/ckpt_${w}_${how}_${ab}
    rm -rf "$ck" "$ck.partial"
    local extra=()
    [ "$rec" = 1 ] && extra=(--enable-recovery)
    CFT_FAULT="$point:$how" CFT_DIST_TIMEOUT=$deadline timeout 60 \
        "$mpirun" -np 2 "${flags[@]}" "${extra[@]}" "$bin" "$w" "$ab" "$ck" >"$out" 2>"$err"
    local rc=$? tend
    tend=$(date +%s.%N)
    local tf msg ended verdict=ok why=""
    tf=$(sed -n 's/.*cft: CFT_FAULT: .* at \([0-9.]*\)$/\1/p' "$err" | head -1)
    msg=$(sed -n "s/^FM $w rank 0: step [0-9]*: \(.*\)$/\1/p" "$out" | head -1)
    ended=$(sed -n "s/^FM $w rank 0: ended at \([0-9.]*\)$/\1/p" "$out" | head -1)
    if [ -z "$msg" ]; then # the job aborted: the engine's line, then mpirun's end
        msg=$(sed -n 's/^cft_dist: rank 0: \(.*\)$/\1/p' "$err" | head -1)
        ended=$tend
        [ -n "$msg" ] && ! grep -q "aborting the job" "$err" && why="no abort line"
    fi
    if [ "$rec" = 0 ] && [ -z "$msg" ] && grep -q "exited on signal 9" "$err"; then
        msg="(mpirun) $(grep -o 'process rank [0-9]* with PID [0-9]* on node [^ ]* exited on signal 9' "$err" | head -1)"
        ended=$tend
    fi
    local took=-1
    [ -n "$tf" ] && [ -n "$ended" ] && took=$(awk -v a="$ended" -v b="$tf" 'BEGIN{printf "%.2f", a-b}')
    if [ -z "$tf" ]; then why="the fault did not happen"
    elif [ "$rc" = 124 ]; then why="hung (timeout 60)"
    elif [ -z "$msg" ]; then why="no error on rank 0"
    elif ! grep -Eq 'cft_[a-z_]+|process rank' <<<"$msg"; then why="the error names no call"
    elif ! grep -Eq "rank [0-9]|worker '[^']*' \([0-9]+\)" <<<"$msg"; then why="the error names no rank"
    elif awk -v t="$took" -v d=$deadline 'BEGIN{exit !(t < 0 || t > d + 2)}'; then
        why="ended $took s after the fault (> $deadline + 2 s)"
    fi
    if [ -z "$why" ] && [ "$w" = checkpoint ]; then
        "$bin" verify "$ck" >>"$out" 2>&1 || why="the previous checkpoint does not load"
    fi
    [ -n "$why" ] && verdict=FAIL
    if [ "$verdict" = ok ]; then pass=$((pass + 1)); else fail=$((fail + 1)); fi
    printf '%-11s %-22s %-5s %-8s %-7s %-7s %s\n' "$w" "$point" "$how" "$ab" "${took}s" \
        "$verdict" "${why:+[$why] }${msg:0:150}"
    if [ "$verdict" != ok ]; then
        sed 's/^/    out: /' "$out" | tail -8
        sed 's/^/    err: /' "$err" | tail -12
    fi
    rm -rf "$ck" "$ck.partial"
}
for c in "${cases[@]}"; do
    read -r w point <<<"$c"
    [ -n "${FM_ONLY:-}" ] && [ "$w" != "$FM_ONLY" ] && continue # one workload (by hand)
    for how in kill stop; do
        for ab in noabort abort; do
            rec=0
            [ "$how" = kill ] && rec=1
            run_case "$w" "$point" "$how" "$ab" "$rec"
        done
    done
done
# without --enable-recovery, mpirun itself ends the job when a rank is killed
[ -z "${FM_ONLY:-}" ] && run_case ddp "*:6" kill noabort 0
echo "fault matrix: $pass passed, $fail failed (deadline $deadline s)"
[ "$fail" = 0 ]
