package fuzzy

import (
	"strings"
	"unicode"
)

// kind is how an atom matches.
type kind uint8

const (
	kindFuzzy kind = iota
	kindSubstring
	kindPrefix
	kindPostfix
	kindExact
)

// atom is one word of a query.
type atom struct {
	kind     kind
	negative bool
	// needle is the word, lowercased, one rune per character.
	needle []rune
	ascii  bool
	// normalize compares Latin letters without their diacritics; off when
	// the needle itself has some, so that they count.
	normalize bool
}

// Pattern is a parsed query. The zero Pattern has no atoms and matches
// every path with score 0.
type Pattern struct {
	atoms []atom
}

// Parse splits query into atoms on unescaped whitespace and reads each
// atom's prefix and suffix syntax (see the package doc). Empty atoms are
// dropped.
func Parse(query string) Pattern {
	var p Pattern
	for _, word := range splitAtoms(query) {
		if a, ok := parseAtom(word); ok {
			p.atoms = append(p.atoms, a)
		}
	}
	return p
}

// Empty reports whether the pattern has no atoms.
func (p Pattern) Empty() bool { return len(p.atoms) == 0 }

// splitAtoms splits on whitespace not preceded by a backslash.
func splitAtoms(s string) []string {
	var out []string
	start := 0
	backslash := false
	for i, c := range s {
		if unicode.IsSpace(c) && !backslash {
			out = append(out, s[start:i])
			start = i + len(string(c))
			continue
		}
		backslash = c == '\\'
	}
	return append(out, s[start:])
}

func parseAtom(raw string) (atom, bool) {
	a := raw
	invert := false
	switch {
	case strings.HasPrefix(a, "!"):
		a, invert = a[1:], true
	case strings.HasPrefix(a, `\!`):
		a = a[1:]
	}
	k := kindFuzzy
	switch {
	case strings.HasPrefix(a, "^"):
		a, k = a[1:], kindPrefix
	case strings.HasPrefix(a, "'"):
		a, k = a[1:], kindSubstring
	case strings.HasPrefix(a, `\^`), strings.HasPrefix(a, `\'`):
		a = a[1:]
	}
	appendDollar := false
	switch {
	case strings.HasSuffix(a, `\$`):
		a, appendDollar = a[:len(a)-2], true
	case strings.HasSuffix(a, "$"):
		if k == kindFuzzy {
			k = kindPostfix
		} else {
			k = kindExact
		}
		a = a[:len(a)-1]
	}
	if invert && k == kindFuzzy {
		k = kindSubstring
	}
	// An escaped space is a space of the needle.
	a = strings.ReplaceAll(a, `\ `, " ")
	if appendDollar {
		a += "$"
	}
	at := atom{kind: k, negative: invert, ascii: true, normalize: true}
	for _, c := range chars(a) {
		if c >= 0x80 {
			at.ascii = false
			if stripDiacritics(c) != c {
				at.normalize = false
			}
		}
		at.needle = append(at.needle, fold(c, false))
	}
	return at, len(at.needle) > 0
}

// chars returns the characters of s as the matcher sees them: the bytes
// of an ASCII string; otherwise one rune per character, combining marks
// and joiners folded into the character they follow, and "\r\n" as one
// "\n".
func chars(s string) []rune {
	return appendChars(nil, s)
}

func appendChars(out []rune, s string) []rune {
	if isASCII(s) {
		for i := 0; i < len(s); i++ {
			out = append(out, rune(s[i]))
		}
		return out
	}
	prevCR := false
	first := len(out)
	for _, c := range s {
		switch {
		case c == '\n' && prevCR:
			out[len(out)-1] = '\n'
			prevCR = false
			continue
		case len(out) > first && (unicode.In(c, unicode.Mn, unicode.Me, unicode.Mc) || c == 0x200d || c >= 0xfe00 && c <= 0xfe0f):
			continue
		}
		prevCR = c == '\r'
		out = append(out, c)
	}
	return out
}
