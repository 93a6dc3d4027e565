// Command mcptestserver is the MCP server the tests of internal/mcp run:
// over stdio by default, or streamable HTTP with -http (it prints its URL).
// Its tools cover what the client must handle: text, structured and image
// results, tool errors, slow calls, timestamps for benchmarks, a crash mid-call, elicitations and
// progress; it serves one resource and one template.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type textArgs struct {
	Text string `json:"text"`
}

type addArgs struct {
	A int `json:"a"`
	B int `json:"b"`
}

// stampOut is when the stamp tool's handler started and finished, in Unix
// nanoseconds: the server's own time, which benchmarks subtract.
type stampOut struct {
	InNs  int64 `json:"inNs"`
	OutNs int64 `json:"outNs"`
}

type sumOut struct {
	Sum int `json:"sum"`
}

type sleepArgs struct {
	Ms int `json:"ms"`
}

type bigArgs struct {
	Bytes int `json:"bytes"`
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func newServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "mcptestserver", Version: "1.0.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echo the text back."},
		func(_ context.Context, _ *mcp.CallToolRequest, a textArgs) (*mcp.CallToolResult, any, error) {
			return text("echo: " + a.Text), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "add", Description: "Add two integers.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, a addArgs) (*mcp.CallToolResult, sumOut, error) {
			return nil, sumOut{Sum: a.A + a.B}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "stamp", Description: "Return when the call reached the tool and when it left it."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, stampOut, error) {
			in := time.Now().UnixNano()
			return nil, stampOut{InNs: in, OutNs: time.Now().UnixNano()}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Always fails as a tool error."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return nil, nil, fmt.Errorf("the tool failed on purpose")
		})
	mcp.AddTool(s, &mcp.Tool{Name: "sleep", Description: "Sleep ms milliseconds."},
		func(ctx context.Context, _ *mcp.CallToolRequest, a sleepArgs) (*mcp.CallToolResult, any, error) {
			select {
			case <-time.After(time.Duration(a.Ms) * time.Millisecond):
				return text("slept"), nil, nil
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
		})
	mcp.AddTool(s, &mcp.Tool{Name: "crash", Description: "Exit the server process mid-call."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			os.Exit(3)
			return nil, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "image", Description: "Return a text and an image."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{
				&mcp.TextContent{Text: "a pixel"},
				&mcp.ImageContent{Data: []byte{0x89, 'P', 'N', 'G'}, MIMEType: "image/png"},
			}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "big", Description: "Return bytes of text."},
		func(_ context.Context, _ *mcp.CallToolRequest, a bigArgs) (*mcp.CallToolResult, any, error) {
			return text(strings.Repeat("x", a.Bytes)), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "ask_name", Description: "Elicit a name from the user."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{
				Mode:    "form",
				Message: "What is your name?",
				RequestedSchema: map[string]any{
					"type":       "object",
					"properties": map[string]any{"name": map[string]any{"type": "string"}},
					"required":   []string{"name"},
				},
			})
			if err != nil {
				return nil, nil, err
			}
			if res.Action != "accept" {
				return text("elicitation " + res.Action), nil, nil
			}
			return text(fmt.Sprintf("hello %v", res.Content["name"])), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "progress", Description: "Report progress, then answer."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			if tok := req.Params.GetProgressToken(); tok != nil {
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 1, Total: 2, Message: "half way"})
				// The client handles notifications and answers on
				// different goroutines: progress that arrives after its
				// call's answer is rightly dropped, so a report meant to
				// be seen comes well before the answer.
				time.Sleep(200 * time.Millisecond)
			}
			return text("done"), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "spawn", Description: "Start a grandchild that sleeps, and return its pid."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			cmd := exec.Command("sleep", "300")
			if err := cmd.Start(); err != nil {
				return nil, nil, err
			}
			return text(fmt.Sprint(cmd.Process.Pid)), nil, nil
		})
	s.AddResource(&mcp.Resource{URI: "test://greeting", Name: "greeting", MIMEType: "text/plain"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain", Text: "hello from a resource"}}}, nil
		})
	s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "test://items/{id}", Name: "item"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "item " + strings.TrimPrefix(req.Params.URI, "test://items/")}}}, nil
		})
	return s
}

func main() {
	httpAddr := flag.String("http", "", "serve streamable HTTP on this address (host:port) and print the URL")
	token := flag.String("token", "", "with -http: the bearer token every request must carry")
	hang := flag.Bool("hang", false, "never answer initialize (a server that never starts)")
	delay := flag.Duration("delay", 0, "wait this long before serving (a server that starts late)")
	flag.Parse()
	fmt.Fprintln(os.Stderr, "mcptestserver starting")
	if *hang {
		select {}
	}
	time.Sleep(*delay)
	if *httpAddr == "" {
		if err := newServer().Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	ln, err := net.Listen("tcp", *httpAddr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	srv := newServer()
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	var handler http.Handler = h
	if *token != "" {
		handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer "+*token {
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
			h.ServeHTTP(w, r)
		})
	}
	fmt.Printf("http://%s/mcp\n", ln.Addr())
	if err := http.Serve(ln, handler); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
