package applypatch

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func ctxLine(s string) ChunkLine { return ChunkLine{Op: LineContext, Text: s} }
func addLine(s string) ChunkLine { return ChunkLine{Op: LineAdd, Text: s} }
func delLine(s string) ChunkLine { return ChunkLine{Op: LineDelete, Text: s} }

const headerHelp = "Valid hunk headers: '*** Add File: {path}', '*** Delete File: {path}', '*** Update File: {path}'"

func TestParse(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		hunks []Hunk
		env   string
		text  string // expected Patch.Text when set
	}{
		{
			name:  "add file",
			in:    "*** Begin Patch\n*** Add File: a/b.txt\n+one\n+\n+three\n*** End Patch",
			hunks: []Hunk{{Kind: AddFile, Path: "a/b.txt", Contents: "one\n\nthree\n", Line: 2}},
		},
		{
			name:  "add file without lines",
			in:    "*** Begin Patch\n*** Add File: empty.txt\n*** End Patch",
			hunks: []Hunk{{Kind: AddFile, Path: "empty.txt", Line: 2}},
		},
		{
			name:  "add keeps trailing whitespace of lines",
			in:    "*** Begin Patch\n*** Add File: q.txt\n+x  \n+  \n*** End Patch",
			hunks: []Hunk{{Kind: AddFile, Path: "q.txt", Contents: "x  \n  \n", Line: 2}},
		},
		{
			name:  "delete file",
			in:    "*** Begin Patch\n*** Delete File: gone.txt\n*** End Patch",
			hunks: []Hunk{{Kind: DeleteFile, Path: "gone.txt", Line: 2}},
		},
		{
			name: "update with move, context header and every line kind",
			in: "*** Begin Patch\n*** Update File: src/a.py\n*** Move to: src/b.py\n@@ def f():\n" +
				" keep\n-old\n+new\n\n*** End Patch",
			hunks: []Hunk{{Kind: UpdateFile, Path: "src/a.py", MovePath: "src/b.py", Line: 2, Chunks: []Chunk{{
				Context: "def f():",
				Lines:   []ChunkLine{ctxLine("keep"), delLine("old"), addLine("new"), ctxLine("")},
			}}}},
		},
		{
			name: "first chunk may omit @@",
			in:   "*** Begin Patch\n*** Update File: f.py\n import foo\n+bar\n*** End Patch",
			hunks: []Hunk{{Kind: UpdateFile, Path: "f.py", Line: 2, Chunks: []Chunk{{
				Lines: []ChunkLine{ctxLine("import foo"), addLine("bar")},
			}}}},
		},
		{
			name: "several chunks, blank lines are context lines, end of file marker",
			in: "*** Begin Patch\n*** Update File: f\n@@\n-a\n+A\n\n   \n@@ ctx\n-z\n+Z\n*** End of File\n" +
				"*** Add File: g\n+g\n*** End Patch",
			hunks: []Hunk{
				{Kind: UpdateFile, Path: "f", Line: 2, Chunks: []Chunk{
					// A whitespace-only line inside a chunk is a context line.
					{Lines: []ChunkLine{delLine("a"), addLine("A"), ctxLine(""), ctxLine("  ")}},
					{Context: "ctx", Lines: []ChunkLine{delLine("z"), addLine("Z")}, EndOfFile: true},
				}},
				{Kind: AddFile, Path: "g", Contents: "g\n", Line: 12},
			},
		},
		{
			name: "pure addition chunk",
			in:   "*** Begin Patch\n*** Update File: f\n@@\n+line\n*** End of File\n*** End Patch",
			hunks: []Hunk{{Kind: UpdateFile, Path: "f", Line: 2, Chunks: []Chunk{
				{Lines: []ChunkLine{addLine("line")}, EndOfFile: true},
			}}},
		},
		{
			name: "a line that is not a body line ends the chunk; @@ starts the next",
			in:   "*** Begin Patch\n*** Update File: f\n@@\n-a\n@@ b\n-b\n*** End Patch",
			hunks: []Hunk{{Kind: UpdateFile, Path: "f", Line: 2, Chunks: []Chunk{
				{Lines: []ChunkLine{delLine("a")}},
				{Context: "b", Lines: []ChunkLine{delLine("b")}},
			}}},
		},
		{
			name: "whitespace around text and markers",
			in:   "\n\n  *** Begin Patch  \n   *** Add File: x.txt   \n+x\n  *** End Patch \n\n",
			hunks: []Hunk{
				{Kind: AddFile, Path: "x.txt", Contents: "x\n", Line: 2},
			},
			text: "*** Begin Patch  \n   *** Add File: x.txt   \n+x\n  *** End Patch",
		},
		{
			name:  "header whitespace before the path is part of the path",
			in:    "*** Begin Patch\n*** Add File:   spaced.txt  \n+d\n*** End Patch",
			hunks: []Hunk{{Kind: AddFile, Path: "  spaced.txt", Contents: "d\n", Line: 2}},
		},
		{
			name: "move path: trailing whitespace trimmed, leading kept",
			in:   "*** Begin Patch\n*** Update File: m\n*** Move to:  n.txt  \n@@\n-a\n+b\n*** End Patch",
			hunks: []Hunk{{Kind: UpdateFile, Path: "m", MovePath: " n.txt", Line: 2, Chunks: []Chunk{
				{Lines: []ChunkLine{delLine("a"), addLine("b")}},
			}}},
		},
		{
			name: "an indented move line is a context line",
			in:   "*** Begin Patch\n*** Update File: m\n  *** Move to: n\n-a\n*** End Patch",
			hunks: []Hunk{{Kind: UpdateFile, Path: "m", Line: 2, Chunks: []Chunk{
				{Lines: []ChunkLine{ctxLine(" *** Move to: n"), delLine("a")}},
			}}},
		},
		{
			name: "@@ lines and the end-of-file marker ignore trailing whitespace",
			in:   "*** Begin Patch\n*** Update File: m\n@@  \n-a\n@@ ctx  \n-b\n*** End of File  \n*** End Patch",
			hunks: []Hunk{{Kind: UpdateFile, Path: "m", Line: 2, Chunks: []Chunk{
				{Lines: []ChunkLine{delLine("a")}},
				{Context: "ctx", Lines: []ChunkLine{delLine("b")}, EndOfFile: true},
			}}},
		},
		{
			name: "an indented end-of-file marker is a context line",
			in:   "*** Begin Patch\n*** Update File: m\n@@\n-a\n  *** End of File\n*** End Patch",
			hunks: []Hunk{{Kind: UpdateFile, Path: "m", Line: 2, Chunks: []Chunk{
				{Lines: []ChunkLine{delLine("a"), ctxLine(" *** End of File")}},
			}}},
		},
		{
			name: "CRLF patch",
			in:   "*** Begin Patch\r\n*** Update File: m\r\n@@\r\n-a\r\n+b\r\n*** End Patch\r\n",
			hunks: []Hunk{{Kind: UpdateFile, Path: "m", Line: 2, Chunks: []Chunk{
				{Lines: []ChunkLine{delLine("a"), addLine("b")}},
			}}},
			text: "*** Begin Patch\n*** Update File: m\n@@\n-a\n+b\n*** End Patch",
		},
		{
			name:  "heredoc <<EOF",
			in:    "<<EOF\n*** Begin Patch\n*** Delete File: d\n*** End Patch\nEOF\n",
			hunks: []Hunk{{Kind: DeleteFile, Path: "d", Line: 2}},
			text:  "*** Begin Patch\n*** Delete File: d\n*** End Patch",
		},
		{
			name:  "heredoc <<'EOF'",
			in:    "<<'EOF'\n*** Begin Patch\n*** Delete File: d\n*** End Patch\nEOF",
			hunks: []Hunk{{Kind: DeleteFile, Path: "d", Line: 2}},
		},
		{
			name:  `heredoc <<"EOF"`,
			in:    "<<\"EOF\"\n*** Begin Patch\n*** Delete File: d\n*** End Patch\nEOF",
			hunks: []Hunk{{Kind: DeleteFile, Path: "d", Line: 2}},
		},
		{
			name:  "heredoc end only has to end with EOF",
			in:    "<<EOF\n*** Begin Patch\n*** Delete File: d\n*** End Patch\n  xEOF",
			hunks: []Hunk{{Kind: DeleteFile, Path: "d", Line: 2}},
		},
		{
			name:  "environment id",
			in:    "*** Begin Patch\n*** Environment ID:  dev-1 \n*** Delete File: d\n*** End Patch",
			env:   "dev-1",
			hunks: []Hunk{{Kind: DeleteFile, Path: "d", Line: 3}},
		},
		{
			name: "empty patch parses",
			in:   "*** Begin Patch\n*** End Patch",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse(tt.in)
			require.NoError(t, err)
			assert.Equal(t, tt.hunks, p.Hunks)
			assert.Equal(t, tt.env, p.EnvironmentID)
			if tt.text != "" {
				assert.Equal(t, tt.text, p.Text)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"empty text", "", "invalid patch: The last line of the patch must be '*** End Patch'"},
		{"only whitespace", " \n\t\n", "invalid patch: The last line of the patch must be '*** End Patch'"},
		{"not a patch", "garbage", "invalid patch: The first line of the patch must be '*** Begin Patch'"},
		{"missing end", "*** Begin Patch\n*** Delete File: d", "invalid patch: The last line of the patch must be '*** End Patch'"},
		{"only begin", "*** Begin Patch", "invalid patch: The last line of the patch must be '*** End Patch'"},
		{"only end", "*** End Patch", "invalid patch: The first line of the patch must be '*** Begin Patch'"},
		{"heredoc with mismatched quotes", "<<\"EOF'\n*** Begin Patch\n*** Delete File: d\n*** End Patch\nEOF",
			"invalid patch: The first line of the patch must be '*** Begin Patch'"},
		{"heredoc without end patch", "<<EOF\n*** Begin Patch\n*** Update File: f\nEOF\n",
			"invalid patch: The last line of the patch must be '*** End Patch'"},
		{"heredoc too short", "<<EOF\n*** Begin Patch\nEOF",
			"invalid patch: The first line of the patch must be '*** Begin Patch'"},
		{"unknown hunk header", "*** Begin Patch\n*** Frob File: a.txt\n*** End Patch",
			"invalid hunk at line 2, '*** Frob File: a.txt' is not a valid hunk header. " + headerHelp},
		{"blank line between hunks", "*** Begin Patch\n*** Add File: b\n+x\n\n*** Add File: c\n+y\n*** End Patch",
			"invalid hunk at line 4, '' is not a valid hunk header. " + headerHelp},
		{"header without path", "*** Begin Patch\n*** Add File: \n*** End Patch",
			"invalid hunk at line 2, '*** Add File:' is not a valid hunk header. " + headerHelp},
		{"empty update", "*** Begin Patch\n*** Update File: test.py\n*** End Patch",
			"invalid hunk at line 2, Update file hunk for path 'test.py' is empty"},
		{"update with only a move", "*** Begin Patch\n*** Update File: a\n*** Move to: b\n*** End Patch",
			"invalid hunk at line 2, Update file hunk for path 'a' is empty"},
		{"chunk without lines", "*** Begin Patch\n*** Update File: f\n@@\n*** End Patch",
			"invalid hunk at line 4, Update hunk does not contain any lines"},
		{"chunk with only end of file", "*** Begin Patch\n*** Update File: f\n@@\n*** End of File\n*** End Patch",
			"invalid hunk at line 4, Update hunk does not contain any lines"},
		{"@@ as the last line", "*** Begin Patch\n*** Update File: f\n-a\n@@\n*** End Patch",
			"invalid hunk at line 5, Update hunk does not contain any lines"},
		{"unexpected first line", "*** Begin Patch\n*** Update File: m.txt\n*foo\n*** End Patch",
			"invalid hunk at line 3, Unexpected line found in update hunk: '*foo'. Every line should start with ' ' (context line), '+' (added line), or '-' (removed line)"},
		{"two @@ lines in a row", "*** Begin Patch\n*** Update File: m.py\n@@ class B:\n@@   def f():\n-    pass\n+    return 1\n*** End Patch",
			"invalid hunk at line 4, Unexpected line found in update hunk: '@@   def f():'. Every line should start with ' ' (context line), '+' (added line), or '-' (removed line)"},
		{"second chunk without @@", "*** Begin Patch\n*** Update File: f\n@@\n-a\n\tb\n*** End Patch",
			"invalid hunk at line 5, Expected update hunk to start with a @@ context marker, got: '\tb'"},
		{"whitespace line after a chunk is not skipped", "*** Begin Patch\n*** Update File: f\n@@\n-x\n\t\n@@\n-a\n*** End Patch",
			"invalid hunk at line 5, Expected update hunk to start with a @@ context marker, got: '\t'"},
		{"tab line first", "*** Begin Patch\n*** Update File: f\n\t\n-a\n*** End Patch",
			"invalid hunk at line 3, Unexpected line found in update hunk: '\t'. Every line should start with ' ' (context line), '+' (added line), or '-' (removed line)"},
		{"environment id twice", "*** Begin Patch\n*** Environment ID: a\n*** Environment ID: b\n*** End Patch",
			"invalid patch: apply_patch environment_id cannot be specified more than once"},
		{"empty environment id", "*** Begin Patch\n*** Environment ID:\n*** Delete File: d\n*** End Patch",
			"invalid patch: apply_patch environment_id cannot be empty"},
		{"environment id after a hunk", "*** Begin Patch\n*** Add File: c\n+x\n*** Environment ID: foo\n*** End Patch",
			"invalid hunk at line 4, '*** Environment ID: foo' is not a valid hunk header. " + headerHelp},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse(tt.in)
			require.Error(t, err, "parsed: %+v", p)
			var pe *ParseError
			require.True(t, errors.As(err, &pe))
			assert.Equal(t, tt.want, err.Error())
		})
	}
}

func TestPatchStringRoundTrip(t *testing.T) {
	in := "<<'EOF'\n*** Begin Patch\n*** Environment ID: e\n*** Add File: a\n+1\n+\n*** Delete File: b\n" +
		"*** Update File: c\n*** Move to: d\n x\n-y\n+z\n\n@@ ctx\n-q\n*** End of File\n*** End Patch\nEOF"
	p, err := Parse(in)
	require.NoError(t, err)
	rendered := p.String()
	assert.Equal(t, "*** Begin Patch\n*** Environment ID: e\n*** Add File: a\n+1\n+\n*** Delete File: b\n"+
		"*** Update File: c\n*** Move to: d\n@@\n x\n-y\n+z\n \n@@ ctx\n-q\n*** End of File\n*** End Patch", rendered)
	again, err := Parse(rendered)
	require.NoError(t, err)
	assert.Equal(t, p.Hunks, again.Hunks)
	assert.Equal(t, p.EnvironmentID, again.EnvironmentID)
}

func TestChunkOldNewLines(t *testing.T) {
	c := Chunk{Lines: []ChunkLine{ctxLine("a"), delLine("b"), addLine("c"), ctxLine("")}}
	assert.Equal(t, []string{"a", "b", ""}, c.OldLines())
	assert.Equal(t, []string{"a", "c", ""}, c.NewLines())
}
