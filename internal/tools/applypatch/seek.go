package applypatch

import (
	"strings"
	"unicode"
)

// seekSequence finds pattern in lines at or after start and returns the
// index of its first line. The passes go from strict to lenient and the
// first hit wins: exact, equal after trimming trailing whitespace, equal
// after trimming both ends, equal after trimming and normalizing Unicode
// punctuation. With eof the only position tried is the one that ends at
// the last line, and only if it is not before start (codex-cli 0.169; an
// older reference ignored the cursor there).
func seekSequence(lines, pattern []string, start int, eof bool) (int, bool) {
	if len(pattern) == 0 {
		return start, true
	}
	if len(pattern) > len(lines) {
		return 0, false
	}
	last := len(lines) - len(pattern)
	from := start
	if eof {
		from = max(start, last)
	}
	passes := []func(string) string{
		nil,
		func(s string) string { return strings.TrimRightFunc(s, unicode.IsSpace) },
		strings.TrimSpace,
		normalizePunctuation,
	}
	for _, norm := range passes {
		if i, ok := seekPass(lines, pattern, from, last, norm); ok {
			return i, true
		}
	}
	return 0, false
}

func seekPass(lines, pattern []string, from, last int, norm func(string) string) (int, bool) {
	if from > last {
		return 0, false
	}
	if norm == nil {
		for i := from; i <= last; i++ {
			if equalAt(lines[i:], pattern) {
				return i, true
			}
		}
		return 0, false
	}
	pat := make([]string, len(pattern))
	for i, p := range pattern {
		pat[i] = norm(p)
	}
	// Normalize each candidate line once, not once per position.
	cache := make([]string, last+len(pattern)-from)
	done := make([]bool, len(cache))
	get := func(i int) string {
		j := i - from
		if !done[j] {
			cache[j], done[j] = norm(lines[i]), true
		}
		return cache[j]
	}
	for i := from; i <= last; i++ {
		ok := true
		for k := range pat {
			if get(i+k) != pat[k] {
				ok = false
				break
			}
		}
		if ok {
			return i, true
		}
	}
	return 0, false
}

func equalAt(lines, pattern []string) bool {
	for k, p := range pattern {
		if lines[k] != p {
			return false
		}
	}
	return true
}

// normalizePunctuation trims s and maps typographic dashes, quotes and
// spaces to their ASCII forms.
func normalizePunctuation(s string) string {
	return strings.Map(func(r rune) rune {
		switch r {
		case '\u2010', '\u2011', '\u2012', '\u2013', '\u2014', '\u2015', '\u2212':
			return '-'
		case '\u2018', '\u2019', '\u201A', '\u201B':
			return '\''
		case '\u201C', '\u201D', '\u201E', '\u201F':
			return '"'
		case '\u00A0', '\u2002', '\u2003', '\u2004', '\u2005', '\u2006', '\u2007', '\u2008', '\u2009', '\u200A', '\u202F', '\u205F', '\u3000':
			return ' '
		}
		return r
	}, strings.TrimSpace(s))
}
