#!/usr/bin/env sh
# Install tshark (Wireshark's command-line reader) for the packet-trace test
# (tests/test_pcap.py decodes braid's pcap output with it; the test skips when tshark is absent).
# Non-interactive: the package would otherwise ask whether non-root users may capture packets.
# Usage: scripts/ci-install-tshark.sh
set -eu
if ! command -v tshark >/dev/null 2>&1; then
    SUDO=""
    if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
    echo "wireshark-common wireshark-common/install-setuid boolean false" | $SUDO debconf-set-selections
    $SUDO apt-get update -q
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends tshark
fi
tshark --version | head -1
