// The fake model's script for the tests (internal/model/fakemodel's
// format). Every step waits for the request it matches, by the prompt's
// text or by the tool call whose output the request carries, so tests that
// run at once each get their own answers.

/** Prompts and the answers the script gives them. */
export const prompts = {
  turn: { prompt: "sdk: stream a turn", text: "Hello from the fake model, streamed in eight small pieces." },
  tool: { prompt: "sdk: call the weather tool", callId: "call_sdk_weather", text: "It is sunny in Paris." },
  approve: { prompt: "sdk: touch a file", callId: "call_sdk_touch", file: "approved.txt", text: "Touched it." },
  resumeWs: { prompt: "sdk: a long turn over websocket", text: longText("websocket") },
  httpTurn: { prompt: "sdk: http turn", text: "An answer over HTTP." },
  httpTool: { prompt: "sdk: http weather", callId: "call_sdk_http_weather", text: "It is raining in Oslo." },
  httpApprove: { prompt: "sdk: http touch", callId: "call_sdk_http_touch", file: "http-approved.txt", text: "Touched over HTTP." },
  resumeSse: { prompt: "sdk: a long turn over sse", text: longText("sse") },
  ticket: { prompt: "sdk: a turn behind tickets", text: "Tickets opened the stream." },
  subAgent: {
    prompt: "sdk: spawn a sub-agent",
    childPrompt: "sdk: the sub-agent's task",
    spawnId: "call_sdk_spawn",
    waitId: "call_sdk_wait",
    childText: longText("sub-agent"),
    text: "The sub-agent is done.",
  },
} as const;

function longText(what: string): string {
  return Array.from({ length: 40 }, (_, i) => `${what} word ${i}.`).join(" ");
}

/** The dynamic tool the tool tests register. */
export const weatherTool = {
  type: "function" as const,
  name: "lookup_weather",
  description: "Look up the weather of a city",
  inputSchema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
};

const shell = (callId: string, command: string) => ({
  call_id: callId,
  name: "shell_command",
  arguments: { command },
});

/** The script, as the mockmodel command reads it. */
export const script = {
  steps: [
    { match: { user_text: prompts.turn.prompt }, text: prompts.turn.text, chunks: 8 },
    {
      match: { user_text: prompts.tool.prompt },
      tool_calls: [{ call_id: prompts.tool.callId, name: "lookup_weather", arguments: { city: "Paris" } }],
    },
    { match: { call_output: prompts.tool.callId }, text: prompts.tool.text },
    { match: { user_text: prompts.approve.prompt }, tool_calls: [shell(prompts.approve.callId, `touch ${prompts.approve.file}`)] },
    { match: { call_output: prompts.approve.callId }, text: prompts.approve.text },
    // Long enough (40 deltas, 25 ms apart) to cut the connection in the middle.
    { match: { user_text: prompts.resumeWs.prompt }, text: prompts.resumeWs.text, chunks: 40, event_delay_ms: 25 },
    { match: { user_text: prompts.httpTurn.prompt }, text: prompts.httpTurn.text, chunks: 3 },
    {
      match: { user_text: prompts.httpTool.prompt },
      tool_calls: [{ call_id: prompts.httpTool.callId, name: "lookup_weather", arguments: { city: "Oslo" } }],
    },
    { match: { call_output: prompts.httpTool.callId }, text: prompts.httpTool.text },
    {
      match: { user_text: prompts.httpApprove.prompt },
      tool_calls: [shell(prompts.httpApprove.callId, `touch ${prompts.httpApprove.file}`)],
    },
    { match: { call_output: prompts.httpApprove.callId }, text: prompts.httpApprove.text },
    { match: { user_text: prompts.resumeSse.prompt }, text: prompts.resumeSse.text, chunks: 40, event_delay_ms: 25 },
    { match: { user_text: prompts.ticket.prompt }, text: prompts.ticket.text, chunks: 4 },
    // A parent spawns a child (multi_agent_v1) whose answer streams slowly, and waits for it.
    {
      match: { user_text: prompts.subAgent.prompt },
      tool_calls: [{ call_id: prompts.subAgent.spawnId, name: "multi_agent_v1.spawn_agent", arguments: { message: prompts.subAgent.childPrompt } }],
    },
    { match: { user_text: prompts.subAgent.childPrompt }, text: prompts.subAgent.childText, chunks: 40, event_delay_ms: 25 },
    {
      match: { call_output: prompts.subAgent.spawnId },
      tool_calls: [{ call_id: prompts.subAgent.waitId, name: "multi_agent_v1.wait_agent", arguments: { targets: ["Ada"], timeout_ms: 30000 } }],
    },
    // The parent's model hears of the child's end (the note follows the wait's output).
    { match: { user_text: "<subagent_notification>" }, text: prompts.subAgent.text },
  ],
};
