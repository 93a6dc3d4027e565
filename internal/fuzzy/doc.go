// Package fuzzy scores paths against a fuzzy query the way the reference's
// file search does (it uses the nucleo matcher configured for paths), so
// that fuzzyFileSearch ranks files as the Codex clients expect.
//
// A query is split on unescaped whitespace into atoms, each matched
// case-insensitively: a plain word matches its characters in order with
// gaps (fuzzy), 'word a contiguous substring, ^word a prefix, word$ a
// suffix, ^word$ the whole path, and !word excludes paths holding word; a
// backslash escapes the special characters and spaces. A path's score is
// the sum of its atoms' scores; a path some atom misses does not match.
//
// A fuzzy atom's score is the best alignment of its characters in the
// path: 16 per matched character, bonuses for characters that start a
// word (after "/" 9, after whitespace or punctuation 8, a camelCase hump
// or a digit after a non-digit 5), the first character's bonus counted
// twice, a consecutive run keeping the bonus of the character that began
// it (at least 4), and a penalty of 3 for opening a gap and 1 for each
// further skipped character. Non-ASCII characters are compared by their
// first code point, lowercased, Latin letters with their diacritics
// removed.
//
// It imports nothing of ours.
package fuzzy
