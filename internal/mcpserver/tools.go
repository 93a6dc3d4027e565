package mcpserver

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The tool names, as the reference's MCP server named them.
const (
	ToolCodex      = "codex"
	ToolCodexReply = "codex-reply"
)

// The schemas have the shape of the reference's (codex mcp-server 0.153.4,
// the last release that shipped it): the same names, types, enums and
// required lists, so that hosts configured for it can call ours; the
// descriptions are ours. testdata/reference_tools_list.json is its
// tools/list answer without its descriptions, and a test holds these to it.
var (
	codexInputSchema = json.RawMessage(`{
  "type": "object",
  "additionalProperties": false,
  "required": ["prompt"],
  "properties": {
    "approval-policy": {
      "description": "When the model's commands wait for the user's approval: ` + "`on-request` (when the model asks for it) or `never`" + `.",
      "type": "string",
      "enum": ["on-request", "never"]
    },
    "base-instructions": {
      "description": "Instructions that replace the default ones.",
      "type": "string"
    },
    "compact-prompt": {
      "description": "The prompt that asks for the summary when the conversation is compacted.",
      "type": "string"
    },
    "config": {
      "description": "Configuration settings, by key, that take precedence over the configuration file for this session.",
      "type": "object",
      "additionalProperties": true
    },
    "cwd": {
      "description": "The session's working directory; a relative path starts from the server's own working directory.",
      "type": "string"
    },
    "developer-instructions": {
      "description": "Instructions the model receives as a developer message.",
      "type": "string"
    },
    "model": {
      "description": "A model to use instead of the default one, such as 'gpt-5.2'.",
      "type": "string"
    },
    "prompt": {
      "description": "The user's first message, which starts the session.",
      "type": "string"
    },
    "sandbox": {
      "description": "What the session's commands may touch: ` + "`read-only`, `workspace-write` or `danger-full-access`" + `.",
      "type": "string",
      "enum": ["read-only", "workspace-write", "danger-full-access"]
    }
  }
}`)

	codexReplyInputSchema = json.RawMessage(`{
  "type": "object",
  "required": ["prompt"],
  "properties": {
    "conversationId": {
      "description": "The former name of threadId, still accepted; use threadId.",
      "type": "string"
    },
    "prompt": {
      "description": "The user's next message in the session.",
      "type": "string"
    },
    "threadId": {
      "description": "The thread of the session to continue. Needed unless the client still sends conversationId instead, which is why the schema does not require it.",
      "type": "string"
    }
  }
}`)

	// outputSchema is the structuredContent of both tools' results.
	outputSchema = json.RawMessage(`{
  "type": "object",
  "properties": {"threadId": {"type": "string"}, "content": {"type": "string"}},
  "required": ["threadId", "content"]
}`)
)

func codexTool() *mcp.Tool {
	return &mcp.Tool{
		Name:         ToolCodex,
		Title:        "Codex",
		Description:  "Start a session of the coding agent on a prompt; the other parameters configure the session.",
		InputSchema:  codexInputSchema,
		OutputSchema: outputSchema,
	}
}

func codexReplyTool() *mcp.Tool {
	return &mcp.Tool{
		Name:         ToolCodexReply,
		Title:        "Codex Reply",
		Description:  "Send the next prompt to a session the codex tool started, named by its thread id.",
		InputSchema:  codexReplyInputSchema,
		OutputSchema: outputSchema,
	}
}

// toolResult is the structuredContent of a result.
type toolResult struct {
	ThreadID string `json:"threadId"`
	Content  string `json:"content"`
}
