#!/usr/bin/env bash
# The browser the web page's test (tests/it/http.rs) drives: Debian's
# chromium and its chromedriver (WebDriver), installed with apt-get when
# missing. Prints the chromedriver's path and the browser's, one a line;
# exits non-zero, saying why, when they cannot be had (the test is then
# skipped with that reason).
#
#   scripts/chromium.sh     install if needed; print chromedriver's and chromium's paths
set -euo pipefail

find_driver() { command -v chromedriver || ls /usr/lib/chromium/chromedriver 2>/dev/null || true; }
find_browser() { command -v chromium || command -v chromium-browser || true; }

if [[ -z $(find_driver) || -z $(find_browser) ]]; then
    sudo=()
    if [[ $(id -u) -ne 0 ]]; then
        command -v sudo >/dev/null 2>&1 || { echo "chromium is missing and this user cannot apt-get install it" >&2; exit 1; }
        sudo=(sudo)
    fi
    echo "installing chromium and chromium-driver (apt-get)" >&2
    "${sudo[@]}" apt-get update -qq >&2
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        chromium chromium-driver fonts-dejavu-core >/dev/null
fi
driver=$(find_driver)
browser=$(find_browser)
[[ -n $driver ]] || { echo "chromium-driver was installed but chromedriver is not found" >&2; exit 1; }
[[ -n $browser ]] || { echo "chromium was installed but its binary is not on PATH" >&2; exit 1; }
echo "$driver"
echo "$browser"
