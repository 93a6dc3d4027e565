#!/usr/bin/env bash
# Runs the TypeScript client library's tests (sdk/typescript) against a
# daemon built from this checkout: npm ci from the committed lock file, then
# npm test (generated types up to date, typecheck, vitest). Without node and
# npm it says so and skips, except under CI=true, where that fails the run.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
GO="${GO:-go}"

for tool in node npm; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    if [ "${CI:-}" = "true" ]; then
      echo "sdk-test: $tool is missing (CI=true): run scripts/test-deps.sh" >&2
      exit 1
    fi
    echo "sdk-test: $tool is missing; skipping the TypeScript library's tests" >&2
    exit 0
  fi
done

# Vite, under vitest, needs Node 20.19 or later.
if ! node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 20 || (a === 20 && b >= 19) ? 0 : 1)'; then
  echo "sdk-test: node $(node --version) is too old; the TypeScript library's tests need 20.19 or later" >&2
  [ "${CI:-}" = "true" ] && exit 1
  exit 0
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
(cd "$root" && "$GO" build -o "$tmp/appserver" ./cmd/appserver)
cd "$root/sdk/typescript"
npm ci --no-audit --no-fund --no-update-notifier --loglevel=error
APPSERVER_BIN="$tmp/appserver" npm test --no-update-notifier
