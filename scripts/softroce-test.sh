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
case $PROFILE in dev) TDIR=target/debug ;; *) TDIR=target/$PROFILE ;; esac

# 4. The initramfs: busybox, iproute2's ip and rdma, kmod's modules, rdma-core, perftest, ours.
IR=$WORK/initramfs
rm -rf "$IR" && mkdir -p "$IR"/{bin,sbin,etc,proc,sys,dev,tmp,lib,lib64,usr/lib/x86_64-linux-gnu,modules}
cp /bin/busybox "$IR/bin/busybox"
for a in sh mount mkdir cat echo sleep dd grep ls printf head tail date seq true false; do ln -sf busybox "$IR/bin/$a"; done
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
copy_with_libs "$(command -v kmod)" bin/kmod
ln -sf ../bin/kmod "$IR/sbin/insmod"
copy_with_libs "$(command -v ib_write_bw)" bin/ib_write_bw
copy_with_libs "$(command -v ib_write_lat)" bin/ib_write_lat
copy_with_libs "$ROOT/$TDIR/braid-conformance" bin/braid-conformance
copy_with_libs "$ROOT/$TDIR/braid-perftest" bin/braid-perftest
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
for m in crc32_generic configfs veth virtio_pci virtio_net ib_uverbs rdma_ucm rdma_rxe; do
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
role=$(sed -n 's/.*braid_role=\([a-z]*\).*/\1/p' /proc/cmdline)
if [ -n "$role" ]; then
    # Two guests joined by a socket-backed link: a real network between two hosts.
    if [ "$role" = server ]; then me=10.0.1.1; else me=10.0.1.2; fi
    /sbin/ip addr add $me/24 dev eth0; /sbin/ip link set eth0 up
    rdma link add rxe0 type rxe netdev eth0
    sleep 1
    echo "guest $role: $(rdma link show | tr '\n' ' ')"
    rc=0
    for s in 4096 65536; do
        for t in ib_write_bw braid-perftest; do
            # ib_write_bw is the reference: its failures (TCG clock check) are noted, not counted.
            if [ $t = ib_write_bw ]; then cmd="ib_write_bw"; bad=0; else cmd="braid-perftest write_bw"; bad=1; fi
            if [ "$role" = server ]; then
                echo "=== $t -s $s (server)"
                $cmd -d rxe0 -x 1 -s $s -n 500 --report_gbits > /tmp/out.txt 2>&1 || { cat /tmp/out.txt; echo "guest: $t server failed"; [ $bad = 1 ] && rc=1; }
            else
                sleep 3
                echo "=== $t -s $s (client, two guests)"
                $cmd -d rxe0 -x 1 -s $s -n 500 --report_gbits 10.0.1.1 || { echo "guest: $t client failed"; [ $bad = 1 ] && rc=1; }
            fi
        done
    done
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
pair "braid-perftest write_bw -s 65536 --busy-poll" braid-perftest write_bw -d rxe0 -x 1 -s 65536 -n 500 --busy-poll -- braid-perftest write_bw -d rxe0 -x 1 -s 65536 -n 500 --busy-poll --report_gbits 10.0.0.1
if [ -x /bin/extra-tests ]; then /bin/extra-tests || rc=1; fi
exit_with $rc
INIT
chmod +x "$IR/init"
[ -n "${SOFTROCE_QUICK:-}" ] && touch "$IR/quick"
[ -n "${SOFTROCE_MECHANISMS:-}" ] && echo "$SOFTROCE_MECHANISMS" > "$IR/mechanisms"
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
boot "$WORK/guest.log" "" -nic none; q=$?
tr -d '\r' < "$WORK/guest.log" | grep -v '^\x1b' | sed -n '/^guest:/,$p'
t2=$(date +%s)
verdict "one guest (boot and tests $((t2 - t1)) s)" $q "$WORK/guest.log"; ok=$?
if [ "${SOFTROCE_TWO_GUESTS:-1}" = 1 ] && [ -z "${SOFTROCE_QUICK:-}" ]; then
    P=$((20000 + RANDOM % 20000))
    boot "$WORK/server.log" braid_role=server \
        -netdev socket,id=n0,udp=127.0.0.1:$((P + 1)),localaddr=127.0.0.1:$P \
        -device virtio-net-pci,netdev=n0,mac=52:54:00:00:01:01 & sp=$!
    boot "$WORK/client.log" braid_role=client \
        -netdev socket,id=n0,udp=127.0.0.1:$P,localaddr=127.0.0.1:$((P + 1)) \
        -device virtio-net-pci,netdev=n0,mac=52:54:00:00:01:02; qc=$?
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
