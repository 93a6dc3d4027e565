#!/usr/bin/env bash
# Lints api/openapi.yaml with Redocly CLI under the rules in redocly.yaml
# (the strict set). The CLI comes from the npm registry, pinned, installed
# once into a cache directory and reused, so the test that runs this costs
# about a second after the first run.
#
#   scripts/openapi-lint.sh            lint api/openapi.yaml
#   scripts/openapi-lint.sh --install  only install the linter (test-deps.sh)
#
# The cache is $APPSERVER_TOOLS_CACHE, else $XDG_CACHE_HOME/appserver-tools,
# else ~/.cache/appserver-tools. Needs node ≥ 18.17 and npm.
set -euo pipefail

# 1.34 is the newest line that still runs on Debian 12's node 18.
version=1.34.20
root="$(cd "$(dirname "$0")/.." && pwd)"
cache="${APPSERVER_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/appserver-tools}"
dir="$cache/redocly-cli-$version"
bin="$dir/node_modules/.bin/redocly"

if [ ! -x "$bin" ]; then
  command -v npm >/dev/null 2>&1 || { echo "openapi-lint: npm not found (install node and npm)" >&2; exit 127; }
  mkdir -p "$cache"
  # Install beside the final place and rename, so that a run interrupted
  # half-way, or two runs at once, never leave a broken install behind.
  tmp="$(mktemp -d "$cache/.redocly-cli-XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  echo "openapi-lint: installing @redocly/cli@$version into $dir" >&2
  npm install --prefix "$tmp" --no-audit --no-fund --no-update-notifier --loglevel=error "@redocly/cli@$version" >&2
  mv -T "$tmp" "$dir" 2>/dev/null || true
fi
[ "${1:-}" = "--install" ] && exit 0

cd "$root"
# Redocly's usage telemetry stays off; redocly.yaml in the root holds the rules.
REDOCLY_TELEMETRY=off exec "$bin" lint --format stylish api/openapi.yaml
