#!/usr/bin/env bash
# Runs the web console's tests (web/console) against a daemon built from
# this checkout: npm ci from the committed lock files (the console's and the
# client library's, which it bundles), then npm test there: typecheck, the
# embedded build in internal/console/assets checked against the sources,
# and the browser tests in Debian's Chromium. Without node, npm or chromium
# it says so and skips, except under CI=true, where that fails the run.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
GO="${GO:-go}"

for tool in node npm chromium; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    if [ "${CI:-}" = "true" ]; then
      echo "console-test: $tool is missing (CI=true): run scripts/test-deps.sh" >&2
      exit 1
    fi
    echo "console-test: $tool is missing; skipping the web console's tests" >&2
    exit 0
  fi
done

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
(cd "$root" && "$GO" build -o "$tmp/appserver" ./cmd/appserver)
(cd "$root/sdk/typescript" && npm ci --no-audit --no-fund --no-update-notifier --loglevel=error)
cd "$root/web/console"
npm ci --no-audit --no-fund --no-update-notifier --loglevel=error
APPSERVER_BIN="$tmp/appserver" CHROMIUM="$(command -v chromium)" npm test --no-update-notifier
