package skills

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// Limits of the SKILL.md front matter fields (docs/tools.md §6.2), in characters.
const (
	maxNameChars             = 64
	maxDescriptionChars      = 1024
	maxShortDescriptionChars = 500
)

// SkillMeta is what a SKILL.md front matter declares.
type SkillMeta struct {
	// Name is the skill name, collapsed to one line.
	Name string
	// Description is the skill description, collapsed to one line.
	Description string
	// ShortDescription is metadata.short-description (or an alias), "" when
	// absent.
	ShortDescription string
}

// ParseSkillFile extracts and validates the front matter of a SKILL.md: a
// YAML block between "---" lines at the very start, read by a YAML parser
// (anchors, flow collections and every scalar style included) as the
// reference's YAML library reads it. The errors are the reference's
// classes: missing front matter, invalid YAML, missing field, too long.
func ParseSkillFile(data []byte) (SkillMeta, error) {
	fm, err := extractFrontMatter(data)
	if err != nil {
		return SkillMeta{}, err
	}
	doc, err := parseYAML(fm)
	if err != nil {
		return SkillMeta{}, err
	}
	var m SkillMeta
	if m.Name, err = requiredField(doc, "name", maxNameChars); err != nil {
		return SkillMeta{}, err
	}
	if m.Description, err = requiredField(doc, "description", maxDescriptionChars); err != nil {
		return SkillMeta{}, err
	}
	meta, err := mapping(doc["metadata"])
	if err != nil || meta == nil {
		// A metadata value that is not a mapping declares nothing we read.
		return m, err
	}
	for _, key := range []string{"short-description", "shortDescription", "short_description"} {
		s, present, err := text(meta[key])
		if err != nil {
			return SkillMeta{}, fmt.Errorf("invalid metadata.%s: %w", key, err)
		}
		if !present {
			continue
		}
		s = oneLine(s)
		if n := utf8.RuneCountInString(s); n > maxShortDescriptionChars {
			return SkillMeta{}, fmt.Errorf("invalid metadata.%s: exceeds maximum length of %d characters", key, maxShortDescriptionChars)
		}
		m.ShortDescription = s
		break
	}
	return m, nil
}

func requiredField(doc map[string]*yaml.Node, key string, maxChars int) (string, error) {
	s, present, err := text(doc[key])
	if err != nil {
		return "", fmt.Errorf("invalid %s: %w", key, err)
	}
	s = oneLine(s)
	if !present || s == "" {
		return "", fmt.Errorf("missing field `%s`", key)
	}
	if utf8.RuneCountInString(s) > maxChars {
		return "", fmt.Errorf("invalid %s: exceeds maximum length of %d characters", key, maxChars)
	}
	return s, nil
}

// errNotString is the error of a field that must be text.
var errNotString = errors.New("expected a string")

// text reads a string field: absent or null is not present; a plain
// scalar that YAML 1.1 would read as a date stays text, as it does for a
// YAML 1.2 reader; numbers, booleans and collections are not strings.
func text(n *yaml.Node) (string, bool, error) {
	n = unalias(n)
	if n == nil {
		return "", false, nil
	}
	if n.Kind != yaml.ScalarNode {
		return "", false, errNotString
	}
	switch n.ShortTag() {
	case "!!null":
		return "", false, nil
	case "!!str", "!!timestamp":
		return n.Value, true, nil
	}
	return "", false, errNotString
}

// mapping reads a mapping node into its entries, nil when n is absent or
// not a mapping.
func mapping(n *yaml.Node) (map[string]*yaml.Node, error) {
	n = unalias(n)
	if n == nil || n.Kind != yaml.MappingNode {
		return nil, nil
	}
	// Decoding into nodes checks for duplicate keys, which the reference
	// rejects, and applies merge keys, without expanding aliases: an alias
	// is only followed when a field we read is one, so a "billion laughs"
	// document costs nothing.
	var m map[string]yaml.Node
	if err := n.Decode(&m); err != nil {
		return nil, yamlError(err)
	}
	out := make(map[string]*yaml.Node, len(m))
	for k, v := range m {
		out[k] = &v
	}
	return out, nil
}

// unalias follows aliases to the node they name.
func unalias(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

// errNoFrontMatter is the reference's "missing YAML frontmatter" class.
var errNoFrontMatter = errors.New("missing YAML frontmatter delimited by ---")

// extractFrontMatter returns the text between the opening and closing
// "---" delimiters.
func extractFrontMatter(data []byte) ([]byte, error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	text := string(data)
	first, rest, found := strings.Cut(text, "\n")
	if strings.TrimRight(first, " \t\r") != "---" || !found {
		return nil, errNoFrontMatter
	}
	var lines []string
	for rest != "" {
		var line string
		line, rest, _ = strings.Cut(rest, "\n")
		line = strings.TrimSuffix(line, "\r")
		if strings.TrimRight(line, " \t") == "---" {
			return []byte(strings.Join(lines, "\n")), nil
		}
		lines = append(lines, line)
	}
	return nil, errNoFrontMatter
}

// parseYAML parses the front matter document, which must be a mapping with
// distinct keys (empty is an empty mapping). Line numbers in errors are
// lines of SKILL.md: the document is parsed with its opening --- (a YAML
// document start), which also makes the YAML library name the line of an
// error on the first line of the front matter, where it otherwise omits it.
func parseYAML(fm []byte) (map[string]*yaml.Node, error) {
	if !utf8.Valid(fm) {
		line := 2 + bytes.Count(fm[:invalidUTF8At(fm)], []byte("\n"))
		return nil, fmt.Errorf("invalid YAML: line %d: invalid UTF-8", line)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(append([]byte("---\n"), fm...), &doc); err != nil {
		return nil, yamlError(err)
	}
	if len(doc.Content) == 0 {
		return map[string]*yaml.Node{}, nil
	}
	root := doc.Content[0]
	switch {
	case root.ShortTag() == "!!null":
		return map[string]*yaml.Node{}, nil
	case root.Kind != yaml.MappingNode:
		return nil, fmt.Errorf("invalid YAML: line %d: front matter must be a mapping, not %s", root.Line, kindName(root))
	}
	return mapping(root)
}

// yamlError renders a YAML library error as "invalid YAML: line N: ...".
func yamlError(err error) error {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		return fmt.Errorf("invalid YAML: %s", strings.Join(te.Errors, "; "))
	}
	return fmt.Errorf("invalid YAML: %s", strings.TrimPrefix(err.Error(), "yaml: "))
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a sequence"
	case yaml.ScalarNode:
		return "a scalar"
	}
	return "an alias"
}

// invalidUTF8At returns the offset of the first invalid UTF-8 sequence.
func invalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return len(b)
}
