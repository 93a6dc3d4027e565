#!/usr/bin/env bash
# Makes sure the system tools the test suite needs are present: installs them
# with apt-get when running as root, otherwise says what is missing. Under
# CI=true a missing tool fails the run instead of letting tests skip.
set -euo pipefail

missing=()

have_postgres() {
  command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1 && return 0
  compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null 2>&1
}

have_nginx() {
  command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ]
}

have_postgres || missing+=(postgresql)
# bench's TestNginx runs deploy/nginx.conf in front of two daemons (the
# package "nginx" is nginx-core on bookworm, the only flavour on trixie).
have_nginx || missing+=(nginx)
# grep_files uses ripgrep; the sandbox prefers bubblewrap (Landlock is
# the fallback, and both backends are tested when bwrap is present).
command -v rg >/dev/null 2>&1 || missing+=(ripgrep)
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
# The examples of docs/http-api.md and testdata/ci_bot.sh run with curl and jq.
command -v curl >/dev/null 2>&1 || missing+=(curl)
command -v jq >/dev/null 2>&1 || missing+=(jq)
# deploy/appserver.service is scored with systemd-analyze.
command -v systemd-analyze >/dev/null 2>&1 || missing+=(systemd)
# api/openapi.yaml is linted with Redocly CLI, an npm package.
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
# The web console's browser tests drive Debian's Chromium (playwright-core
# with the system browser; Playwright's own download is never used).
command -v chromium >/dev/null 2>&1 || missing+=(chromium)

# install_linters fetches the pinned OpenAPI linter once (into a cache
# directory), so that the test that runs it does not download.
install_linters() {
  command -v npm >/dev/null 2>&1 || return 0
  if ! "$(dirname "$0")/openapi-lint.sh" --install; then
    echo "test-deps: could not install the OpenAPI linter from the npm registry" >&2
    [ "${CI:-}" = "true" ] && exit 1
  fi
  return 0
}

# install_mcp_everything puts the reference MCP server, pinned, into
# .tools/ in the checkout (git-ignored), where the MCP tests look for it.
everything_version=2026.8.31
install_mcp_everything() {
  command -v npm >/dev/null 2>&1 || return 0
  local root dir
  root="$(cd "$(dirname "$0")/.." && pwd)"
  dir="$root/.tools/server-everything"
  [ -f "$dir/node_modules/@modelcontextprotocol/server-everything/package.json" ] &&
    grep -q "\"version\": \"$everything_version\"" "$dir/node_modules/@modelcontextprotocol/server-everything/package.json" && return 0
  mkdir -p "$dir"
  if ! npm install --prefix "$dir" --no-audit --no-fund --no-update-notifier --loglevel=error \
    "@modelcontextprotocol/server-everything@$everything_version" >&2; then
    echo "test-deps: could not install @modelcontextprotocol/server-everything from the npm registry" >&2
    [ "${CI:-}" = "true" ] && exit 1
  fi
  return 0
}

if [ ${#missing[@]} -eq 0 ]; then
  install_linters
  install_mcp_everything
  exit 0
fi

if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "test-deps: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
  have_postgres || { echo "test-deps: postgresql binaries still missing after install" >&2; exit 1; }
  command -v rg >/dev/null 2>&1 || { echo "test-deps: ripgrep still missing after install" >&2; exit 1; }
  command -v bwrap >/dev/null 2>&1 || { echo "test-deps: bubblewrap still missing after install" >&2; exit 1; }
  command -v curl >/dev/null 2>&1 || { echo "test-deps: curl still missing after install" >&2; exit 1; }
  command -v jq >/dev/null 2>&1 || { echo "test-deps: jq still missing after install" >&2; exit 1; }
  command -v npm >/dev/null 2>&1 || { echo "test-deps: npm still missing after install" >&2; exit 1; }
  command -v systemd-analyze >/dev/null 2>&1 || { echo "test-deps: systemd-analyze still missing after install" >&2; exit 1; }
  have_nginx || { echo "test-deps: nginx still missing after install" >&2; exit 1; }
  command -v chromium >/dev/null 2>&1 || { echo "test-deps: chromium still missing after install" >&2; exit 1; }
  install_linters
  install_mcp_everything
  exit 0
fi

echo "test-deps: missing system packages: ${missing[*]}" >&2
if [ "${CI:-}" = "true" ]; then
  echo "test-deps: CI=true and cannot install them (not root or no apt-get)" >&2
  exit 1
fi
echo "test-deps: tests that need them will be skipped; install them to run everything" >&2
install_linters
install_mcp_everything
