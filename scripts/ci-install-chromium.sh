#!/usr/bin/env sh
# Install Debian's chromium for the HTML report's browser test (tests/test_report_browser.py opens
# the generated page in headless Chromium; it skips when no chromium is on PATH).
# Usage: scripts/ci-install-chromium.sh
set -eu
if ! command -v chromium >/dev/null 2>&1; then
    SUDO=""
    if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
    $SUDO apt-get update -q
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends chromium fonts-dejavu-core
fi
chromium --version
