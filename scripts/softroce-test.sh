#!/usr/bin/env bash
# Real-NIC tests on Soft-RoCE: boots a Debian kernel in a QEMU guest (TCG, no KVM needed), loads
# rdma_rxe, creates rxe0/rxe1 on a veth pair, and runs inside it the verbs conformance suite
# (braid-conformance), braid-perftest against the real ib_write_bw, and ib_write_bw itself.
# The binaries are built on the host and copied into the guest's initramfs with their libraries.
#
# Usage: scripts/softroce-test.sh            (exit code = the guest's result: 0 all passed)
# Env:   SOFTROCE_DIR   work directory (default target/softroce)
#        SOFTROCE_TIMEOUT  seconds before the guest is killed (default 480)
#        BRAID_PROFILE  cargo profile of the braid binaries (default dev)
#        CARGO_TARGET_DIR  where cargo builds them (default target/), honoured as cargo does
#        SOFTROCE_QUICK=1 (conformance only, one guest), SOFTROCE_TWO_GUESTS=0 (skip the
#        two-guest stage), SOFTROCE_TWO_ONLY=1 (only the two-guest stage)
# Needs root (or sudo) for apt-get the first time; everything comes from Debian's archive.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
WORK=${SOFTROCE_DIR:-$ROOT/target/softroce}
TIMEOUT=${SOFTROCE_TIMEOUT:-480}
PROFILE=${BRAID_PROFILE:-dev}
t0=$(date +%s)
log() { echo "softroce: $*" >&2; }

# 1. Packages (qemu, rdma-core, perftest; clang/libclang-dev/cmake to build the binding).
PKGS="qemu-system-x86 rdma-core ibverbs-providers libibverbs-dev perftest clang libclang-dev cmake iproute2 busybox-static kmod cpio xz-utils"
missing=""
for p in $PKGS; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
    log "installing$missing"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi

# 2. The guest kernel: Debian's linux-image package, unpacked (not installed).
mkdir -p "$WORK"
KPKG=$(apt-cache depends linux-image-amd64 | sed -n 's/.*Depends: \(linux-image-[0-9].*-amd64\)$/\1/p' | head -1)
[ -n "$KPKG" ] || { log "cannot find the kernel package behind linux-image-amd64"; exit 2; }
KVER=${KPKG#linux-image-}
KROOT=$WORK/kernel-$KVER
if [ ! -f "$KROOT/boot/vmlinuz-$KVER" ]; then
    log "fetching $KPKG"
    rm -rf "$KROOT" && mkdir -p "$KROOT"
    (cd "$WORK" && rm -f linux-image-*.deb && apt-get download -qq "$KPKG")
    dpkg -x "$WORK"/"$KPKG"_*.deb "$KROOT"
    rm -f "$WORK"/"$KPKG"_*.deb
    depmod -b "$KROOT" "$KVER"
fi

# 3. The binaries under test.
log "building braid-conformance and braid-perftest (profile $PROFILE)"
CARGO_INCREMENTAL=0 cargo build -q --profile "$PROFILE" -p braid-rdma --features rdma --bins
# Where cargo put them: CARGO_TARGET_DIR (relative to the workspace, as cargo reads it) or target/.
TBASE=${CARGO_TARGET_DIR:-target}
case $TBASE in /*) ;; *) TBASE=$ROOT/$TBASE ;; esac
case $PROFILE in dev) TDIR=$TBASE/debug ;; *) TDIR=$TBASE/$PROFILE ;; esac

# 4. The initramfs: busybox, iproute2's ip and rdma, kmod's modules, rdma-core, perftest, ours.
IR=$WORK/initramfs
rm -rf "$IR" && mkdir -p "$IR"/{bin,sbin,etc,proc,sys,dev,tmp,lib,lib64,usr/lib/x86_64-linux-gnu,modules}
cp /bin/busybox "$IR/bin/busybox"
for a in sh mount mkdir cat echo sleep dd grep ls printf head tail date seq true false awk sed tr cut wc ln timeout ping dmesg; do ln -sf busybox "$IR/bin/$a"; done
copy_with_libs() {
    local f=$1 dest=$2
    cp -L "$f" "$IR/$dest"
    ldd "$f" 2>/dev/null | grep -o '/[^ ]*' | while read -r l; do
        [ -e "$IR$l" ] || { mkdir -p "$IR$(dirname "$l")"; cp -L "$l" "$IR$l"; }
    done
}
# busybox sh prefers its own applets: iproute2's ip (veth) and kmod's insmod go by full path.
copy_with_libs "$(command -v ip)" sbin/ip
copy_with_libs "$(command -v rdma)" bin/rdma
copy_with_libs "$(command -v tc)" sbin/tc
copy_with_libs "$(command -v kmod)" bin/kmod
ln -sf ../bin/kmod "$IR/sbin/insmod"
copy_with_libs "$(command -v ib_write_bw)" bin/ib_write_bw
copy_with_libs "$(command -v ib_write_lat)" bin/ib_write_lat
copy_with_libs "$(command -v ib_read_lat)" bin/ib_read_lat
copy_with_libs "$(command -v ib_send_bw)" bin/ib_send_bw
copy_with_libs "$(command -v ib_send_lat)" bin/ib_send_lat
copy_with_libs "$TDIR/braid-conformance" bin/braid-conformance
copy_with_libs "$TDIR/braid-perftest" bin/braid-perftest
strip --strip-debug "$IR/bin/braid-conformance" "$IR/bin/braid-perftest"
ML=/usr/lib/x86_64-linux-gnu
copy_with_libs "$ML/libibverbs.so.1" usr/lib/x86_64-linux-gnu/libibverbs.so.1
copy_with_libs "$ML/librdmacm.so.1" usr/lib/x86_64-linux-gnu/librdmacm.so.1
mkdir -p "$IR$ML/libibverbs" "$IR/etc/libibverbs.d"
copy_with_libs "$ML/libibverbs/librxe-rdmav34.so" usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so
cp /etc/libibverbs.d/rxe.driver "$IR/etc/libibverbs.d/"
cp -L "$(gcc -print-file-name=libgcc_s.so.1 2>/dev/null || echo /lib/x86_64-linux-gnu/libgcc_s.so.1)" "$IR/lib/" 2>/dev/null || cp -L /lib/x86_64-linux-gnu/libgcc_s.so.1 "$IR/lib/"
# Kernel modules in dependency order.
: > "$IR/modules/order"
for m in crc32_generic configfs veth virtio_pci virtio_net ib_uverbs rdma_ucm rdma_rxe sch_netem; do
    modprobe -d "$KROOT" -S "$KVER" --show-depends "$m" 2>/dev/null | awk '$1=="insmod"{print $2}' | while read -r ko; do
        b=$(basename "$ko")
        grep -qx "$b" "$IR/modules/order" || { cp "$ko" "$IR/modules/$b"; echo "$b" >> "$IR/modules/order"; }
    done
done
cat > "$IR/init" <<'INIT'
#!/bin/sh
export PATH=/bin LD_LIBRARY_PATH=/lib:/usr/lib/x86_64-linux-gnu
[ -f /quick ] && SOFTROCE_QUICK=1
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
for m in $(cat /modules/order); do /sbin/insmod /modules/$m || echo "guest: insmod $m failed"; done
mount -t configfs none /sys/kernel/config 2>/dev/null
/sbin/ip link set lo up
exit_with() { # isa-debug-exit: QEMU exits with (value << 1) | 1.
    echo "=== guest result: $1"
    printf "\\$(printf %o $1)" | dd of=/dev/port bs=1 seek=244 count=1 2>/dev/null
    sleep 5
}
# Whatever ends this shell (a fatal error in an arithmetic expansion ends busybox sh) reports a
# failure instead of killing init, which panics the guest and loses the tests after it.
trap 'exit_with 1' EXIT
role=$(sed -n 's/.*braid_role=\([a-z]*\).*/\1/p' /proc/cmdline)
if [ -n "$role" ]; then
    # Two guests joined by two socket-backed links: a real two-path network. Each guest is a
    # host whose NIC (rxe0 on the veth r0, addresses 10.0.1.H and 10.0.2.H) sits behind a small
    # router (network namespace rt: r1, eth0 = link 1, eth1 = link 2). The router picks the link
    # by address: 10.0.2.x traffic (from or to) takes link 2, the rest link 1, so the GID index a
    # QP sends from chooses its path (rxe derives the UDP source port from the QP number: there
    # is no ECMP to steer).
    if [ "$role" = server ]; then h=1; p=2; else h=2; p=1; fi
    mkdir -p /run /var; ln -s /run /var/run; mount -t tmpfs run /run
    /sbin/ip netns add rt
    R="/sbin/ip -n rt"
    /sbin/ip link add r0 address 02:00:00:00:0$h:01 type veth peer name r1 address 02:00:00:00:0$h:02
    /sbin/ip link set r1 netns rt; /sbin/ip link set eth0 netns rt; /sbin/ip link set eth1 netns rt
    /sbin/ip addr add 10.0.1.$h/32 dev r0; /sbin/ip addr add 10.0.2.$h/32 dev r0
    /sbin/ip link set r0 up
    /sbin/ip route add default dev r0
    for a in 10.0.1.$p 10.0.2.$p; do /sbin/ip neigh add $a lladdr 02:00:00:00:0$h:02 dev r0 nud permanent; done
    for d in lo r1 eth0 eth1; do $R link set $d up; done
    $R addr add 172.16.1.$h/24 dev eth0; $R addr add 172.16.2.$h/24 dev eth1
    for a in 10.0.1.$h 10.0.2.$h; do $R route add $a/32 dev r1; $R neigh add $a lladdr 02:00:00:00:0$h:01 dev r1 nud permanent; done
    $R route add 10.0.1.$p/32 via 172.16.1.$p dev eth0
    $R route add 10.0.2.$p/32 via 172.16.2.$p dev eth1
    $R route add 10.0.1.$p/32 via 172.16.2.$p dev eth1 table 2
    $R rule add pref 100 from 10.0.2.$h lookup 2
    /sbin/ip netns exec rt /bin/sh -c 'echo 1 > /proc/sys/net/ipv4/ip_forward'
    rdma link add rxe0 type rxe netdev r0
    sleep 1
    gid1=""
    for i in 0 1 2 3; do
        g=$(cat /sys/class/infiniband/rxe0/ports/1/gids/$i 2>/dev/null)
        echo "guest $role: rxe0 gid $i $g"
        [ "$g" = "0000:0000:0000:0000:0000:ffff:0a00:010$h" ] && gid1=$i
    done
    echo "guest $role: $(rdma link show | tr '\n' ' ') (GID index of 10.0.1.$h: $gid1)"
    # rxe's own counters that are not zero (retries, sequence errors, duplicates: what the
    # responder and requester saw when a run failed).
    rxe_counters() { (cd /sys/class/infiniband/rxe0/ports/1/hw_counters 2>/dev/null && for f in *; do v=$(cat $f); [ "$v" = 0 ] || printf '%s=%s ' $f $v; done); }
    # Bytes sent on each link (the router's eth0 and eth1).
    link_tx() { /sbin/ip netns exec rt cat /proc/net/dev | tr ':' ' ' | awk -v d=$1 '$1==d {print $10}'; }
    tests=$(cat /two-tests 2>/dev/null || echo "perftest partition agents")
    rc=0
    srv=10.0.1.1
    if [ "$role" = client ]; then
        # The guests boot independently: wait until the server's host answers on both paths.
        for a in 10.0.1.2 10.0.2.2; do
            n=0; until ping -c 1 -W 1 -I $a $srv > /dev/null 2>&1; do n=$((n + 1)); [ $n -ge 90 ] && break; done
            echo "guest: $a reaches $srv after $n failed pings"
        done
    fi
    # Each test pair has its own TCP port (and the next one, for the agents' board), so a side
    # that runs ahead can never meet the other side's previous test.
    port=18515
    run() { # NAME BRAID?(0/1) CMD... : server runs CMD, client CMD + server address
        name=$1; counted=$2; shift 2
        port=$((port + 2))
        if [ "$role" = server ]; then
            echo "=== $name (server)"
            timeout 240 "$@" -p $port > /tmp/out.txt 2>&1 || { cat /tmp/out.txt; echo "guest: $name server failed"; dmesg | tail -n 20; [ $counted = 1 ] && rc=1; }
        else
            sleep 2
            echo "=== $name (client, two guests)"
            # braid-perftest retries its connection; perftest's tools do not: retry them here.
            for try in 1 2 3 4 5 6 7 8 9 10; do
                timeout 240 "$@" -p $port $srv > /tmp/out.txt 2>&1; r=$?
                [ $r != 0 ] && grep -q "Couldn't connect" /tmp/out.txt && { sleep 2; continue; }
                break
            done
            cat /tmp/out.txt
            [ $r = 0 ] || { echo "guest: $name client failed (exit $r)"; dmesg | tail -n 20; echo "guest: rxe0 counters: $(rxe_counters)"; [ $counted = 1 ] && rc=1; }
        fi
    }
    for s in $(echo "$tests" | grep -q perftest && echo 4096 65536); do
        # ib_write_bw is the reference: its failures (TCG clock check) are noted, not counted.
        run "ib_write_bw -s $s" 0 ib_write_bw -d rxe0 -x $gid1 -s $s -n 500 --report_gbits
        run "braid-perftest write_bw -s $s" 1 braid-perftest write_bw -d rxe0 -x $gid1 -s $s -n 500 --report_gbits
    done
    # Data partition over both real paths: two member QPs, one per address (so one per link).
    # Dynamic assignment, then the same with 5% loss on link 2 (netem on the client's router,
    # the data's direction), then static assignment under the same loss as the control.
    part() { # NAME ASSIGN
        a0=$(link_tx eth0); a1=$(link_tx eth1)
        run "$1" 1 braid-perftest write_bw -d rxe0 -x $gid1 -s 65536 -n 400 -t 16 --verify --json --middleware partition:qps=2:assign=$2:chunk=16384:window=65536
        if [ "$role" = client ]; then
            b0=$(( $(link_tx eth0) - a0 )); b1=$(( $(link_tx eth1) - a1 ))
            q0=$(sed -n 's/.*"1\.partition\.chunks_q0":\([0-9.]*\).*/\1/p' /tmp/out.txt | cut -d. -f1)
            q1=$(sed -n 's/.*"1\.partition\.chunks_q1":\([0-9.]*\).*/\1/p' /tmp/out.txt | cut -d. -f1)
            echo "guest: $1: link 1 sent $b0 B, link 2 sent $b1 B; chunks on member 0 (link 1) $q0, member 1 (link 2) $q1"
            grep -q '"verified":true' /tmp/out.txt || { echo "guest: $1: not byte-exact"; rc=1; }
            echo "$b0 $b1 ${q0:-0} ${q1:-0}" > /tmp/part-$2-$3
        fi
    }
    echo "$tests" | grep -q partition && {
    part "partition over two links" dynamic clean
    if [ "$role" = client ]; then
        b=$(cat /tmp/part-dynamic-clean)
        set -- $b
        # Both links carried a real share (each > 20% of what the two sent).
        if [ $(( $1 * 5 )) -le $(( $1 + $2 )) ] || [ $(( $2 * 5 )) -le $(( $1 + $2 )) ] || [ "$3" = 0 ] || [ "$4" = 0 ]; then
            echo "guest: partition did not use both links ($b)"; rc=1
        fi
        /sbin/ip netns exec rt /sbin/tc qdisc add dev eth1 root netem loss 5%
        echo "guest: netem loss 5% on link 2 (client's eth1)"
    fi
    part "partition, 5% loss on link 2" dynamic lossy
    part "partition static (control), 5% loss on link 2" static lossy
    if [ "$role" = client ]; then
        set -- $(cat /tmp/part-dynamic-clean); c2=$4; c1=$3
        set -- $(cat /tmp/part-dynamic-lossy); l2=$4; l1=$3
        if [ $((c1 + c2)) -eq 0 ] || [ $((l1 + l2)) -eq 0 ]; then
            # A run that failed reported no chunks (its failure is counted above).
            echo "guest: partition: no chunk counts (clean $c1/$c2, lossy $l1/$l2): the lossy-link check cannot run"; rc=1
        else
            echo "guest: share of chunks on link 2: clean $(( 100 * c2 / (c1 + c2) ))%, lossy $(( 100 * l2 / (l1 + l2) ))%"
            # Dynamic assignment moves chunks off the lossy path: its share falls below 2/3 of
            # its clean share.
            if [ $(( 3 * l2 * (c1 + c2) )) -ge $(( 2 * c2 * (l1 + l2) )) ]; then
                echo "guest: partition did not move traffic off the lossy link"; rc=1
            fi
        fi
        /sbin/ip netns exec rt /sbin/tc qdisc del dev eth1 root
    fi
    }
    # A host agent across two real hosts: Justitia's pacers meet on the TCP board and connect.
    echo "$tests" | grep -q agents && run "braid-perftest write_bw --middleware justitia (agents across hosts)" 1 braid-perftest write_bw -d rxe0 -x $gid1 -s 65536 -n 200 --json --middleware justitia:board_patience=20s
    if [ "$role" = client ] && echo "$tests" | grep -q agents; then
        grep -q '"0\.justitia[a-z_]*\.links_ready":1' /tmp/out.txt || { echo "guest: the Justitia agents did not connect across the hosts"; rc=1; }
    fi
    echo "guest $role: rxe0 counters at the end: $(rxe_counters)"
    exit_with $rc
fi
/sbin/ip link add veth0 type veth peer name veth1
/sbin/ip addr add 10.0.0.1/24 dev veth0; /sbin/ip addr add 10.0.0.2/24 dev veth1
/sbin/ip link set veth0 up; /sbin/ip link set veth1 up
rdma link add rxe0 type rxe netdev veth0
rdma link add rxe1 type rxe netdev veth1
sleep 1
echo "guest: $(rdma link show | tr '\n' ' ')"
rc=0
for i in 0 1; do echo "guest: rxe0 gid $i $(cat /sys/class/infiniband/rxe0/ports/1/gids/$i) $(cat /sys/class/infiniband/rxe0/ports/1/gid_attrs/types/$i 2>/dev/null)"; done
echo "=== braid-conformance -d rxe0"
braid-conformance -d rxe0 || rc=1
for m in raw justitia; do
    echo "=== braid-conformance -d rxe0 --middleware $m"
    braid-conformance -d rxe0 --middleware $m || rc=1
done
echo "=== braid-conformance -d rxe0 --busy-poll"
braid-conformance -d rxe0 --busy-poll || rc=1
for m in $(cat /mechanisms 2>/dev/null); do
    echo "=== braid-conformance -d rxe0 --middleware $m (informational)"
    braid-conformance -d rxe0 --middleware $m
done
[ -n "$SOFTROCE_QUICK" ] && exit_with $rc
# perftest's ib_write_bw and braid-perftest, same sizes and QPs, client and server on rxe0 (one
# guest: rxe1 cannot reach rxe0's address, which is local to the guest).
pair() { # NAME SERVER-CMD... -- CLIENT-CMD...
    name=$1; shift; srv=""; while [ "$1" != "--" ]; do srv="$srv $1"; shift; done; shift
    echo "=== $name"
    $srv > /tmp/srv.txt 2>&1 & sp=$!
    sleep 2
    # perftest's own tools are the reference: under TCG their clock check (r^2 of the cycle
    # counter) sometimes refuses to report; that is noted, not counted.
    case $name in ib_*) bad=0 ;; *) bad=1 ;; esac
    "$@" || { echo "guest: $name client failed"; [ $bad = 1 ] && rc=1; }
    wait $sp || { echo "guest: $name server failed"; cat /tmp/srv.txt; [ $bad = 1 ] && rc=1; }
}
for s in 4096 65536; do
    pair "ib_write_bw -s $s" ib_write_bw -d rxe0 -x 1 -s $s -n 500 -q 1 --report_gbits -- ib_write_bw -d rxe0 -x 1 -s $s -n 500 -q 1 --report_gbits 10.0.0.1
    pair "braid-perftest write_bw -s $s" braid-perftest write_bw -d rxe0 -x 1 -s $s -n 500 -q 1 --report_gbits -- braid-perftest write_bw -d rxe0 -x 1 -s $s -n 500 -q 1 --report_gbits 10.0.0.1
done
pair "braid-perftest write_bw --middleware raw --json" braid-perftest write_bw -d rxe0 -x 1 -s 65536 -n 200 -q 2 --middleware raw -- braid-perftest write_bw -d rxe0 -x 1 -s 65536 -n 200 -q 2 --middleware raw --json 10.0.0.1
pair "braid-perftest send_bw" braid-perftest send_bw -d rxe0 -x 1 -s 4096 -n 300 -- braid-perftest send_bw -d rxe0 -x 1 -s 4096 -n 300 --report_gbits 10.0.0.1
pair "braid-perftest read_bw" braid-perftest read_bw -d rxe0 -x 1 -s 65536 -n 200 -- braid-perftest read_bw -d rxe0 -x 1 -s 65536 -n 200 --report_gbits 10.0.0.1
pair "ib_write_lat" ib_write_lat -d rxe0 -x 1 -s 64 -n 300 -- ib_write_lat -d rxe0 -x 1 -s 64 -n 300 10.0.0.1
pair "braid-perftest write_lat" braid-perftest write_lat -d rxe0 -x 1 -s 64 -n 300 -- braid-perftest write_lat -d rxe0 -x 1 -s 64 -n 300 10.0.0.1
pair "braid-perftest write_lat --busy-poll" braid-perftest write_lat -d rxe0 -x 1 -s 64 -n 300 --busy-poll -- braid-perftest write_lat -d rxe0 -x 1 -s 64 -n 300 --busy-poll 10.0.0.1
# read_lat (perftest reports the whole round trip of a READ) and UC, beside perftest's own.
pair "ib_read_lat" ib_read_lat -d rxe0 -x 1 -s 64 -n 300 -- ib_read_lat -d rxe0 -x 1 -s 64 -n 300 10.0.0.1
pair "braid-perftest read_lat --busy-poll" braid-perftest read_lat -d rxe0 -x 1 -s 64 -n 300 --busy-poll -- braid-perftest read_lat -d rxe0 -x 1 -s 64 -n 300 --busy-poll 10.0.0.1
pair "ib_write_bw -c UC" ib_write_bw -d rxe0 -x 1 -c UC -s 65536 -n 300 --report_gbits -- ib_write_bw -d rxe0 -x 1 -c UC -s 65536 -n 300 --report_gbits 10.0.0.1
pair "braid-perftest write_bw -c UC --verify" braid-perftest write_bw -d rxe0 -x 1 -c UC -s 65536 -n 300 --verify -- braid-perftest write_bw -d rxe0 -x 1 -c UC -s 65536 -n 300 --verify --report_gbits 10.0.0.1
pair "ib_send_bw -c UD" ib_send_bw -d rxe0 -x 1 -c UD -s 1024 -n 300 --report_gbits -- ib_send_bw -d rxe0 -x 1 -c UD -s 1024 -n 300 --report_gbits 10.0.0.1
pair "braid-perftest send_bw -c UD" braid-perftest send_bw -d rxe0 -x 1 -c UD -s 1024 -n 300 -- braid-perftest send_bw -d rxe0 -x 1 -c UD -s 1024 -n 300 --report_gbits 10.0.0.1
pair "braid-perftest write_bw -s 65536 --busy-poll" braid-perftest write_bw -d rxe0 -x 1 -s 65536 -n 500 --busy-poll -- braid-perftest write_bw -d rxe0 -x 1 -s 65536 -n 500 --busy-poll --report_gbits 10.0.0.1
# send_lat (a ping-pong of SENDs; half the round trip), RC and UD, beside perftest's own.
pair "ib_send_lat" ib_send_lat -d rxe0 -x 1 -s 64 -n 300 -- ib_send_lat -d rxe0 -x 1 -s 64 -n 300 10.0.0.1
pair "braid-perftest send_lat" braid-perftest send_lat -d rxe0 -x 1 -s 64 -n 300 -- braid-perftest send_lat -d rxe0 -x 1 -s 64 -n 300 10.0.0.1
pair "braid-perftest send_lat --busy-poll" braid-perftest send_lat -d rxe0 -x 1 -s 64 -n 300 --busy-poll -- braid-perftest send_lat -d rxe0 -x 1 -s 64 -n 300 --busy-poll 10.0.0.1
pair "ib_send_lat -c UD" ib_send_lat -d rxe0 -x 1 -c UD -s 64 -n 300 -- ib_send_lat -d rxe0 -x 1 -c UD -s 64 -n 300 10.0.0.1
pair "braid-perftest send_lat -c UD" braid-perftest send_lat -d rxe0 -x 1 -c UD -s 64 -n 300 -- braid-perftest send_lat -d rxe0 -x 1 -c UD -s 64 -n 300 --json 10.0.0.1
if [ -x /bin/extra-tests ]; then /bin/extra-tests || rc=1; fi
exit_with $rc
INIT
chmod +x "$IR/init"
[ -n "${SOFTROCE_QUICK:-}" ] && touch "$IR/quick"
[ -n "${SOFTROCE_MECHANISMS:-}" ] && echo "$SOFTROCE_MECHANISMS" > "$IR/mechanisms"
[ -n "${SOFTROCE_TWO_TESTS:-}" ] && echo "$SOFTROCE_TWO_TESTS" > "$IR/two-tests"
. "$ROOT/scripts/softroce-preload.sh"  # the preload stage: Debian tools under libbraid_preload.so (SOFTROCE_PRELOAD=0 skips it)
(cd "$IR" && find . | cpio -o -H newc --quiet) > "$WORK/boot.cpio"
t1=$(date +%s)
log "initramfs $(du -h "$WORK/boot.cpio" | cut -f1), prepared in $((t1 - t0)) s; booting $KVER under TCG"

# 5. Boot. Exit code: 1 = guest wrote 0 (pass), 3 = guest wrote 1 (fail), anything else = no result.
boot() { # LOG EXTRA-APPEND QEMU-ARGS...
    local out=$1 extra=$2; shift 2
    timeout "$TIMEOUT" qemu-system-x86_64 -accel tcg,thread=multi -cpu max -m 1024 -smp 2 \
        -kernel "$KROOT/boot/vmlinuz-$KVER" -initrd "$WORK/boot.cpio" \
        -append "console=ttyS0 panic=-1 quiet cryptomgr.notests mitigations=off $extra" \
        -nographic -no-reboot -device isa-debug-exit,iobase=0xf4,iosize=0x04 "$@" > "$out" 2>&1 < /dev/null
}
passed=0; failed=0
verdict() { # NAME QEMU-EXIT LOG
    case $2 in
        1) log "$1 passed"; passed=$((passed + 1)); return 0 ;;
        3) log "$1 FAILED (log: $3)" ;;
        124) log "$1 timed out after $TIMEOUT s (log: $3)" ;;
        *) log "$1 ended without a result (qemu exit $2; log: $3)" ;;
    esac
    failed=$((failed + 1))
    return 1
}
set +e
ok=0
if [ -z "${SOFTROCE_TWO_ONLY:-}" ]; then
    boot "$WORK/guest.log" "" -nic none; q=$?
    tr -d '\r' < "$WORK/guest.log" | grep -v '^\x1b' | sed -n '/^guest:/,$p'
    verdict "one guest (boot and tests $(($(date +%s) - t1)) s)" $q "$WORK/guest.log"; ok=$?
fi
t2=$(date +%s)
if [ "${SOFTROCE_TWO_GUESTS:-1}" = 1 ] && [ -z "${SOFTROCE_QUICK:-}" ]; then
    P=$((20000 + RANDOM % 20000))
    # Two links, each a pair of UDP sockets on the host: link 1 on ports P/P+1, link 2 on P+2/P+3.
    boot "$WORK/server.log" braid_role=server \
        -netdev socket,id=n0,udp=127.0.0.1:$((P + 1)),localaddr=127.0.0.1:$P \
        -device virtio-net-pci,netdev=n0,mac=52:54:00:00:01:01 \
        -netdev socket,id=n1,udp=127.0.0.1:$((P + 3)),localaddr=127.0.0.1:$((P + 2)) \
        -device virtio-net-pci,netdev=n1,mac=52:54:00:00:02:01 & sp=$!
    boot "$WORK/client.log" braid_role=client \
        -netdev socket,id=n0,udp=127.0.0.1:$P,localaddr=127.0.0.1:$((P + 1)) \
        -device virtio-net-pci,netdev=n0,mac=52:54:00:00:01:02 \
        -netdev socket,id=n1,udp=127.0.0.1:$((P + 2)),localaddr=127.0.0.1:$((P + 3)) \
        -device virtio-net-pci,netdev=n1,mac=52:54:00:00:02:02; qc=$?
    wait $sp; qs=$?
    tr -d '\r' < "$WORK/client.log" | grep -v '^\x1b' | sed -n '/^guest client:/,$p'
    t3=$(date +%s)
    verdict "two guests: server" $qs "$WORK/server.log" || ok=1
    verdict "two guests: client ($((t3 - t2)) s)" $qc "$WORK/client.log" || ok=1
fi
set -e
log "total $(($(date +%s) - t0)) s"
echo "softroce: $passed passed, $failed failed"
exit $ok
