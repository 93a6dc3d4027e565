package applypatch

import (
	"fmt"
	"slices"
	"strings"
)

// sourceLine is one line of a file with its own line ending ("\n",
// "\r\n", or "" for an unterminated last line).
type sourceLine struct {
	text   string
	ending string
}

// sourceFile is a file split into lines. Matching uses the texts without
// their endings, so CRLF files match LF patches; replaced lines get the
// file's preferred ending (that of its first line), untouched lines keep
// theirs. This is how codex-cli 0.169 handles line endings on every
// platform.
type sourceFile struct {
	lines     []sourceLine
	preferred string
}

func parseSource(contents string) sourceFile {
	f := sourceFile{}
	for {
		i := strings.IndexByte(contents, '\n')
		if i < 0 {
			break
		}
		line, ending := contents[:i], "\n"
		if t, ok := strings.CutSuffix(line, "\r"); ok {
			line, ending = t, "\r\n"
		}
		if f.preferred == "" {
			f.preferred = ending
		}
		f.lines = append(f.lines, sourceLine{text: line, ending: ending})
		contents = contents[i+1:]
	}
	if contents != "" {
		f.lines = append(f.lines, sourceLine{text: contents})
	}
	if f.preferred == "" {
		f.preferred = "\n"
	}
	return f
}

func (f sourceFile) texts() []string {
	out := make([]string, len(f.lines))
	for i, l := range f.lines {
		out[i] = l.text
	}
	return out
}

// String joins the lines with their endings.
func (f sourceFile) String() string {
	var b strings.Builder
	for _, l := range f.lines {
		b.WriteString(l.text)
		b.WriteString(l.ending)
	}
	return b.String()
}

// replacement replaces oldLen lines at start with newLines, which get the
// file's preferred ending. Chunks are split into one replacement per run
// of removed and added lines, so the context lines between them keep the
// file's text and ending, whatever pass matched them (codex-cli 0.169).
type replacement struct {
	start    int
	oldLen   int
	newLines []string
}

// applyReplacements applies sorted, non-overlapping replacements, then
// gives every line an ending: updated files always end with a newline.
func (f *sourceFile) applyReplacements(reps []replacement) {
	out := make([]sourceLine, 0, len(f.lines))
	src := 0
	for _, r := range reps {
		out = append(out, f.lines[src:r.start]...)
		for _, t := range r.newLines {
			out = append(out, sourceLine{text: t, ending: f.preferred})
		}
		src = r.start + r.oldLen
	}
	out = append(out, f.lines[src:]...)
	for i := range out {
		if out[i].ending == "" {
			out[i].ending = f.preferred
		}
	}
	f.lines = out
}

// splitRuns turns the chunk lines matched at start into replacements, one
// per run of removed and added lines.
func splitRuns(start int, ops []ChunkLine) []replacement {
	var reps []replacement
	pos := start
	var cur *replacement
	for _, op := range ops {
		if op.Op == LineContext {
			cur = nil
			pos++
			continue
		}
		if cur == nil {
			reps = append(reps, replacement{start: pos})
			cur = &reps[len(reps)-1]
		}
		if op.Op == LineDelete {
			cur.oldLen++
			pos++
		} else {
			cur.newLines = append(cur.newLines, op.Text)
		}
	}
	return reps
}

// dropTrailingEmpty is the reference's retry for a final newline written
// as a line of its own: the last old line (empty) goes, and the last new
// line goes too when it is empty. On chunk lines that means taking the old
// half of one line and possibly the new half of another.
func dropTrailingEmpty(ops []ChunkLine) []ChunkLine {
	ops = slices.Clone(ops)
	last := func(skip LineOp) int {
		for i := len(ops) - 1; i >= 0; i-- {
			if ops[i].Op != skip {
				return i
			}
		}
		return -1
	}
	oldIdx, newIdx := last(LineAdd), last(LineDelete)
	dropNew := newIdx >= 0 && ops[newIdx].Text == ""
	if dropNew && newIdx == oldIdx {
		return slices.Delete(ops, oldIdx, oldIdx+1)
	}
	if dropNew {
		// The last new line is an added line, or a context line before the
		// last removed line: it keeps only its old half.
		if ops[newIdx].Op == LineContext {
			ops[newIdx].Op = LineDelete
		} else {
			ops = slices.Delete(ops, newIdx, newIdx+1)
			if newIdx < oldIdx {
				oldIdx--
			}
		}
	}
	if ops[oldIdx].Op == LineContext {
		ops[oldIdx].Op = LineAdd
		return ops
	}
	return slices.Delete(ops, oldIdx, oldIdx+1)
}

// computeReplacements locates every chunk in lines (docs/tools.md §2.5, "the
// replacement algorithm", as codex-cli 0.169 runs it) and returns the
// replacements sorted by position. path is the absolute path used in error
// messages.
func computeReplacements(lines []string, path string, chunks []Chunk) ([]replacement, error) {
	var reps []replacement
	cursor := 0
	for _, c := range chunks {
		if c.Context != "" {
			i, ok := seekSequence(lines, []string{c.Context}, cursor, false)
			if !ok {
				return nil, fmt.Errorf("Failed to find context '%s' in %s", c.Context, path)
			}
			cursor = i + 1
		}
		oldLines := c.OldLines()
		if len(oldLines) == 0 {
			// Pure addition: appended at the end of the file.
			reps = append(reps, replacement{start: len(lines), newLines: c.NewLines()})
			continue
		}
		pattern, ops := oldLines, c.Lines
		start, ok := seekSequence(lines, pattern, cursor, c.EndOfFile)
		if !ok && pattern[len(pattern)-1] == "" {
			// A trailing empty old line often stands for the file's final
			// newline, which is not a line of its own here.
			pattern = pattern[:len(pattern)-1]
			ops = dropTrailingEmpty(ops)
			start, ok = seekSequence(lines, pattern, cursor, c.EndOfFile)
		}
		if !ok {
			return nil, fmt.Errorf("Failed to find expected lines in %s:\n%s", path, strings.Join(oldLines, "\n"))
		}
		reps = append(reps, splitRuns(start, ops)...)
		cursor = start + len(pattern)
	}
	slices.SortStableFunc(reps, func(a, b replacement) int { return a.start - b.start })
	for i := 1; i < len(reps); i++ {
		if reps[i].start < reps[i-1].start+reps[i-1].oldLen {
			// The reference applies such chunks over each other and
			// produces garbage; refuse instead.
			return nil, fmt.Errorf("Failed to apply the update to %s: two chunks change the same lines (near line %d); merge them into one chunk", path, reps[i].start+1)
		}
	}
	return reps, nil
}

// deriveNewContents applies chunks to original and returns the new file
// body.
func deriveNewContents(original, path string, chunks []Chunk) (string, error) {
	f := parseSource(original)
	reps, err := computeReplacements(f.texts(), path, chunks)
	if err != nil {
		return "", err
	}
	f.applyReplacements(reps)
	return f.String(), nil
}
