package feedback_test

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/appserver/appserver/internal/feedback"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The log tee passes every record on, keeps what the next handler
// handles, knows the threads a line names (through With too), hides
// credentials and drops the oldest lines past its bound.
func TestLogsKeepLinesByThread(t *testing.T) {
	var out bytes.Buffer
	logs := feedback.NewLogs(0)
	log := slog.New(logs.Handler(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelInfo})))
	log.Info("daemon started", "addr", "127.0.0.1:1")
	log.Debug("not kept: below the daemon's level", "thread", "t1")
	log.Info("turn started", "thread", "t1", "turn", "u1")
	log.With("thread_id", "t2").Warn("tool failed", "token", "s3cret", "api_key", "k3y", "tokens", 12)
	log.WithGroup("g").Info("grouped", "thread", "t3")
	require.Contains(t, out.String(), "daemon started", "the next handler gets every record")
	require.NotContains(t, out.String(), "not kept")

	all := string(logs.Text(nil))
	require.Equal(t, 4, strings.Count(all, "\n"), all)
	require.Contains(t, all, "tokens=12")
	require.NotContains(t, all, "s3cret")
	require.NotContains(t, all, "k3y")
	require.Contains(t, all, "token=[redacted]")

	t1 := string(logs.Text([]string{"t1"}))
	require.Contains(t, t1, "turn started")
	require.Equal(t, 1, strings.Count(t1, "\n"), t1)
	t2 := string(logs.Text([]string{"t2", "t9"}))
	require.Contains(t, t2, "tool failed")
	require.Equal(t, 1, strings.Count(t2, "\n"), t2)
	require.Empty(t, logs.Text([]string{"t3"}), "an attribute in a group names no thread")
	require.Empty(t, logs.Text([]string{}), "no thread, no line")

	small := feedback.NewLogs(100)
	slog.New(small.Handler(slog.DiscardHandler)).Info("one")
	require.Empty(t, small.Text(nil), "a discarding handler handles nothing")
	log = slog.New(small.Handler(slog.NewTextHandler(io.Discard, nil)))
	for i := range 10 {
		log.Info("line", "n", i)
	}
	kept := string(small.Text(nil))
	require.LessOrEqual(t, len(kept), 100)
	require.Contains(t, kept, "n=9")
	require.NotContains(t, kept, "n=0")
}

// A report is a zip of report.json, the attachments in order and
// manifest.json listing them.
func TestWriteReport(t *testing.T) {
	var buf bytes.Buffer
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	err := feedback.Write(&buf, feedback.Report{
		Classification: "bad_result", Reason: "wrong answer", ThreadID: "th", Version: "1.2.3", Time: at, EventID: "e1",
		Tags: map[string]string{"client": "x", "thread_id": "spoofed"},
	}, []feedback.Attachment{
		{Name: "appserver-logs.log", ContentType: "text/plain", Data: []byte("line\n")},
		{Name: "/var/log/../x/app.log", ContentType: "text/plain", Data: []byte("extra")},
	})
	require.NoError(t, err)
	zr, err := zip.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	require.NoError(t, err)
	var names []string
	files := map[string]string{}
	for _, f := range zr.File {
		names = append(names, f.Name)
		rc, err := f.Open()
		require.NoError(t, err)
		b, err := io.ReadAll(rc)
		require.NoError(t, err)
		rc.Close()
		files[f.Name] = string(b)
	}
	require.Equal(t, []string{"report.json", "attachments/0000/appserver-logs.log", "attachments/0001/app.log", "manifest.json"}, names)
	require.Equal(t, "line\n", files["attachments/0000/appserver-logs.log"])
	require.JSONEq(t, `[{"entry":"attachments/0000/appserver-logs.log","filename":"appserver-logs.log","contentType":"text/plain"},
		{"entry":"attachments/0001/app.log","filename":"app.log","contentType":"text/plain"}]`, files["manifest.json"])
	var rep map[string]any
	require.NoError(t, json.Unmarshal([]byte(files["report.json"]), &rep))
	require.Equal(t, "[Bad result]: appserver thread th", rep["message"])
	require.Equal(t, map[string]any{"classification": "bad_result", "reason": "wrong answer", "thread_id": "th",
		"appserver_version": "1.2.3", "client": "x"}, rep["tags"])
	require.Equal(t, "wrong answer", rep["exception"].(map[string]any)["values"].([]any)[0].(map[string]any)["value"])

	buf.Reset()
	require.NoError(t, feedback.Write(&buf, feedback.Report{Classification: "what", ThreadID: "t", Time: at}, nil))
	zr, err = zip.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	require.NoError(t, err)
	require.Len(t, zr.File, 2)
	rc, err := zr.File[0].Open()
	require.NoError(t, err)
	b, _ := io.ReadAll(rc)
	rc.Close()
	require.Contains(t, string(b), `"message":"[Other]: appserver thread t"`)
	require.NotContains(t, string(b), "exception")
}
