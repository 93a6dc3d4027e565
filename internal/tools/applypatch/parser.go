package applypatch

import (
	"fmt"
	"strings"
	"unicode"
)

// The markers of the patch language.
const (
	beginPatchMarker    = "*** Begin Patch"
	endPatchMarker      = "*** End Patch"
	environmentMarker   = "*** Environment ID:"
	addFileMarker       = "*** Add File: "
	deleteFileMarker    = "*** Delete File: "
	updateFileMarker    = "*** Update File: "
	moveToMarker        = "*** Move to: "
	endOfFileMarker     = "*** End of File"
	contextMarker       = "@@ "
	emptyContextMarker  = "@@"
	sectionMarkerPrefix = "***"
)

// HunkKind says what a hunk does to its file.
type HunkKind uint8

// The three file operations of the patch language.
const (
	// AddFile creates (or overwrites) a file with the given contents.
	AddFile HunkKind = iota + 1
	// DeleteFile removes an existing file.
	DeleteFile
	// UpdateFile edits an existing file in place, optionally moving it.
	UpdateFile
)

// String returns "add", "delete" or "update".
func (k HunkKind) String() string {
	switch k {
	case AddFile:
		return "add"
	case DeleteFile:
		return "delete"
	case UpdateFile:
		return "update"
	}
	return fmt.Sprintf("HunkKind(%d)", uint8(k))
}

// Patch is a parsed patch.
type Patch struct {
	// Text is the patch from "*** Begin Patch" to "*** End Patch", without
	// a heredoc wrapper, lines joined by "\n".
	Text string
	// EnvironmentID is the optional "*** Environment ID:" of a
	// multi-environment session; "" when absent.
	EnvironmentID string
	// Hunks are the file operations in order.
	Hunks []Hunk
}

// Hunk is one file operation.
type Hunk struct {
	// Kind is the operation.
	Kind HunkKind
	// Path is the file as written in the patch (relative to the cwd, or
	// absolute).
	Path string
	// Contents is the new file body of an AddFile hunk: each "+" line
	// followed by "\n".
	Contents string
	// MovePath is the "*** Move to:" destination of an UpdateFile hunk, ""
	// when the file stays where it is.
	MovePath string
	// Chunks are the edits of an UpdateFile hunk, in file order.
	Chunks []Chunk
	// Line is the 1-based line of the hunk header within Patch.Text.
	Line int
}

// LineOp marks a line of an update chunk.
type LineOp byte

// The three kinds of chunk lines.
const (
	// LineContext is a line kept as is (" " prefix, or an empty line).
	LineContext LineOp = ' '
	// LineAdd is an added line ("+" prefix).
	LineAdd LineOp = '+'
	// LineDelete is a removed line ("-" prefix).
	LineDelete LineOp = '-'
)

// ChunkLine is one body line of an update chunk.
type ChunkLine struct {
	// Op is context, add or delete.
	Op LineOp
	// Text is the line without its prefix character.
	Text string
}

// Chunk is one "@@" section of an UpdateFile hunk.
type Chunk struct {
	// Context is the text after "@@ " used to narrow down the position
	// (usually a class or function line); "" for a bare "@@" or none.
	Context string
	// Lines are the body lines in order.
	Lines []ChunkLine
	// EndOfFile is set by "*** End of File": the old lines must match at
	// the end of the file.
	EndOfFile bool
}

// OldLines returns the lines the chunk expects in the file (context and
// removed lines).
func (c Chunk) OldLines() []string {
	out := make([]string, 0, len(c.Lines))
	for _, l := range c.Lines {
		if l.Op != LineAdd {
			out = append(out, l.Text)
		}
	}
	return out
}

// NewLines returns the lines that replace OldLines (context and added
// lines).
func (c Chunk) NewLines() []string {
	out := make([]string, 0, len(c.Lines))
	for _, l := range c.Lines {
		if l.Op != LineDelete {
			out = append(out, l.Text)
		}
	}
	return out
}

// ParseError is a patch that does not follow the grammar. Its text is the
// reference's: "invalid patch: <message>" for the envelope, or "invalid
// hunk at line <n>, <message>" for a hunk.
type ParseError struct {
	// Line is the 1-based line of the offending hunk line, 0 for envelope
	// errors.
	Line int
	// Message says what is wrong.
	Message string
}

// Error returns the reference wording.
func (e *ParseError) Error() string {
	if e.Line == 0 {
		return "invalid patch: " + e.Message
	}
	return fmt.Sprintf("invalid hunk at line %d, %s", e.Line, e.Message)
}

func invalidPatch(msg string) error { return &ParseError{Message: msg} }

func invalidHunk(line int, format string, args ...any) error {
	return &ParseError{Line: line, Message: fmt.Sprintf(format, args...)}
}

// Parse parses patch text with the reference's leniency: the text is
// trimmed, markers are matched with surrounding whitespace ignored, and a
// patch wrapped in a heredoc (<<EOF, <<'EOF' or <<"EOF" ... EOF) is
// unwrapped. A patch with no hunks parses; NewPlan rejects it.
func Parse(text string) (*Patch, error) {
	lines := splitLines(strings.TrimSpace(text))
	patchLines, body, err := checkBoundariesLenient(lines)
	if err != nil {
		return nil, err
	}
	p := &Patch{Text: strings.Join(patchLines, "\n")}
	lineNo := 2
	envSeen := false
	for len(body) > 0 {
		rest, ok := strings.CutPrefix(strings.TrimSpace(body[0]), environmentMarker)
		if !ok {
			break
		}
		if envSeen {
			return nil, invalidPatch("apply_patch environment_id cannot be specified more than once")
		}
		id := strings.TrimSpace(rest)
		if id == "" {
			return nil, invalidPatch("apply_patch environment_id cannot be empty")
		}
		p.EnvironmentID, envSeen = id, true
		body = body[1:]
		lineNo++
	}
	for len(body) > 0 {
		h, n, err := parseOneHunk(body, lineNo)
		if err != nil {
			return nil, err
		}
		p.Hunks = append(p.Hunks, h)
		lineNo += n
		body = body[n:]
	}
	return p, nil
}

// splitLines splits like Rust's str::lines: on "\n", dropping a "\r"
// before it, with no empty last line for a trailing newline.
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	parts := strings.Split(s, "\n")
	if parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	for i := range parts {
		if i < len(parts)-1 || strings.HasSuffix(s, "\n") {
			parts[i] = strings.TrimSuffix(parts[i], "\r")
		}
	}
	return parts
}

func trimEnd(s string) string { return strings.TrimRightFunc(s, unicode.IsSpace) }

// checkBoundariesStrict checks the first and last lines and returns the
// lines between them.
func checkBoundariesStrict(lines []string) ([]string, error) {
	if len(lines) == 0 {
		// The reference reports the last line when there is no line at all.
		return nil, invalidPatch("The last line of the patch must be '*** End Patch'")
	}
	first := strings.TrimSpace(lines[0])
	last := strings.TrimSpace(lines[len(lines)-1])
	switch {
	case first == beginPatchMarker && last == endPatchMarker && len(lines) >= 2:
		return lines[1 : len(lines)-1], nil
	case first != beginPatchMarker:
		return nil, invalidPatch("The first line of the patch must be '*** Begin Patch'")
	default:
		return nil, invalidPatch("The last line of the patch must be '*** End Patch'")
	}
}

// checkBoundariesLenient also accepts a heredoc-wrapped patch. It returns
// the patch lines (markers included) and the hunk lines between them.
func checkBoundariesLenient(lines []string) (patchLines, body []string, err error) {
	body, strictErr := checkBoundariesStrict(lines)
	if strictErr == nil {
		return lines, body, nil
	}
	if len(lines) >= 4 {
		first, last := lines[0], lines[len(lines)-1]
		if (first == "<<EOF" || first == "<<'EOF'" || first == `<<"EOF"`) && strings.HasSuffix(last, "EOF") {
			inner := lines[1 : len(lines)-1]
			body, err := checkBoundariesStrict(inner)
			if err != nil {
				return nil, nil, err
			}
			return inner, body, nil
		}
	}
	return nil, nil, strictErr
}

// parseOneHunk parses the hunk at the start of lines; lineNo is the line
// number of lines[0]. It returns the hunk and the number of lines used.
func parseOneHunk(lines []string, lineNo int) (Hunk, int, error) {
	header := strings.TrimSpace(lines[0])
	if path, ok := strings.CutPrefix(header, addFileMarker); ok {
		var contents strings.Builder
		n := 1
		for _, l := range lines[1:] {
			text, ok := strings.CutPrefix(l, "+")
			if !ok {
				break
			}
			contents.WriteString(text)
			contents.WriteByte('\n')
			n++
		}
		return Hunk{Kind: AddFile, Path: path, Contents: contents.String(), Line: lineNo}, n, nil
	}
	if path, ok := strings.CutPrefix(header, deleteFileMarker); ok {
		return Hunk{Kind: DeleteFile, Path: path, Line: lineNo}, 1, nil
	}
	if path, ok := strings.CutPrefix(header, updateFileMarker); ok {
		h := Hunk{Kind: UpdateFile, Path: path, Line: lineNo}
		rest := lines[1:]
		n := 1
		if len(rest) > 0 {
			if dest, ok := strings.CutPrefix(trimEnd(rest[0]), moveToMarker); ok {
				h.MovePath = dest
				rest = rest[1:]
				n++
			}
		}
		// Unlike older references, 0.169 skips no blank lines here: an
		// empty or whitespace-only line is a context line of a chunk.
		for len(rest) > 0 {
			if strings.HasPrefix(rest[0], sectionMarkerPrefix) {
				break
			}
			c, cn, err := parseChunk(rest, lineNo+n, len(h.Chunks) == 0)
			if err != nil {
				return Hunk{}, 0, err
			}
			h.Chunks = append(h.Chunks, c)
			rest = rest[cn:]
			n += cn
		}
		if len(h.Chunks) == 0 {
			return Hunk{}, 0, invalidHunk(lineNo, "Update file hunk for path '%s' is empty", path)
		}
		return h, n, nil
	}
	return Hunk{}, 0, invalidHunk(lineNo,
		"'%s' is not a valid hunk header. Valid hunk headers: '*** Add File: {path}', '*** Delete File: {path}', '*** Update File: {path}'",
		header)
}

// parseChunk parses one chunk at the start of lines; lineNo is the line
// number of lines[0]. The first chunk of a file may omit its "@@" line.
func parseChunk(lines []string, lineNo int, allowMissingContext bool) (Chunk, int, error) {
	var c Chunk
	start := 0
	head := trimEnd(lines[0])
	if head == emptyContextMarker {
		start = 1
	} else if ctx, ok := strings.CutPrefix(head, contextMarker); ok {
		c.Context = ctx
		start = 1
	} else if !allowMissingContext {
		return Chunk{}, 0, invalidHunk(lineNo, "Expected update hunk to start with a @@ context marker, got: '%s'", lines[0])
	}
	if start >= len(lines) {
		return Chunk{}, 0, invalidHunk(lineNo+start, "Update hunk does not contain any lines")
	}
	parsed := 0
body:
	for _, l := range lines[start:] {
		if trimEnd(l) == endOfFileMarker {
			if parsed == 0 {
				return Chunk{}, 0, invalidHunk(lineNo+start, "Update hunk does not contain any lines")
			}
			c.EndOfFile = true
			parsed++
			break
		}
		switch {
		case l == "":
			c.Lines = append(c.Lines, ChunkLine{Op: LineContext})
		case l[0] == ' ' || l[0] == '+' || l[0] == '-':
			c.Lines = append(c.Lines, ChunkLine{Op: LineOp(l[0]), Text: l[1:]})
		default:
			if parsed == 0 {
				return Chunk{}, 0, invalidHunk(lineNo+start,
					"Unexpected line found in update hunk: '%s'. Every line should start with ' ' (context line), '+' (added line), or '-' (removed line)", l)
			}
			// The start of the next chunk or hunk.
			break body
		}
		parsed++
	}
	return c, parsed + start, nil
}

// String renders the patch in canonical form: every chunk gets an "@@"
// line, and the text ends with "*** End Patch" and no newline. Parsing the
// result gives back an equal patch (Text aside).
func (p *Patch) String() string {
	var b strings.Builder
	b.WriteString(beginPatchMarker + "\n")
	if p.EnvironmentID != "" {
		b.WriteString(environmentMarker + " " + p.EnvironmentID + "\n")
	}
	for _, h := range p.Hunks {
		switch h.Kind {
		case AddFile:
			b.WriteString(addFileMarker + h.Path + "\n")
			for _, l := range splitContents(h.Contents) {
				b.WriteString("+" + l + "\n")
			}
		case DeleteFile:
			b.WriteString(deleteFileMarker + h.Path + "\n")
		case UpdateFile:
			b.WriteString(updateFileMarker + h.Path + "\n")
			if h.MovePath != "" {
				b.WriteString(moveToMarker + h.MovePath + "\n")
			}
			for _, c := range h.Chunks {
				if c.Context != "" {
					b.WriteString(contextMarker + c.Context + "\n")
				} else {
					b.WriteString(emptyContextMarker + "\n")
				}
				for _, l := range c.Lines {
					b.WriteByte(byte(l.Op))
					b.WriteString(l.Text + "\n")
				}
				if c.EndOfFile {
					b.WriteString(endOfFileMarker + "\n")
				}
			}
		}
	}
	b.WriteString(endPatchMarker)
	return b.String()
}

// splitContents splits an AddFile body into its lines.
func splitContents(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}
