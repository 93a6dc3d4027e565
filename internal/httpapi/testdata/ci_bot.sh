#!/usr/bin/env bash
# ci_bot.sh: a CI bot driving appserver over its HTTP API with bash, curl and
# jq only. It creates a thread with a tool the bot implements, runs a turn
# and waits for it, runs a second turn (retrying the POST with the same
# Idempotency-Key, as a bot whose request timed out would), answers the
# model's tool call from the thread's event stream, and reads the
# transcript back.
#
#   APPSERVER=http://127.0.0.1:7878 APPSERVER_TOKEN=… ./ci_bot.sh
#
# It prints thread=, first_turn=, second_turn= and answer= lines on stdout
# and its progress on stderr; it exits non-zero if anything is off.
set -euo pipefail
: "${APPSERVER:?set APPSERVER to the daemon URL, e.g. http://127.0.0.1:7878}"
: "${APPSERVER_TOKEN:?set APPSERVER_TOKEN to the bearer token}"
api="$APPSERVER/v1"
auth=(-H "Authorization: Bearer $APPSERVER_TOKEN")
json=(-H "Content-Type: application/json")

# call METHOD PATH [curl args...]: prints the JSON answer; on an HTTP error
# prints the problem+json body to stderr and fails.
call() {
  local method=$1 path=$2 out status
  shift 2
  out=$(curl -sS -X "$method" "${auth[@]}" -w '\n%{http_code}' "$api$path" "$@")
  status=${out##*$'\n'}
  out=${out%$'\n'*}
  if [ "$status" -ge 300 ]; then
    echo "ci_bot: $method $path: HTTP $status: $out" >&2
    return 1
  fi
  printf '%s\n' "$out"
}

fail() { echo "ci_bot: $*" >&2; exit 1; }

# 1. A thread whose model may call ci_build_status, which this bot answers.
thread=$(jq -n --arg cwd "$PWD" '{
  cwd: $cwd,
  instructions: "You triage CI failures. Use ci_build_status to look builds up.",
  approvalPolicy: "never",
  sandbox: "read-only",
  dynamicTools: [{
    type: "function", name: "ci_build_status", description: "The status of a CI build",
    inputSchema: {type: "object", properties: {build: {type: "string"}}, required: ["build"]}
  }]
}' | call POST /threads "${json[@]}" -d @- | jq -r .thread.id)
echo "thread $thread" >&2

# 2. A turn, waiting for its result: final message, items and usage at once.
first=$(call POST "/threads/$thread/turns?wait=true" "${json[@]}" \
  -d '{"input":[{"type":"text","text":"Summarize the failures of build 1234."}]}')
[ "$(jq -r .status <<<"$first")" = completed ] || fail "first turn did not complete: $first"
echo "first answer: $(jq -r .finalMessage <<<"$first") ($(jq -r .usage.totalTokens <<<"$first") tokens)" >&2

# 3. A second turn, posted with an Idempotency-Key; the bot's HTTP client
# "times out" and posts again: the same key and body give the same turn.
key="ci-${CI_RUN_ID:-local}-$thread-status"
body='{"input":[{"type":"text","text":"Is build 1234 still failing? Check its status."}]}'
second=$(call POST "/threads/$thread/turns" "${json[@]}" -H "Idempotency-Key: $key" -d "$body")
turn=$(jq -r .id <<<"$second")
after=$(jq -r .eventsAfter <<<"$second")
retry=$(call POST "/threads/$thread/turns" "${json[@]}" -H "Idempotency-Key: $key" -d "$body")
[ "$(jq -r .id <<<"$retry")" = "$turn" ] || fail "the retried POST started another turn"
echo "turn $turn (retry answered with the same turn)" >&2

# 4. Follow the turn's events; answer the tool call when it appears.
answered=0
while IFS= read -r line; do
  case $line in
  "data: "*)
    event=${line#data: }
    case $(jq -r .method <<<"$event") in
    item/tool/call)
      call_id=$(jq -r .params.callId <<<"$event")
      build=$(jq -r .params.arguments.build <<<"$event")
      jq -n --arg text "build $build: failed, TestFlaky timed out after 60s" \
        '{contentItems: [{type: "inputText", text: $text}], success: true}' |
        call POST "/threads/$thread/tool-calls/$call_id" "${json[@]}" -d @- >/dev/null
      answered=$((answered + 1))
      echo "answered tool call $call_id (build $build)" >&2
      ;;
    turn/completed) break ;;
    esac
    ;;
  esac
done < <(curl -sS -N "${auth[@]}" "$api/threads/$thread/events?after=$after&until=turnCompleted")
[ "$answered" = 1 ] || fail "expected one tool call, answered $answered"

# 5. The turn's result, then the whole transcript.
final=$(call GET "/threads/$thread/turns/$turn?wait=true")
[ "$(jq -r .status <<<"$final")" = completed ] || fail "second turn did not complete: $final"
items=$(call GET "/threads/$thread/items?limit=100")
jq -r '.data[] | "  #\(.seq) \(.item.type): \(.item.text // .item.tool // (.item.content[0].text? // ""))"' <<<"$items" >&2
turns=$(jq -r '[.data[].turnId] | unique | length' <<<"$items")
[ "$turns" = 2 ] || fail "expected exactly 2 turns in the transcript, found $turns"

echo "thread=$thread"
echo "first_turn=$(jq -r .id <<<"$first")"
echo "second_turn=$turn"
echo "answer=$(jq -r .finalMessage <<<"$final")"
