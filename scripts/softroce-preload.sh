# The preload stage of the Soft-RoCE test: unmodified Debian RDMA tools (perftest, rdmacm-utils,
# ibverbs-utils) run in the one-guest stage under LD_PRELOAD=libbraid_preload.so (BRAID_MIDDLEWARE
# raw). Each pair is judged by its exit codes, the tool's own byte checks where it has them
# (rping -V, ibv_*_pingpong -c) and the preload's counters (BRAID_PRELOAD_STATS), which prove the
# data path went through braid.
#
# Sourced by scripts/softroce-test.sh once the initramfs ($IR) is filled, with its ROOT, IR,
# PROFILE, log and copy_with_libs. It installs /bin/extra-tests, which the guest runs last.
# Env: SOFTROCE_PRELOAD=0 skips it; SOFTROCE_PRELOAD_PROFILE=release builds the library optimised
# (default: BRAID_PROFILE's profile), for the overhead lines.
if [ "${SOFTROCE_PRELOAD:-1}" = 1 ]; then
    pmissing=""
    for p in rdmacm-utils ibverbs-utils; do dpkg -s "$p" >/dev/null 2>&1 || pmissing="$pmissing $p"; done
    if [ -n "$pmissing" ]; then
        PSUDO=""; [ "$(id -u)" = 0 ] || PSUDO="sudo"
        log "installing$pmissing"
        DEBIAN_FRONTEND=noninteractive $PSUDO apt-get install -y -qq --no-install-recommends $pmissing >/dev/null
    fi
    PPROFILE=${SOFTROCE_PRELOAD_PROFILE:-$PROFILE}
    log "building libbraid_preload.so and braid-preload-run (profile $PPROFILE)"
    CARGO_INCREMENTAL=0 cargo build -q --profile "$PPROFILE" -p braid-preload
    PTD=${CARGO_TARGET_DIR:-$ROOT/target}
    case $PPROFILE in dev) PDIR=$PTD/debug ;; *) PDIR=$PTD/$PPROFILE ;; esac
    copy_with_libs "$PDIR/libbraid_preload.so" lib/libbraid_preload.so
    copy_with_libs "$PDIR/braid-preload-run" bin/braid-preload-run
    strip --strip-debug "$IR/lib/libbraid_preload.so" "$IR/bin/braid-preload-run"
    for b in ib_read_bw rping ibv_rc_pingpong ibv_srq_pingpong; do copy_with_libs "$(command -v $b)" bin/$b; done
    cat > "$IR/bin/extra-tests" <<'GUEST'
#!/bin/sh
# Guest side of scripts/softroce-preload.sh (client and server both on rxe0, 10.0.0.1).
P=/lib/libbraid_preload.so
rc=0
t0=$(date +%s)
counter() { v=$(sed -n "s/.*\"$2\":\([0-9]*\).*/\1/p" "$1" 2>/dev/null); echo "${v:-0}"; }
# at_least NAME SIDE(c/s) KEY MIN ; exactly NAME SIDE KEY VALUE
at_least() {
    v=$(counter /tmp/p$2.json $3)
    if [ "$v" -ge "$4" ]; then echo "guest: preload $1: $2 $3 = $v (>= $4)"; else echo "guest: preload $1: $2 $3 = $v, expected >= $4"; rc=1; fi
}
exactly() {
    v=$(counter /tmp/p$2.json $3)
    if [ "$v" = "$4" ]; then echo "guest: preload $1: $2 $3 = $v"; else echo "guest: preload $1: $2 $3 = $v, expected $4"; rc=1; fi
}
under() { # STATS-FILE CMD... : CMD under the preload, its counters to STATS-FILE
    f=$1; shift
    ( export LD_PRELOAD=$P BRAID_PRELOAD_STATS=$f; exec timeout 120 "$@" )
}
ppair() { # NAME SERVER-CMD... -- CLIENT-CMD...
    name=$1; shift; srv=""; while [ "$1" != "--" ]; do srv="$srv $1"; shift; done; shift
    echo "=== preload: $name"
    rm -f /tmp/pc.json /tmp/ps.json
    under /tmp/ps.json $srv > /tmp/psrv.txt 2>&1 & sp=$!
    sleep 2
    under /tmp/pc.json "$@" > /tmp/pcli.txt 2>&1; cr=$?
    wait $sp; sr=$?
    grep -E "^ *[0-9]+ +[0-9]+ |bytes in|iters in|Mbit/sec|mismatch|refused|braid-preload" /tmp/pcli.txt | head -6
    for s in c:$cr:/tmp/pcli.txt s:$sr:/tmp/psrv.txt; do
        side=${s%%:*}; r=${s#*:}; r=${r%%:*}; out=${s##*:}
        if [ "$r" != 0 ]; then
            # perftest's r^2 clock check under TCG sometimes refuses to report; that alone is
            # noted (the counters below still judge the data path).
            if grep -q "Can't produce a report" "$out"; then echo "guest: preload $name: $side: perftest refused its report (TCG clock), not counted"
            else echo "guest: preload $name: $side exit $r"; cat "$out"; rc=1; fi
        fi
    done
    grep -q -i "mismatch" /tmp/pcli.txt /tmp/psrv.txt && { echo "guest: preload $name: data mismatch"; rc=1; }
    [ -f /tmp/pc.json ] || { echo "guest: preload $name: no client counters (preload not loaded?)"; rc=1; }
    echo "guest: preload $name: client $(cat /tmp/pc.json 2>/dev/null)"
    echo "guest: preload $name: server $(cat /tmp/ps.json 2>/dev/null)"
}
S=10.0.0.1
ppair "ib_write_bw" ib_write_bw -d rxe0 -x 1 -s 65536 -n 300 --report_gbits -- ib_write_bw -d rxe0 -x 1 -s 65536 -n 300 --report_gbits $S
at_least ib_write_bw c send_wrs_braid 300; exactly ib_write_bw c send_wrs_passthrough 0; at_least ib_write_bw c cqes_braid 1
ppair "ib_write_lat" ib_write_lat -d rxe0 -x 1 -s 64 -n 300 -- ib_write_lat -d rxe0 -x 1 -s 64 -n 300 $S
at_least ib_write_lat c send_wrs_braid 300; at_least ib_write_lat s send_wrs_braid 300
ppair "ib_read_bw" ib_read_bw -d rxe0 -x 1 -s 65536 -n 300 --report_gbits -- ib_read_bw -d rxe0 -x 1 -s 65536 -n 300 --report_gbits $S
at_least ib_read_bw c send_wrs_braid 300; exactly ib_read_bw c send_wrs_passthrough 0
ppair "ib_send_bw" ib_send_bw -d rxe0 -x 1 -s 4096 -n 300 --report_gbits -- ib_send_bw -d rxe0 -x 1 -s 4096 -n 300 --report_gbits $S
at_least ib_send_bw c send_wrs_braid 300; at_least ib_send_bw s recv_wrs_braid 300; at_least ib_send_bw s cqes_braid 300
ppair "rping -V" rping -s -a $S -V -S 50000 -C 20 -- rping -c -a $S -V -S 50000 -C 20
# The server READs the client's buffer and WRITEs it back each round; both sleep on channels.
at_least rping s send_wrs_braid 40; at_least rping c cqes_braid 20; at_least rping c req_notify_braid 20; at_least rping c cq_events 20
ppair "ibv_rc_pingpong -c" ibv_rc_pingpong -d rxe0 -g 1 -n 200 -c -p 18601 -- ibv_rc_pingpong -d rxe0 -g 1 -n 200 -c -p 18601 $S
at_least rc_pingpong c send_wrs_braid 200; at_least rc_pingpong c recv_wrs_braid 200; at_least rc_pingpong s cqes_braid 400
ppair "ibv_rc_pingpong -c -e" ibv_rc_pingpong -d rxe0 -g 1 -n 200 -c -e -p 18603 -- ibv_rc_pingpong -d rxe0 -g 1 -n 200 -c -e -p 18603 $S
at_least "rc_pingpong -e" c req_notify_braid 100; at_least "rc_pingpong -e" c cq_events 100
ppair "ibv_rc_pingpong -c -N" ibv_rc_pingpong -d rxe0 -g 1 -n 200 -c -N -p 18605 -- ibv_rc_pingpong -d rxe0 -g 1 -n 200 -c -N -p 18605 $S
# The extended work-request API is refused per QP (one line), the app runs unchanged; its
# completions still go through braid.
exactly "rc_pingpong -N" c qps_refused_ext_api 1; exactly "rc_pingpong -N" c send_wrs_braid 0; at_least "rc_pingpong -N" c cqes_braid 400
grep -q "braid-preload: QP .* extended work-request API" /tmp/pcli.txt || { echo "guest: preload rc_pingpong -N: no refusal line"; rc=1; }
ppair "ibv_srq_pingpong -c" ibv_srq_pingpong -d rxe0 -g 1 -n 50 -q 4 -c -p 18607 -- ibv_srq_pingpong -d rxe0 -g 1 -n 50 -q 4 -c -p 18607 $S
at_least srq_pingpong c send_wrs_braid 50; at_least srq_pingpong c srq_recv_wrs_passthrough 50; at_least srq_pingpong c cqes_braid 100
# A bad BRAID_MIDDLEWARE: one line, exit code 2, before the application runs.
( export LD_PRELOAD=$P BRAID_MIDDLEWARE=nope; exec ibv_rc_pingpong -d rxe0 ) > /tmp/bad.txt 2>&1; r=$?
if [ $r = 2 ] && [ "$(wc -l < /tmp/bad.txt)" = 1 ] && grep -q "BRAID_MIDDLEWARE=nope" /tmp/bad.txt; then echo "guest: preload bad BRAID_MIDDLEWARE: exit 2, $(cat /tmp/bad.txt)"
else echo "guest: preload bad BRAID_MIDDLEWARE: exit $r: $(cat /tmp/bad.txt)"; rc=1; fi
# A statically linked program cannot be reached by LD_PRELOAD: the launcher says so, runs it.
braid-preload-run /bin/busybox true > /tmp/st.txt 2>&1; r=$?
if [ $r = 0 ] && grep -q "statically linked" /tmp/st.txt; then echo "guest: preload static binary: $(cat /tmp/st.txt)"
else echo "guest: preload static binary: exit $r: $(cat /tmp/st.txt)"; rc=1; fi
# Overhead (informational: one TCG guest, numbers move with the host's load): ib_write_lat 2 B
# and ib_write_bw 64 B message rate, without and with the preload.
for pre in none preload; do
    for t in "ib_write_lat -s 2 -n 1000" "ib_write_bw -s 64 -n 5000"; do
        if [ $pre = none ]; then
            $t -d rxe0 -x 1 > /tmp/osrv.txt 2>&1 & sp=$!; sleep 2; $t -d rxe0 -x 1 $S > /tmp/ocli.txt 2>&1; wait $sp
        else
            under /tmp/os.json $t -d rxe0 -x 1 > /tmp/osrv.txt 2>&1 & sp=$!; sleep 2; under /tmp/oc.json $t -d rxe0 -x 1 $S > /tmp/ocli.txt 2>&1; wait $sp
        fi
        l=$(grep -E '^ *[0-9]+ +[0-9]+ ' /tmp/ocli.txt | tail -1)
        [ -n "$l" ] || l="no result: $(grep -v '^ *$' /tmp/ocli.txt | tail -n 1)"
        echo "guest: overhead $pre $t: $l"
    done
done
echo "guest: preload stage $(( $(date +%s) - t0 )) s, $( [ $rc = 0 ] && echo passed || echo FAILED )"
exit $rc
GUEST
    chmod +x "$IR/bin/extra-tests"
fi
