package skills

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Size limits of tool results, counted on the exact bytes of the JSON text
// the model receives (escaping included).
const (
	// MaxResultBytes is the hard cap of every skills tool result.
	MaxResultBytes = 8192
	// PageBudgetBytes is what pages are filled up to (the reference's 8 000
	// bytes), leaving headroom under MaxResultBytes.
	PageBudgetBytes = 8000
	// MaxPageSkills is the most skills one skills.list page holds.
	MaxPageSkills = 20
	// MaxListedSkills is how many catalog entries skills.list can reach;
	// more set truncated.
	MaxListedSkills = 100
)

// ListedSkill is one skill of a skills.list page.
type ListedSkill struct {
	// Authority is the provider to pass back to skills.read.
	Authority Authority `json:"authority"`
	// Package is the opaque package id to pass back to skills.read.
	Package string `json:"package"`
	// Name is the skill name (at most 256 bytes).
	Name string `json:"name"`
	// Description says when to use the skill (at most 512 bytes).
	Description string `json:"description"`
	// MainResource is the first resource to read (the SKILL.md).
	MainResource string `json:"main_resource"`
}

// ListResult is the skills.list result:
// {"skills":[...],"next_cursor":string|null,"warnings":[...],"truncated":bool}.
type ListResult struct {
	// Skills is this page (never null).
	Skills []ListedSkill `json:"skills"`
	// NextCursor continues the listing; nil when this is the last page.
	NextCursor *string `json:"next_cursor"`
	// Warnings are at most four catalog problems (never null).
	Warnings []string `json:"warnings"`
	// Truncated is true when more exists than this page shows, or when
	// something was cut or skipped.
	Truncated bool `json:"truncated"`
}

// ReadResult is the skills.read result:
// {"resource","contents","next_cursor":string|null,"truncated":bool}.
type ReadResult struct {
	// Resource is the resource id that was read.
	Resource string `json:"resource"`
	// Contents is this piece of the resource text; the pieces of all pages
	// concatenate to the resource byte for byte.
	Contents string `json:"contents"`
	// NextCursor continues the read; nil at the end of the resource.
	NextCursor *string `json:"next_cursor"`
	// Truncated is true when more contents follow.
	Truncated bool `json:"truncated"`
}

// marshalResult encodes a result the way it is sent: compact JSON without
// HTML escaping (the escaping budget below assumes exactly this encoder).
func marshalResult(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// jsonRuneCost is the number of bytes r takes inside a JSON string as
// marshalResult writes it: two for the short escapes, six for other control
// characters and for U+2028/U+2029 (which encoding/json always escapes),
// else its UTF-8 length.
func jsonRuneCost(r rune) int {
	switch r {
	case '"', '\\', '\b', '\f', '\n', '\r', '\t':
		return 2
	case '\u2028', '\u2029':
		return 6
	}
	if r < 0x20 {
		return 6
	}
	return utf8.RuneLen(r)
}

// jsonStringCost is the encoded size of s as a JSON string, quotes included.
func jsonStringCost(s string) int {
	n := 2
	for len(s) > 0 {
		r, size := utf8.DecodeRuneInString(s)
		if r == utf8.RuneError && size == 1 {
			n += 6
		} else {
			n += jsonRuneCost(r)
		}
		s = s[size:]
	}
	return n
}

// pageRead cuts the piece of text that starts at offset and fits the page
// budget. The caller guarantees text is valid UTF-8 and offset is a rune
// boundary within it. cursorFor encodes the cursor of the next piece.
func pageRead(resource, text string, offset int, cursorFor func(end int) string) (ReadResult, []byte, error) {
	if offset < 0 || offset > len(text) || (offset < len(text) && !utf8.RuneStart(text[offset])) {
		return ReadResult{}, nil, fmt.Errorf("read offset %d is not a rune boundary", offset)
	}
	// The overhead is measured with a cursor as long as any real one and
	// truncated:false (the longer literal), so the remaining budget holds
	// whatever the final page looks like.
	probe := strings.Repeat("x", cursorLen)
	empty, err := marshalResult(ReadResult{Resource: resource, NextCursor: &probe})
	if err != nil {
		return ReadResult{}, nil, err
	}
	budget := PageBudgetBytes - len(empty)
	end := offset
	used := 0
	for end < len(text) {
		r, size := utf8.DecodeRuneInString(text[end:])
		c := jsonRuneCost(r)
		if r == utf8.RuneError && size == 1 {
			c = 6 // encoding/json writes an invalid byte as \ufffd
		}
		if used+c > budget {
			break
		}
		used += c
		end += size
	}
	if end == offset && offset < len(text) {
		return ReadResult{}, nil, fmt.Errorf("resource id leaves no room for contents")
	}
	res := ReadResult{Resource: resource, Contents: text[offset:end]}
	if end < len(text) {
		next := cursorFor(end)
		res.NextCursor = &next
		res.Truncated = true
	}
	out, err := marshalResult(res)
	if err != nil {
		return ReadResult{}, nil, err
	}
	if len(out) > PageBudgetBytes {
		return ReadResult{}, nil, fmt.Errorf("skills.read page is %d bytes, over the %d-byte budget", len(out), PageBudgetBytes)
	}
	return res, out, nil
}

// pageList builds the skills.list page starting at offset with the
// reference algorithm: add skills one by one (at most MaxPageSkills) while
// the serialized page fits the budget; a skill that cannot fit even alone
// is skipped and marks the result truncated.
func pageList(skills []ListedSkill, offset int, warnings []string, baseTruncated bool, cursorFor func(next int) string) (ListResult, []byte, error) {
	if offset < 0 || offset > len(skills) {
		return ListResult{}, nil, fmt.Errorf("list offset %d out of range", offset)
	}
	if warnings == nil {
		warnings = []string{}
	}
	// Sizes are computed from parts: the page without skills (for each
	// cursor/truncated shape) plus each skill and its separating comma.
	probe := strings.Repeat("x", cursorLen)
	var emptyLen [2][2]int // [has cursor][truncated]
	for hc := range 2 {
		for tr := range 2 {
			r := ListResult{Skills: []ListedSkill{}, Warnings: warnings, Truncated: tr == 1}
			if hc == 1 {
				r.NextCursor = &probe
			}
			b, err := marshalResult(r)
			if err != nil {
				return ListResult{}, nil, err
			}
			emptyLen[hc][tr] = len(b)
		}
	}
	b2i := func(b bool) int {
		if b {
			return 1
		}
		return 0
	}
	page := []ListedSkill{}
	pageBytes := 0 // skills plus commas
	next := -1
	base := baseTruncated
	index := offset
	for index < len(skills) && len(page) < MaxPageSkills {
		sb, err := marshalResult(skills[index])
		if err != nil {
			return ListResult{}, nil, err
		}
		add := len(sb)
		if len(page) > 0 {
			add++
		}
		next = -1
		if index+1 < len(skills) {
			next = index + 1
		}
		truncated := base || next >= 0
		if emptyLen[b2i(next >= 0)][b2i(truncated)]+pageBytes+add > PageBudgetBytes {
			if len(page) == 0 {
				// This skill can never fit a page: skip it.
				index++
				base = true
				next = -1
				if index < len(skills) {
					next = index
				}
				continue
			}
			next = index
			break
		}
		page = append(page, skills[index])
		pageBytes += add
		index++
	}
	if index < len(skills) && next < 0 {
		next = index
	}
	res := ListResult{Skills: page, Warnings: warnings, Truncated: base || next >= 0}
	if next >= 0 {
		c := cursorFor(next)
		res.NextCursor = &c
	}
	out, err := marshalResult(res)
	if err != nil {
		return ListResult{}, nil, err
	}
	if len(out) > PageBudgetBytes {
		return ListResult{}, nil, fmt.Errorf("skills.list page is %d bytes, over the %d-byte budget", len(out), PageBudgetBytes)
	}
	return res, out, nil
}
