package feedback

import (
	"archive/zip"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"strings"
	"time"
)

// Report is what report.json says.
type Report struct {
	// Classification is the client's kind of feedback ("bug", ...).
	Classification string
	// Reason is the user's text, "" when none.
	Reason string
	// ThreadID is the thread the report is about (or a made-up id).
	ThreadID string
	// Tags are the client's tags; the report's own (classification,
	// reason, thread_id, version) win over them.
	Tags map[string]string
	// Version is the daemon's version.
	Version string
	// Time is when the report was made.
	Time time.Time
	// EventID identifies the report (32 hex digits).
	EventID string
}

// Attachment is one file of a report.
type Attachment struct {
	// Name is its file name (a base name; a path is cut to its last
	// element).
	Name string
	// ContentType is its media type.
	ContentType string
	// Data is its content.
	Data []byte
}

// titles are the display names of the classifications clients send.
var titles = map[string]string{"bug": "Bug", "bad_result": "Bad result", "good_result": "Good result", "safety_check": "Safety check"}

// reportJSON is report.json.
type reportJSON struct {
	EventID   string            `json:"event_id"`
	Message   string            `json:"message"`
	Timestamp float64           `json:"timestamp"`
	Exception *exceptionJSON    `json:"exception,omitempty"`
	Tags      map[string]string `json:"tags"`
}

type exceptionJSON struct {
	Values []exceptionValue `json:"values"`
}

type exceptionValue struct {
	Type  string `json:"type"`
	Value string `json:"value"`
}

// manifestEntry is one line of manifest.json.
type manifestEntry struct {
	Entry       string `json:"entry"`
	Filename    string `json:"filename"`
	ContentType string `json:"contentType"`
}

// Write writes the zip of r and atts to w: report.json, each attachment
// as attachments/NNNN/<name> in order, and manifest.json.
func Write(w io.Writer, r Report, atts []Attachment) error {
	zw := zip.NewWriter(w)
	title, ok := titles[r.Classification]
	if !ok {
		title = "Other"
	}
	rep := reportJSON{
		EventID:   r.EventID,
		Message:   fmt.Sprintf("[%s]: appserver thread %s", title, r.ThreadID),
		Timestamp: float64(r.Time.UnixMicro()) / 1e6,
		Tags:      map[string]string{},
	}
	for k, v := range r.Tags {
		rep.Tags[k] = v
	}
	rep.Tags["classification"] = r.Classification
	rep.Tags["thread_id"] = r.ThreadID
	rep.Tags["appserver_version"] = r.Version
	if r.Reason != "" {
		rep.Tags["reason"] = r.Reason
		rep.Exception = &exceptionJSON{Values: []exceptionValue{{Type: rep.Message, Value: r.Reason}}}
	}
	if err := writeJSON(zw, "report.json", r.Time, rep); err != nil {
		return err
	}
	manifest := make([]manifestEntry, 0, len(atts))
	for i, a := range atts {
		name := path.Base(strings.ReplaceAll(a.Name, "\\", "/"))
		if name == "." || name == "/" || name == ".." {
			name = "attachment"
		}
		entry := fmt.Sprintf("attachments/%04d/%s", i, name)
		f, err := zw.CreateHeader(&zip.FileHeader{Name: entry, Method: zip.Deflate, Modified: r.Time})
		if err != nil {
			return err
		}
		if _, err := f.Write(a.Data); err != nil {
			return err
		}
		manifest = append(manifest, manifestEntry{Entry: entry, Filename: name, ContentType: a.ContentType})
	}
	if err := writeJSON(zw, "manifest.json", r.Time, manifest); err != nil {
		return err
	}
	return zw.Close()
}

func writeJSON(zw *zip.Writer, name string, at time.Time, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	f, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Deflate, Modified: at})
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	return err
}
