package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
)

// The fs/* methods: the host's file system as a client sees it
// (docs/protocol.md §4.34).
const (
	// MethodFsReadFile reads a file, base64-encoded.
	MethodFsReadFile = "fs/readFile"
	// MethodFsWriteFile writes a file from base64 data.
	MethodFsWriteFile = "fs/writeFile"
	// MethodFsCreateDirectory makes a directory.
	MethodFsCreateDirectory = "fs/createDirectory"
	// MethodFsGetMetadata describes a path.
	MethodFsGetMetadata = "fs/getMetadata"
	// MethodFsReadDirectory lists a directory.
	MethodFsReadDirectory = "fs/readDirectory"
	// MethodFsRemove removes a file or a directory tree.
	MethodFsRemove = "fs/remove"
	// MethodFsCopy copies a file, a symlink or a directory tree.
	MethodFsCopy = "fs/copy"
	// MethodFsWatch starts fs/changed notifications for a path.
	MethodFsWatch = "fs/watch"
	// MethodFsUnwatch ends a watch.
	MethodFsUnwatch = "fs/unwatch"
	// NotificationFsChanged says that something under a watched path
	// changed.
	NotificationFsChanged = "fs/changed"
)

// AbsolutePath is an absolute path a client names, lexically cleaned
// ("..", "." and repeated or trailing slashes taken out) when decoded; a
// relative or empty one does not decode, as the reference's
// AbsolutePathBuf does not.
type AbsolutePath string

// errNotAbsolute is the reference's text for a relative path.
var errNotAbsolute = errors.New("AbsolutePathBuf deserialized without a base path")

// UnmarshalJSON accepts a JSON string holding an absolute path.
func (p *AbsolutePath) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("invalid type: %s, expected path string", serdeKind(b))
	}
	if !filepath.IsAbs(s) {
		return errNotAbsolute
	}
	*p = AbsolutePath(filepath.Clean(s))
	return nil
}

// serdeKind names a JSON value that is not a string as the reference's
// decoder does in its type errors.
func serdeKind(b []byte) string {
	b = bytes.TrimSpace(b)
	switch {
	case len(b) == 0:
		return "nothing"
	case b[0] == '{':
		return "map"
	case b[0] == '[':
		return "sequence"
	case string(b) == "null":
		return "null"
	case string(b) == "true" || string(b) == "false":
		return fmt.Sprintf("boolean `%s`", b)
	case bytes.ContainsAny(b, ".eE"):
		return fmt.Sprintf("floating point `%s`", b)
	}
	return fmt.Sprintf("integer `%s`", b)
}

// FsReadFileParams are the params of fs/readFile.
type FsReadFileParams struct {
	// Path is the file; required.
	Path AbsolutePath `json:"path"`
}

// FsReadFileResult is the result of fs/readFile.
type FsReadFileResult struct {
	// DataBase64 is the content, standard base64 with padding.
	DataBase64 string `json:"dataBase64"`
}

// FsWriteFileParams are the params of fs/writeFile.
type FsWriteFileParams struct {
	// Path is the file, created or replaced; required.
	Path AbsolutePath `json:"path"`
	// DataBase64 is the content, standard base64 with padding; required.
	DataBase64 string `json:"dataBase64"`
}

// FsWriteFileResult is the (empty) result of fs/writeFile.
type FsWriteFileResult struct{}

// FsCreateDirectoryParams are the params of fs/createDirectory.
type FsCreateDirectoryParams struct {
	// Path is the directory; required.
	Path AbsolutePath `json:"path"`
	// Recursive makes the missing parents too (and accepts an existing
	// directory); null or absent means true.
	Recursive *bool `json:"recursive,omitempty"`
}

// FsCreateDirectoryResult is the (empty) result of fs/createDirectory.
type FsCreateDirectoryResult struct{}

// FsGetMetadataParams are the params of fs/getMetadata.
type FsGetMetadataParams struct {
	// Path is what to describe; required.
	Path AbsolutePath `json:"path"`
}

// FsGetMetadataResult is the result of fs/getMetadata: what the path
// resolves to, and whether it is itself a symlink.
type FsGetMetadataResult struct {
	// IsDirectory is true when the path resolves to a directory.
	IsDirectory bool `json:"isDirectory"`
	// IsFile is true when the path resolves to a regular file.
	IsFile bool `json:"isFile"`
	// IsSymlink is true when the path itself is a symlink.
	IsSymlink bool `json:"isSymlink"`
	// CreatedAtMs is the creation time (ms), or 0 when not known.
	CreatedAtMs int64 `json:"createdAtMs"`
	// ModifiedAtMs is the modification time (ms), or 0 when not known.
	ModifiedAtMs int64 `json:"modifiedAtMs"`
}

// FsReadDirectoryParams are the params of fs/readDirectory.
type FsReadDirectoryParams struct {
	// Path is the directory; required.
	Path AbsolutePath `json:"path"`
}

// FsReadDirectoryEntry is one entry of a directory.
type FsReadDirectoryEntry struct {
	// FileName is the entry's name (no directory part).
	FileName string `json:"fileName"`
	// IsDirectory is true when the entry resolves to a directory.
	IsDirectory bool `json:"isDirectory"`
	// IsFile is true when the entry resolves to a regular file.
	IsFile bool `json:"isFile"`
}

// FsReadDirectoryResult is the result of fs/readDirectory.
type FsReadDirectoryResult struct {
	// Entries are the directory's entries.
	Entries List[FsReadDirectoryEntry] `json:"entries"`
}

// FsRemoveParams are the params of fs/remove.
type FsRemoveParams struct {
	// Path is what to remove (a symlink itself, not its target);
	// required.
	Path AbsolutePath `json:"path"`
	// Recursive removes a directory with what it holds; null or absent
	// means true.
	Recursive *bool `json:"recursive,omitempty"`
	// Force makes a missing path a success; null or absent means true.
	Force *bool `json:"force,omitempty"`
}

// FsRemoveResult is the (empty) result of fs/remove.
type FsRemoveResult struct{}

// FsCopyParams are the params of fs/copy.
type FsCopyParams struct {
	// SourcePath is what to copy; required.
	SourcePath AbsolutePath `json:"sourcePath"`
	// DestinationPath is where the copy goes; required.
	DestinationPath AbsolutePath `json:"destinationPath"`
	// Recursive must be true to copy a directory.
	Recursive bool `json:"recursive,omitempty"`
}

// FsCopyResult is the (empty) result of fs/copy.
type FsCopyResult struct{}

// FsWatchParams are the params of fs/watch.
type FsWatchParams struct {
	// WatchID names the watch on this connection; required.
	WatchID string `json:"watchId"`
	// Path is the file or directory to watch (a directory's direct
	// entries); it need not exist yet; required.
	Path AbsolutePath `json:"path"`
}

// FsWatchResult is the result of fs/watch.
type FsWatchResult struct {
	// Path is the watched path, as cleaned.
	Path string `json:"path"`
}

// FsUnwatchParams are the params of fs/unwatch.
type FsUnwatchParams struct {
	// WatchID is the watch to end; an unknown one is not an error.
	WatchID string `json:"watchId"`
}

// FsUnwatchResult is the (empty) result of fs/unwatch.
type FsUnwatchResult struct{}

// FsChangedNotification is fs/changed: paths under a watch changed.
type FsChangedNotification struct {
	// WatchID is the watch.
	WatchID string `json:"watchId"`
	// ChangedPaths are the changed paths, absolute and sorted.
	ChangedPaths List[string] `json:"changedPaths"`
}

// The fuzzy file search methods (docs/protocol.md §4.35).
const (
	// MethodFuzzyFileSearch runs one search.
	MethodFuzzyFileSearch = "fuzzyFileSearch"
	// MethodFuzzyFileSearchSessionStart opens a search session over
	// roots (experimental).
	MethodFuzzyFileSearchSessionStart = "fuzzyFileSearch/sessionStart"
	// MethodFuzzyFileSearchSessionUpdate sets a session's query
	// (experimental).
	MethodFuzzyFileSearchSessionUpdate = "fuzzyFileSearch/sessionUpdate"
	// MethodFuzzyFileSearchSessionStop ends a session (experimental).
	MethodFuzzyFileSearchSessionStop = "fuzzyFileSearch/sessionStop"
	// NotificationFuzzyFileSearchSessionUpdated carries a session's
	// results for its query.
	NotificationFuzzyFileSearchSessionUpdated = "fuzzyFileSearch/sessionUpdated"
	// NotificationFuzzyFileSearchSessionCompleted says a session has
	// nothing more to send for its query.
	NotificationFuzzyFileSearchSessionCompleted = "fuzzyFileSearch/sessionCompleted"
)

// FuzzyFileSearchParams are the params of fuzzyFileSearch.
type FuzzyFileSearchParams struct {
	// Query is the pattern; required.
	Query string `json:"query"`
	// Roots are the directories to search; required.
	Roots []string `json:"roots"`
	// CancellationToken, when set, cancels an earlier search of the same
	// connection with the same token, which then answers no files.
	CancellationToken *string `json:"cancellationToken,omitempty"`
}

// The match types of a fuzzy file search result.
const (
	// FuzzyMatchFile is a file (anything but a directory).
	FuzzyMatchFile = "file"
	// FuzzyMatchDirectory is a directory.
	FuzzyMatchDirectory = "directory"
)

// FuzzyFileSearchResult is one match. Its JSON keys are snake_case, as
// the reference writes them.
type FuzzyFileSearchResult struct {
	// Root is the search root the path is relative to.
	Root string `json:"root"`
	// Path is the match, relative to Root.
	Path string `json:"path"`
	// MatchType is FuzzyMatchFile or FuzzyMatchDirectory.
	MatchType string `json:"match_type"`
	// FileName is the last component of Path.
	FileName string `json:"file_name"`
	// Score ranks the match, higher first.
	Score uint32 `json:"score"`
	// Indices are the positions (in characters) of Path that matched,
	// ascending, or null.
	Indices []uint32 `json:"indices"`
}

// FuzzyFileSearchResponse is the result of fuzzyFileSearch.
type FuzzyFileSearchResponse struct {
	// Files are the matches, best first.
	Files List[FuzzyFileSearchResult] `json:"files"`
}

// FuzzyFileSearchSessionStartParams are the params of
// fuzzyFileSearch/sessionStart.
type FuzzyFileSearchSessionStartParams struct {
	// SessionID names the session on this connection; required.
	SessionID string `json:"sessionId"`
	// Roots are the directories to search; required.
	Roots []string `json:"roots"`
}

// FuzzyFileSearchSessionStartResult is the (empty) result of
// fuzzyFileSearch/sessionStart.
type FuzzyFileSearchSessionStartResult struct{}

// FuzzyFileSearchSessionUpdateParams are the params of
// fuzzyFileSearch/sessionUpdate.
type FuzzyFileSearchSessionUpdateParams struct {
	// SessionID is the session; required.
	SessionID string `json:"sessionId"`
	// Query is the new pattern; required.
	Query string `json:"query"`
}

// FuzzyFileSearchSessionUpdateResult is the (empty) result of
// fuzzyFileSearch/sessionUpdate.
type FuzzyFileSearchSessionUpdateResult struct{}

// FuzzyFileSearchSessionStopParams are the params of
// fuzzyFileSearch/sessionStop.
type FuzzyFileSearchSessionStopParams struct {
	// SessionID is the session; an unknown one is not an error.
	SessionID string `json:"sessionId"`
}

// FuzzyFileSearchSessionStopResult is the (empty) result of
// fuzzyFileSearch/sessionStop.
type FuzzyFileSearchSessionStopResult struct{}

// FuzzyFileSearchSessionUpdatedNotification is
// fuzzyFileSearch/sessionUpdated: a session's matches for a query.
type FuzzyFileSearchSessionUpdatedNotification struct {
	// SessionID is the session.
	SessionID string `json:"sessionId"`
	// Query is the query the files match.
	Query string `json:"query"`
	// Files are the matches, best first.
	Files List[FuzzyFileSearchResult] `json:"files"`
}

// FuzzyFileSearchSessionCompletedNotification is
// fuzzyFileSearch/sessionCompleted.
type FuzzyFileSearchSessionCompletedNotification struct {
	// SessionID is the session.
	SessionID string `json:"sessionId"`
}
