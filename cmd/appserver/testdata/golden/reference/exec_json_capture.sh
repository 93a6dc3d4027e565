#!/usr/bin/env bash
# Capture of exec_json_fix.jsonl and exec_json_fail.jsonl: what
# `codex exec --json` (codex-cli 0.171.0) prints on stdout for two turns on
# the fake model, to hold `appserver exec --json` to the same event names
# and shapes (TestExecJSONFollowsCodexExec).
#
# The model is `appserver mockmodel --script exec_json_model.json`; CODEX_HOME
# is a temporary directory outside /tmp (codex refuses to put its sandbox
# helper under /tmp) whose config.toml has model = "gpt-5.5",
# model_provider = "fake" and [model_providers.fake] with the mock's
# base_url, wire_api = "responses", request_max_retries = 0 and
# stream_max_retries = 0. HOME is an empty directory, so the login shell
# of the command prints nothing of its own. The project is a directory
# holding notes.txt = "one\n"; its path was replaced by /home/dev/project
# in the capture. stdin is /dev/null (no terminal).
#
# Usage: exec_json_capture.sh CODEX PROJECT_DIR MOCK_URL
set -euo pipefail
codex=$1 project=$2 mock=$3
home=$(mktemp -d -p /var/tmp) codex_home=$(mktemp -d -p /var/tmp)
cat > "$codex_home/config.toml" <<TOML
model = "gpt-5.5"
model_provider = "fake"
[model_providers.fake]
name = "Fake"
base_url = "$mock"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
TOML
here=$(cd "$(dirname "$0")" && pwd)
cd "$project"
printf 'one\n' > notes.txt
run() {
  HOME=$home CODEX_HOME=$codex_home "$codex" exec --json --skip-git-repo-check -s workspace-write "$1" </dev/null 2>/dev/null || true
}
run "Fix the notes" | sed "s#$project#/home/dev/project#g" > "$here/exec_json_fix.jsonl"
run "Fail please" > "$here/exec_json_fail.jsonl"
rm -rf "$home" "$codex_home"
