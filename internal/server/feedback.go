package server

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/google/uuid"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/clientfs"
	"github.com/appserver/appserver/internal/feedback"
	"github.com/appserver/appserver/internal/fsguard"
)

// DefaultFeedbackAttachmentBytes bounds what a feedback report attaches
// besides the logs: the thread's transcript and the extra files.
const DefaultFeedbackAttachmentBytes = 64 << 20

// FeedbackConfig serves feedback/save.
type FeedbackConfig struct {
	// Guard is the daemon's path rule: the report and the extra files go
	// through it with the caller's access. Required.
	Guard *fsguard.Guard
	// Logs are the daemon's recent log lines; nil attaches none.
	Logs *feedback.Logs
	// MaxAttachmentBytes bounds the transcript and extra files together;
	// 0 means DefaultFeedbackAttachmentBytes.
	MaxAttachmentBytes int64
}

// registerFeedback installs feedback/save (docs/protocol.md §4.42).
func (s *Server) registerFeedback(cfg FeedbackConfig) {
	if cfg.MaxAttachmentBytes <= 0 {
		cfg.MaxAttachmentBytes = DefaultFeedbackAttachmentBytes
	}
	s.Handle(api.MethodFeedbackSave, func(ctx context.Context, c *Call) (any, error) {
		return s.feedbackSave(ctx, c, cfg)
	})
}

// saveError is a failure of feedback/save the reference answers -32603,
// worded as it words them.
func saveError(format string, args ...any) error {
	return apperr.New(apperr.Unavailable, "failed to save feedback: "+format, args...)
}

// guardError keeps the path rule's refusals as the caller's fault
// (-32602, the path and the reason named) and words the others as
// failures of the save, the operating system's error as the reference
// words it; msg is what failed, and its %s the error.
func guardError(err error, msg string, args ...any) error {
	if errors.Is(err, fsguard.ErrDenied) {
		return apperr.New(apperr.Forbidden, "%s", err.Error())
	}
	return saveError(msg, append(args, clientfs.OSMessage(err))...)
}

// feedbackSave writes a report to savePath: report.json, with
// includeLogs the daemon's log lines the caller may read and the named
// thread's transcript, and the extra files. Paths go through the daemon's
// path rule with the caller's access, so a principal reads and writes in
// its workspace roots only and nobody reaches the daemon's own files;
// the logs a principal gets are those of the thread it names (which
// admit has checked it may see), none without one.
func (s *Server) feedbackSave(ctx context.Context, c *Call, cfg FeedbackConfig) (any, error) {
	var p api.FeedbackSaveParams
	if err := DecodeParams(c, &p, "classification", "savePath"); err != nil {
		return nil, err
	}
	if !filepath.IsAbs(p.SavePath) {
		return nil, InvalidRequest("feedback savePath must be an absolute host path")
	}
	who := c.Session.who
	access, err := clientfs.AccessOf(who)
	if err != nil {
		return nil, err
	}
	var thread *api.ThreadReadResult
	threadID := "no-active-thread-" + uuid.Must(uuid.NewV7()).String()
	if p.ThreadID != nil {
		threadID = *p.ThreadID
		if s.cfg.Threads != nil {
			t := true
			res, err := s.cfg.Threads.ReadThread(ctx, api.ThreadReadParams{ThreadID: threadID, IncludeTurns: &t})
			switch {
			case err == nil:
				thread = &res
			case !apperr.Is(err, apperr.NotFound):
				// A thread that does not exist is reported on without its
				// transcript, as the reference does.
				return nil, err
			}
		}
	}

	var atts []feedback.Attachment
	budget := cfg.MaxAttachmentBytes
	if p.IncludeLogs {
		var scope []string // every line
		if p.ThreadID != nil {
			scope = []string{threadID}
		} else if !who.IsOperator() {
			scope = []string{} // no thread: no line is the principal's
		}
		if cfg.Logs != nil && (scope == nil || len(scope) > 0) {
			atts = append(atts, feedback.Attachment{Name: "appserver-logs.log", ContentType: "text/plain", Data: cfg.Logs.Text(scope)})
		}
		if thread != nil {
			b, err := json.MarshalIndent(thread, "", "  ")
			if err != nil {
				return nil, err
			}
			if int64(len(b)) > budget {
				return nil, saveError("the transcript of thread %s exceeds the size limit of attachments (%d bytes)", threadID, cfg.MaxAttachmentBytes)
			}
			budget -= int64(len(b))
			atts = append(atts, feedback.Attachment{Name: "thread-" + threadID + ".json", ContentType: "application/json", Data: b})
		}
	}
	var seen []string
	for _, f := range p.ExtraLogFiles {
		if slices.Contains(seen, f) {
			continue
		}
		seen = append(seen, f)
		data, err := readAttachment(ctx, cfg.Guard, access, f, budget)
		if err != nil {
			return nil, err
		}
		budget -= int64(len(data))
		ct := "text/plain"
		if filepath.Ext(f) == ".json" {
			ct = "application/json"
		}
		atts = append(atts, feedback.Attachment{Name: filepath.Base(f), ContentType: ct, Data: data})
	}

	path := filepath.Clean(p.SavePath)
	out, err := cfg.Guard.OpenWrite(ctx, access, path, os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil, saveError("feedback save path already exists")
	}
	if err != nil {
		return nil, guardError(err, "%[2]s at path %[1]q", path)
	}
	id := uuid.New()
	rep := feedback.Report{Classification: p.Classification, ThreadID: threadID, Tags: p.Tags,
		Version: s.cfg.Info.Version, Time: s.now(), EventID: hex.EncodeToString(id[:])}
	if p.Reason != nil {
		rep.Reason = *p.Reason
	}
	err = feedback.Write(out, rep, atts)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		// The caller gets a whole report or none.
		_ = cfg.Guard.Remove(context.WithoutCancel(ctx), access, out.Name())
		return nil, saveError("%v", err)
	}
	return api.FeedbackSaveResult{SavedPath: path, ThreadID: threadID}, nil
}

// notAttachable is the reference's refusal of an extra file that is not a
// regular file or too large for what is left of the size limit.
const notAttachable = "selected attachment %s is missing, nonregular, or exceeds the remaining decoded size limit"

// readAttachment reads an extra file the caller named, when its access
// reaches it, up to limit bytes.
func readAttachment(ctx context.Context, guard *fsguard.Guard, access fsguard.Access, path string, limit int64) ([]byte, error) {
	if !filepath.IsAbs(path) {
		return nil, saveError("failed to read selected attachment %s: not an absolute path", path)
	}
	f, err := guard.OpenRead(ctx, access, path)
	if errors.Is(err, syscall.EISDIR) || errors.Is(err, fsguard.ErrNotRegular) {
		return nil, saveError(notAttachable, path)
	}
	if err != nil {
		return nil, guardError(err, "failed to read selected attachment %s: %s", path)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, saveError("failed to read selected attachment %s: %v", path, err)
	}
	if int64(len(data)) > limit {
		return nil, saveError(notAttachable, path)
	}
	return data, nil
}
