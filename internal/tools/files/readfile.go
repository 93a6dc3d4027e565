package files

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/appserver/appserver/internal/fsguard"
	"github.com/appserver/appserver/internal/lossy"
	"github.com/appserver/appserver/internal/registry"
)

// ReadFileName is the tool name.
const ReadFileName = "read_file"

// read_file limits and defaults (docs/tools.md §2.6).
const (
	// ReadFileDefaultLimit is the default number of lines returned.
	ReadFileDefaultLimit = 2000
	// MaxLineBytes is where each returned line is cut (on a UTF-8 boundary).
	MaxLineBytes = 500
	// tabWidth is the indent of a tab in indentation mode.
	tabWidth = 4
	// scanKeep bounds the bytes of one line kept for analysis; the rest of
	// an overlong line is skipped.
	scanKeep = 64 << 10
)

// commentPrefixes mark header comments in indentation mode.
var commentPrefixes = []string{"#", "//", "--"}

// buildReadFileSpec builds ReadFileSpec's value.
func buildReadFileSpec() registry.FunctionSpec {
	indentation := registry.Object(map[string]*registry.Schema{
		"anchor_line":      registry.Number("The line whose enclosing block is shown; offset when omitted."),
		"max_levels":       registry.Number("How many enclosing blocks (each less indented than the last) to climb; 0, the default, climbs without limit."),
		"include_siblings": registry.Boolean("Also show the neighbouring blocks indented like the anchor line's block. Defaults to false."),
		"include_header":   registry.Boolean("Also show the comments or attributes just above the block. Defaults to true."),
		"max_lines":        registry.Number("Most lines to show in indentation mode."),
	}, nil, registry.AllowAdditional(false))
	props := map[string]*registry.Schema{
		"file_path":   registry.String("The file to read, as an absolute path"),
		"offset":      registry.Number("First line to show, counting from 1. Defaults to 1."),
		"limit":       registry.Number("Most lines to show. Defaults to 2000."),
		"mode":        registry.String("\"slice\" (the default) shows lines offset onwards; \"indentation\" shows the code block around an anchor line, found from the indentation."),
		"indentation": indentation,
	}
	return registry.FunctionSpec{
		Name:        ReadFileName,
		Description: "Show the lines of a local file, each prefixed with its number (from 1): a range of lines, or the block of code around one line.",
		Parameters:  registry.Object(props, []string{"file_path"}, registry.AllowAdditional(false)),
	}
}

var readFileSpecStatic = registry.Static(buildReadFileSpec)

// ReadFileSpec returns read_file's spec (strict:false), as classic Codex
// sent it.
// It is built once and shared (registry.Static).
func ReadFileSpec() registry.FunctionSpec { return readFileSpecStatic() }

// ReadFile is the read_file handler. The zero value reads below the
// turn's cwd, with nothing masked.
type ReadFile struct {
	// Guard refuses the daemon's own paths; nil masks nothing.
	Guard *fsguard.Guard
	// Access returns what a call may read; nil is the turn's cwd.
	Access AccessFunc
}

var _ registry.Handler = (*ReadFile)(nil)

// Register adds read_file to b (parallel-capable).
func (h *ReadFile) Register(b *registry.Builder) error { return b.Register(ReadFileSpec(), h, true) }

// Kind returns registry.PayloadFunction.
func (*ReadFile) Kind() registry.PayloadKind { return registry.PayloadFunction }

// IsMutating returns false.
func (*ReadFile) IsMutating(context.Context, registry.Invocation) bool { return false }

// readFileArgs mirrors the reference ReadFileArgs.
type readFileArgs struct {
	FilePath    *string          `json:"file_path"`
	Offset      *int64           `json:"offset"`
	Limit       *int64           `json:"limit"`
	Mode        *string          `json:"mode"`
	Indentation *indentationArgs `json:"indentation"`
}

type indentationArgs struct {
	AnchorLine      *int64 `json:"anchor_line"`
	MaxLevels       *int64 `json:"max_levels"`
	IncludeSiblings *bool  `json:"include_siblings"`
	IncludeHeader   *bool  `json:"include_header"`
	MaxLines        *int64 `json:"max_lines"`
}

// indentOptions are the resolved indentation options.
type indentOptions struct {
	anchorLine      int // 0 when absent
	maxLevels       int
	includeSiblings bool
	includeHeader   bool
	maxLines        int // 0 when absent
	hasMaxLines     bool
	hasAnchor       bool
}

// Handle reads the requested lines and answers them as "L<n>: <text>"
// lines joined by newlines.
func (h *ReadFile) Handle(ctx context.Context, inv registry.Invocation) (registry.Output, error) {
	raw, err := functionArgs(ReadFileName, inv)
	if err != nil {
		return registry.Output{}, err
	}
	var a readFileArgs
	if err := registry.DecodeArguments(raw, &a); err != nil {
		return registry.Output{}, err
	}
	if a.FilePath == nil {
		return registry.Output{}, registry.ArgumentsError(errors.New("missing field `file_path`"))
	}
	offset, err := usize("offset", a.Offset, 1)
	if err != nil {
		return registry.Output{}, err
	}
	limit, err := usize("limit", a.Limit, ReadFileDefaultLimit)
	if err != nil {
		return registry.Output{}, err
	}
	indentMode := false
	if a.Mode != nil {
		switch *a.Mode {
		case "slice":
		case "indentation":
			indentMode = true
		default:
			return registry.Output{}, registry.ArgumentsError(fmt.Errorf("unknown variant `%s`, expected `slice` or `indentation`", *a.Mode))
		}
	}
	opts := indentOptions{includeHeader: true}
	if a.Indentation != nil {
		ia := a.Indentation
		if ia.AnchorLine != nil {
			if opts.anchorLine, err = usize("anchor_line", ia.AnchorLine, 0); err != nil {
				return registry.Output{}, err
			}
			opts.hasAnchor = true
		}
		if opts.maxLevels, err = usize("max_levels", ia.MaxLevels, 0); err != nil {
			return registry.Output{}, err
		}
		if ia.IncludeSiblings != nil {
			opts.includeSiblings = *ia.IncludeSiblings
		}
		if ia.IncludeHeader != nil {
			opts.includeHeader = *ia.IncludeHeader
		}
		if ia.MaxLines != nil {
			if opts.maxLines, err = usize("max_lines", ia.MaxLines, 0); err != nil {
				return registry.Output{}, err
			}
			opts.hasMaxLines = true
		}
	}

	if offset == 0 {
		return registry.Output{}, errors.New("offset must be a 1-indexed line number")
	}
	if limit == 0 {
		return registry.Output{}, errors.New("limit must be greater than zero")
	}
	path := *a.FilePath
	if !filepath.IsAbs(path) {
		return registry.Output{}, errors.New("file_path must be an absolute path")
	}
	if indentMode {
		if err := opts.validate(); err != nil {
			return registry.Output{}, err
		}
	}
	f, err := openForRead(ctx, h.Guard, accessOf(h.Access, inv), path)
	if err != nil {
		return registry.Output{}, err
	}
	defer f.Close()
	var lines []string
	if indentMode {
		lines, err = readBlock(ctx, f, offset, limit, opts)
	} else {
		lines, err = readSlice(ctx, f, offset, limit)
	}
	if err != nil {
		return registry.Output{}, err
	}
	return registry.TextOutput(strings.Join(lines, "\n"), true), nil
}

// scanLines calls fn with each line of r (without "\n", and without the
// "\r" before it), at most scanKeep bytes of it, and its 1-based number,
// until fn returns false or ctx ends.
func scanLines(ctx context.Context, r io.Reader, fn func(line []byte, number int) bool) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var line []byte
	number := 0
	for {
		line = line[:0]
		ended, any := false, false
		for {
			if err := ctx.Err(); err != nil {
				return err
			}
			chunk, err := br.ReadSlice('\n')
			if len(chunk) > 0 {
				any = true
				if room := scanKeep + 1 - len(line); room > 0 {
					line = append(line, chunk[:min(room, len(chunk))]...)
				}
			}
			if err == nil {
				ended = true
				break
			}
			if errors.Is(err, bufio.ErrBufferFull) {
				continue
			}
			if errors.Is(err, io.EOF) {
				break
			}
			return err
		}
		if !any {
			return nil
		}
		if ended && len(line) > 0 && line[len(line)-1] == '\n' {
			line = line[:len(line)-1]
			if len(line) > 0 && line[len(line)-1] == '\r' {
				line = line[:len(line)-1]
			}
		}
		if len(line) > scanKeep {
			line = line[:scanKeep]
		}
		number++
		if !fn(line, number) {
			return nil
		}
		if !ended {
			return nil
		}
	}
}

// formatLine renders a line for the output: invalid UTF-8 replaced, cut to
// MaxLineBytes.
func formatLine(b []byte) string { return cutBytes(lossy.String(b), MaxLineBytes) }

// openForRead opens a file for reading through the guard: a refused path
// answers the guard's reason; special files (FIFOs, devices, sockets) are
// refused, as opening or reading them could block the call forever.
func openForRead(ctx context.Context, g *fsguard.Guard, a fsguard.Access, path string) (*os.File, error) {
	f, err := g.OpenRead(ctx, a, path)
	switch {
	case err == nil:
		return f, nil
	case errors.Is(err, fsguard.ErrDenied):
		return nil, err
	case errors.Is(err, fsguard.ErrNotRegular):
		return nil, fmt.Errorf("failed to read file: `%s` is not a regular file", path)
	}
	return nil, fmt.Errorf("failed to read file: %s", ioErrorText(err))
}

// readSlice returns up to limit lines of f from offset.
func readSlice(ctx context.Context, f io.Reader, offset, limit int) ([]string, error) {
	var out []string
	seen := 0
	err := scanLines(ctx, f, func(line []byte, n int) bool {
		seen = n
		if n < offset {
			return true
		}
		out = append(out, fmt.Sprintf("L%d: %s", n, formatLine(line)))
		return len(out) < limit
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("failed to read file: %s", ioErrorText(err))
	}
	if seen < offset {
		return nil, errors.New("offset exceeds file length")
	}
	return out, nil
}

// validate refuses the indentation options that cannot select a block
// (offset and limit are already at least 1), before the file is opened.
func (o indentOptions) validate() error {
	if o.hasAnchor && o.anchorLine == 0 {
		return errors.New("anchor_line must be a 1-indexed line number")
	}
	if o.hasMaxLines && o.maxLines == 0 {
		return errors.New("max_lines must be greater than zero")
	}
	return nil
}

// lineRecord is one line in indentation mode.
type lineRecord struct {
	number  int
	display string
	indent  int
	blank   bool
	comment bool
}

func newLineRecord(line []byte, n int) lineRecord {
	text := lossy.String(line)
	indent := 0
	for _, c := range text {
		if c == ' ' {
			indent++
		} else if c == '\t' {
			indent += tabWidth
		} else {
			break
		}
	}
	trimmed := strings.TrimSpace(text)
	comment := false
	for _, p := range commentPrefixes {
		if strings.HasPrefix(trimmed, p) {
			comment = true
		}
	}
	return lineRecord{number: n, display: cutBytes(text, MaxLineBytes), indent: indent, blank: trimmed == "", comment: comment}
}

// readBlock is the reference indentation mode: starting at the anchor line,
// it grows the block one line up and one line down at a time while lines
// are indented at least the minimum (anchor indent − 4·max_levels, 0 when
// max_levels is 0), taking at most one line at exactly the minimum indent
// per direction unless include_siblings (going up, header comments at that
// indent are allowed too when include_header), up to min(limit, max_lines,
// file length) lines; blank lines inherit the previous line's indent and are
// trimmed from both ends of the result.
func readBlock(ctx context.Context, f io.Reader, offset, limit int, o indentOptions) ([]string, error) {
	anchor := offset
	if o.hasAnchor {
		anchor = o.anchorLine
	}
	guard := limit
	if o.hasMaxLines {
		guard = o.maxLines
	}
	var recs []lineRecord
	if err := scanLines(ctx, f, func(line []byte, n int) bool {
		recs = append(recs, newLineRecord(line, n))
		return true
	}); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("failed to read file: %s", ioErrorText(err))
	}
	if len(recs) == 0 || anchor > len(recs) {
		return nil, errors.New("anchor_line exceeds file length")
	}
	ai := anchor - 1
	eff := make([]int, len(recs))
	prev := 0
	for i, r := range recs {
		if !r.blank {
			prev = r.indent
		}
		eff[i] = prev
	}
	anchorIndent := eff[ai]
	minIndent := 0
	if o.maxLevels != 0 {
		minIndent = max(anchorIndent-o.maxLevels*tabWidth, 0)
	}
	final := min(limit, guard, len(recs))
	if final == 1 {
		return []string{fmt.Sprintf("L%d: %s", recs[ai].number, recs[ai].display)}, nil
	}

	// out is a deque held as a window [lo, hi) of recs indexes that only
	// ever grows by one at either end, or shrinks back by the line just
	// added.
	up, down := ai-1, ai+1
	upAtMin, downAtMin := 0, 0
	lo, hi := ai, ai+1
	for hi-lo < final {
		progressed := 0
		if up >= 0 {
			if eff[up] >= minIndent {
				lo = up
				progressed++
				taken := up
				up--
				if eff[taken] == minIndent && !o.includeSiblings {
					headerComment := o.includeHeader && recs[taken].comment
					if headerComment || upAtMin == 0 {
						upAtMin++
					} else {
						lo++ // this line should not have been taken
						progressed--
						up = -1
					}
				}
				if hi-lo >= final {
					break
				}
			} else {
				up = -1
			}
		}
		if down < len(recs) {
			if eff[down] >= minIndent {
				hi = down + 1
				progressed++
				taken := down
				down++
				if eff[taken] == minIndent && !o.includeSiblings {
					if downAtMin > 0 {
						hi--
						progressed--
						down = len(recs)
					}
					downAtMin++
				}
			} else {
				down = len(recs)
			}
		}
		if progressed == 0 {
			break
		}
	}
	for lo < hi && recs[lo].blank {
		lo++
	}
	for hi > lo && recs[hi-1].blank {
		hi--
	}
	out := make([]string, 0, hi-lo)
	for _, r := range recs[lo:hi] {
		out = append(out, fmt.Sprintf("L%d: %s", r.number, r.display))
	}
	return out, nil
}
