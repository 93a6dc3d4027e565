package files

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/appserver/appserver/internal/fsguard"
	"github.com/appserver/appserver/internal/policy"
	"github.com/appserver/appserver/internal/registry"
	"github.com/appserver/appserver/internal/sandbox"
)

// GrepFilesName is the tool name.
const GrepFilesName = "grep_files"

// grep_files limits (docs/tools.md §2.8).
const (
	// GrepDefaultLimit is the default number of paths returned.
	GrepDefaultLimit = 100
	// GrepMaxLimit caps limit.
	GrepMaxLimit = 2000
	// GrepTimeout bounds one ripgrep run.
	GrepTimeout = 30 * time.Second
	// stderrCap bounds the ripgrep error text kept.
	stderrCap = 64 << 10
)

// buildGrepFilesSpec builds GrepFilesSpec's value.
func buildGrepFilesSpec() registry.FunctionSpec {
	props := map[string]*registry.Schema{
		"pattern": registry.String("The regular expression to look for in file contents."),
		"include": registry.String("Search only the files whose names match this glob, such as \"*.go\" or \"*.{js,jsx}\"."),
		"path":    registry.String("The directory or file to search; the turn's working directory when omitted."),
		"limit":   registry.Number("Most paths to answer with: 100 when omitted, at most 2000."),
	}
	return registry.FunctionSpec{
		Name:        GrepFilesName,
		Description: "Find the files whose contents match a regular expression; answers their paths, the most recently modified first.",
		Parameters:  registry.Object(props, []string{"pattern"}, registry.AllowAdditional(false)),
	}
}

var grepFilesSpecStatic = registry.Static(buildGrepFilesSpec)

// GrepFilesSpec returns grep_files' spec (strict:false), as classic Codex
// sent it.
// It is built once and shared (registry.Static).
func GrepFilesSpec() registry.FunctionSpec { return grepFilesSpecStatic() }

// GrepFiles is the grep_files handler, running ripgrep inside the sandbox.
// With a Sandbox set, the zero values of the other fields search below
// the turn's cwd with "rg" from PATH and a 30 s timeout.
//
// The search path is checked by the guard first, like a read_file path.
// ripgrep then runs under the read-only sandbox policy, without network,
// whatever the thread's policy: the masked paths (the sandbox hides the
// guard's list) are out of its sight, its /proc is its own, and its
// environment holds only PATH and HOME. ripgrep does not follow symlinks
// below the search path; a symlink swapped in during a search can only
// show it what a read-only sandboxed command may read.
type GrepFiles struct {
	// RgPath is the ripgrep binary; "" looks up "rg" in PATH.
	RgPath string
	// Timeout bounds one run; 0 means GrepTimeout.
	Timeout time.Duration
	// Guard refuses the daemon's own paths; nil masks nothing. The
	// sandbox must hide the same paths (sandbox.Options.Hidden =
	// Guard.Masked()).
	Guard *fsguard.Guard
	// Access returns what a call may search; nil is the turn's cwd.
	Access AccessFunc
	// Sandbox runs ripgrep; nil refuses every search rather than run it
	// unconfined.
	Sandbox *sandbox.Sandbox
}

var _ registry.Handler = (*GrepFiles)(nil)

// Register adds grep_files to b (parallel-capable).
func (h *GrepFiles) Register(b *registry.Builder) error {
	return b.Register(GrepFilesSpec(), h, true)
}

// Kind returns registry.PayloadFunction.
func (*GrepFiles) Kind() registry.PayloadKind { return registry.PayloadFunction }

// IsMutating returns false.
func (*GrepFiles) IsMutating(context.Context, registry.Invocation) bool { return false }

type grepArgs struct {
	Pattern *string `json:"pattern"`
	Include *string `json:"include"`
	Path    *string `json:"path"`
	Limit   *int64  `json:"limit"`
}

// Handle runs `rg --files-with-matches --sortr=modified --regexp <pattern>
// --no-messages [--glob <include>] -- <path>` in the turn cwd and answers
// the first limit paths, newest first, one per line. No match answers
// "No matches found." with success:false; a missing ripgrep is an error
// that says so, never an empty result.
func (h *GrepFiles) Handle(ctx context.Context, inv registry.Invocation) (registry.Output, error) {
	raw, err := functionArgs(GrepFilesName, inv)
	if err != nil {
		return registry.Output{}, err
	}
	var a grepArgs
	if err := registry.DecodeArguments(raw, &a); err != nil {
		return registry.Output{}, err
	}
	if a.Pattern == nil {
		return registry.Output{}, registry.ArgumentsError(errors.New("missing field `pattern`"))
	}
	limit, err := usize("limit", a.Limit, GrepDefaultLimit)
	if err != nil {
		return registry.Output{}, err
	}
	pattern := strings.TrimSpace(*a.Pattern)
	if pattern == "" {
		return registry.Output{}, errors.New("pattern must not be empty")
	}
	if limit == 0 {
		return registry.Output{}, errors.New("limit must be greater than zero")
	}
	limit = min(limit, GrepMaxLimit)
	search := inv.Turn.Cwd
	if a.Path != nil {
		search = resolvePath(inv.Turn.Cwd, *a.Path)
	}
	if _, err := h.Guard.Stat(ctx, accessOf(h.Access, inv), search); err != nil {
		if errors.Is(err, fsguard.ErrDenied) {
			return registry.Output{}, err
		}
		return registry.Output{}, fmt.Errorf("unable to access `%s`: %s", search, ioErrorText(err))
	}
	include := ""
	if a.Include != nil {
		include = strings.TrimSpace(*a.Include)
	}
	paths, err := h.run(ctx, pattern, include, search, limit, inv.Turn.Cwd)
	if err != nil {
		return registry.Output{}, err
	}
	if len(paths) == 0 {
		return registry.TextOutput("No matches found.", false), nil
	}
	return registry.TextOutput(strings.Join(paths, "\n"), true), nil
}

// ErrRipgrepMissing is wrapped by the error returned when ripgrep cannot be
// started.
var ErrRipgrepMissing = errors.New("ripgrep is not available")

type missingRgError struct{ cause error }

func (e *missingRgError) Error() string {
	return fmt.Sprintf("failed to launch rg: %s. Ensure ripgrep is installed and on PATH.", ioErrorText(e.cause))
}

func (e *missingRgError) Is(target error) bool { return target == ErrRipgrepMissing }

// ErrNoSandbox is the answer of a GrepFiles without a Sandbox.
var ErrNoSandbox = errors.New("grep_files is unavailable: ripgrep runs only inside the sandbox, and none is configured")

// run executes ripgrep in the sandbox and returns up to limit result
// paths.
func (h *GrepFiles) run(ctx context.Context, pattern, include, search string, limit int, cwd string) ([]string, error) {
	if h.Sandbox == nil {
		return nil, ErrNoSandbox
	}
	rg := h.RgPath
	if rg == "" {
		rg = "rg"
	}
	bin, err := exec.LookPath(rg)
	if err != nil {
		return nil, &missingRgError{cause: err}
	}
	timeout := h.Timeout
	if timeout <= 0 {
		timeout = GrepTimeout
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	args := []string{"--files-with-matches", "--sortr=modified", "--regexp", pattern, "--no-messages"}
	if include != "" {
		args = append(args, "--glob", include)
	}
	args = append(args, "--", search)
	cmd, err := h.Sandbox.CommandFor(rctx, sandbox.Request{
		Policy: policy.SandboxPolicy{Kind: policy.ReadOnly},
		Cwd:    cwd,
		Argv:   append([]string{bin}, args...),
		Env:    grepEnv(),
	})
	if err != nil {
		return nil, fmt.Errorf("rg failed: %v", err)
	}
	cmd.WaitDelay = time.Second
	var stderr capped
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("rg failed: %v", err)
	}
	var paths []string
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for len(paths) < limit && sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 || !utf8.Valid(line) {
			continue
		}
		paths = append(paths, string(line))
	}
	full := len(paths) == limit
	if full {
		// Enough paths: the rest of the output is not needed.
		cancel()
	}
	_, _ = io.Copy(io.Discard, stdout)
	werr := cmd.Wait()
	switch {
	case full:
		return paths, nil
	case rctx.Err() == context.DeadlineExceeded && ctx.Err() == nil:
		return nil, fmt.Errorf("rg timed out after %d seconds", int(timeout.Seconds()))
	case ctx.Err() != nil:
		return nil, ctx.Err()
	}
	code := 0
	if werr != nil {
		var ee *exec.ExitError
		if !errors.As(werr, &ee) {
			return nil, fmt.Errorf("rg failed: %v", werr)
		}
		code = ee.ExitCode()
	}
	switch {
	case code == 0:
		return paths, nil
	case code == 1 && stderr.Len() == 0:
		// No match. With --no-messages, ripgrep says nothing then; the
		// sandbox's own failures (bubblewrap exits 1 too) say something.
		return nil, nil
	default:
		return nil, fmt.Errorf("rg failed: %s", stderr.String())
	}
}

// grepEnv is ripgrep's environment: what it needs to find itself and the
// user's global gitignore, nothing of the daemon's secrets.
func grepEnv() []string {
	var env []string
	for _, k := range []string{"PATH", "HOME"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// capped is a bytes.Buffer that keeps only the first stderrCap bytes.
type capped struct{ bytes.Buffer }

func (c *capped) Write(p []byte) (int, error) {
	if room := stderrCap - c.Len(); room > 0 {
		c.Buffer.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}
