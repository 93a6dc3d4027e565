package config

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// compact_prompt sets the compaction instruction; without it,
// experimental_compact_prompt_file names a file holding it; the inline
// key wins, as in Codex; an unreadable or blank file fails the load.
func TestCompactPrompt(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "compact.md")
	require.NoError(t, os.WriteFile(file, []byte("\n  Summarize from the file.\n"), 0o600))
	blank := filepath.Join(dir, "blank.md")
	require.NoError(t, os.WriteFile(blank, []byte(" \n\t\n"), 0o600))

	cfg, warnings := mustLoad(t, Sources{File: writeConfig(t, `compact_prompt = "Summarize inline."`)})
	require.Equal(t, "Summarize inline.", cfg.CompactPrompt)
	require.Empty(t, warnings, "compact_prompt is a key appserver uses")

	cfg, warnings = mustLoad(t, Sources{File: writeConfig(t, `experimental_compact_prompt_file = "`+file+`"`)})
	require.Equal(t, "Summarize from the file.", cfg.CompactPrompt)
	require.Empty(t, warnings)

	cfg, _ = mustLoad(t, Sources{File: writeConfig(t, "compact_prompt = \"Summarize inline.\"\nexperimental_compact_prompt_file = \""+file+"\"")})
	require.Equal(t, "Summarize inline.", cfg.CompactPrompt)

	cfg, _ = mustLoad(t, Sources{})
	require.Empty(t, cfg.CompactPrompt)

	msg := loadError(t, Sources{File: writeConfig(t, `experimental_compact_prompt_file = "`+blank+`"`)})
	require.Contains(t, msg, "experimental_compact_prompt_file")
	require.Contains(t, msg, "empty")
	msg = loadError(t, Sources{File: writeConfig(t, `experimental_compact_prompt_file = "`+filepath.Join(dir, "missing.md")+`"`)})
	require.Contains(t, msg, "cannot read")
}
