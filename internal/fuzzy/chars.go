package fuzzy

import (
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// class is what kind of character a path character is, for the bonuses
// of word starts. The order matters: every class above delimiter is a
// word character.
type class uint8

const (
	classWhitespace class = iota
	classNonWord
	classDelimiter
	classLower
	classUpper
	classLetter
	classNumber
)

// The scoring constants, as the reference's matcher has them for paths.
const (
	scoreMatch               = 16
	penaltyGapStart          = 3
	penaltyGapExtension      = 1
	bonusBoundary            = scoreMatch / 2
	bonusNonWord             = bonusBoundary
	bonusCamel123            = bonusBoundary - penaltyGapStart
	bonusConsecutive         = penaltyGapStart + penaltyGapExtension
	bonusFirstCharMultiplier = 2
)

// config is what the reference's matcher makes configurable. Paths use
// pathConfig; the other is its default, kept for checking the scoring
// against the reference's own examples.
type config struct {
	// boundaryWhite is the bonus of a word after whitespace,
	// boundaryDelimiter after a delimiter.
	boundaryWhite, boundaryDelimiter uint16
	// initial is the class before the first character.
	initial class
	// delimiters are the ASCII delimiters.
	delimiters string
}

// pathConfig: a word after whitespace gets the plain boundary bonus and
// one after "/" one more; the start of a path counts as after "/".
var pathConfig = config{boundaryWhite: bonusBoundary, boundaryDelimiter: bonusBoundary + 1, initial: classDelimiter, delimiters: "/"}

// defaultConfig is the reference matcher's default, for text.
var defaultConfig = config{boundaryWhite: bonusBoundary + 2, boundaryDelimiter: bonusBoundary + 1, initial: classWhitespace, delimiters: "/,:;|"}

// asciiSpace is Rust's is_ascii_whitespace: no vertical tab.
func asciiSpace(c rune) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r'
}

// isSpace is whitespace as the reference tests it for any character.
func isSpace(c rune) bool {
	if c < 0x80 {
		return asciiSpace(c) || c == '\v'
	}
	return unicode.IsSpace(c)
}

// classOf classifies c.
func (cf *config) classOf(c rune) class {
	if c < 0x80 {
		switch {
		case c >= 'a' && c <= 'z':
			return classLower
		case c >= 'A' && c <= 'Z':
			return classUpper
		case c >= '0' && c <= '9':
			return classNumber
		case asciiSpace(c):
			return classWhitespace
		case strings.ContainsRune(cf.delimiters, c):
			return classDelimiter
		}
		return classNonWord
	}
	switch {
	case unicode.IsLower(c):
		return classLower
	case unicode.IsUpper(c):
		return classUpper
	case unicode.IsNumber(c):
		return classNumber
	case unicode.IsLetter(c):
		return classLetter
	case unicode.IsSpace(c):
		return classWhitespace
	}
	return classNonWord
}

// bonusFor is the bonus of a character of class cur after one of class
// prev.
func (cf *config) bonusFor(prev, cur class) uint16 {
	if cur > classDelimiter {
		switch prev {
		case classWhitespace:
			return cf.boundaryWhite
		case classDelimiter:
			return cf.boundaryDelimiter
		case classNonWord:
			return bonusBoundary
		}
	}
	switch {
	case prev == classLower && cur == classUpper, prev != classNumber && cur == classNumber:
		return bonusCamel123
	case cur == classWhitespace:
		return cf.boundaryWhite
	case cur == classNonWord:
		return bonusNonWord
	}
	return 0
}

// fold is c as it is compared: lowercased, and for a Latin letter with
// diacritics (when normalize) its base letter.
func fold(c rune, normalize bool) rune {
	if c < 0x80 {
		if c >= 'A' && c <= 'Z' {
			return c + 32
		}
		return c
	}
	if normalize {
		c = stripDiacritics(c)
	}
	return unicode.ToLower(c)
}

// stripDiacritics maps a Latin character that is a variant of an ASCII
// one to it, and leaves anything else alone.
func stripDiacritics(c rune) rune {
	if c < 0xa0 || c >= 0x20a0 {
		return c
	}
	d := norm.NFD.String(string(c))
	if len(d) > 0 && d[0] < 0x80 && isASCIILetterOrDigit(d[0]) {
		return rune(d[0])
	}
	return c
}

func isASCIILetterOrDigit(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9'
}
