package skills

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readPages pages through text the way skills.read does, checking every
// page on the way: size, valid JSON, rune-aligned cuts, cursor shape.
func readPages(t testing.TB, resource, text string) []string {
	codec := newCursorCodec()
	var pieces []string
	offset := 0
	for range len(text) + 2 {
		res, raw, err := pageRead(resource, text, offset, func(end int) string {
			return codec.encode(cursor{kind: cursorRead, offset: uint64(end)})
		})
		if err != nil {
			t.Fatalf("page at %d: %v", offset, err)
		}
		if len(raw) > PageBudgetBytes || len(raw) > MaxResultBytes {
			t.Fatalf("page at %d is %d bytes", offset, len(raw))
		}
		var back ReadResult
		if err := json.Unmarshal(raw, &back); err != nil {
			t.Fatalf("page at %d is not JSON: %v", offset, err)
		}
		if back.Contents != res.Contents || back.Resource != resource {
			t.Fatalf("page at %d does not round-trip", offset)
		}
		if !utf8.ValidString(res.Contents) {
			t.Fatalf("page at %d splits a rune", offset)
		}
		pieces = append(pieces, res.Contents)
		if res.NextCursor == nil {
			if res.Truncated {
				t.Fatalf("last page is marked truncated")
			}
			return pieces
		}
		if !res.Truncated || len(*res.NextCursor) != cursorLen {
			t.Fatalf("continuation page has truncated=%v cursor %q", res.Truncated, *res.NextCursor)
		}
		c, err := codec.decode(*res.NextCursor, cursorRead)
		if err != nil {
			t.Fatalf("cursor does not decode: %v", err)
		}
		if int(c.offset) <= offset {
			t.Fatalf("no progress at %d", offset)
		}
		offset = int(c.offset)
	}
	t.Fatalf("paging did not end")
	return nil
}

func TestPageReadReassemblesExactly(t *testing.T) {
	const res = "skill://local/user-0123456789/deploy/SKILL.md"
	cases := map[string]string{
		"empty":   "",
		"ascii":   strings.Repeat("The quick brown fox jumps over the lazy dog.\n", 1200),
		"emoji":   strings.Repeat("deploy 🚀🔥👩‍👩‍👧‍👦 done ✅\n", 900),
		"cjk":     strings.Repeat("部署应用程序到生产环境。日本語のテキスト、한국어 텍스트\n", 800),
		"escapes": strings.Repeat("\"quoted\" \\ back\tslash\r\n\x00\x01\x1f <tag> & \u2028\u2029\b\f\x7f", 600),
		"mixed":   strings.Repeat("a\"é中🚀\n\\\x02", 3000),
	}
	for name, text := range cases {
		t.Run(name, func(t *testing.T) {
			pieces := readPages(t, res, text)
			assert.Equal(t, text, strings.Join(pieces, ""))
			if len(text) > 20000 {
				assert.Greater(t, len(pieces), 2)
			}
		})
	}
}

// TestPageReadFillsTheBudget checks that pages are not needlessly small: a
// full page of plain ASCII is within a few bytes of the budget.
func TestPageReadFillsTheBudget(t *testing.T) {
	codec := newCursorCodec()
	_, raw, err := pageRead("skill://h/p/SKILL.md", strings.Repeat("x", 50_000), 0, func(end int) string {
		return codec.encode(cursor{kind: cursorRead, offset: uint64(end)})
	})
	require.NoError(t, err)
	assert.GreaterOrEqual(t, len(raw), PageBudgetBytes-1)
	assert.LessOrEqual(t, len(raw), PageBudgetBytes)
}

func TestJSONRuneCostMatchesEncoder(t *testing.T) {
	for r := rune(0); r < 0x3000; r++ {
		b, err := marshalResult(string(r))
		require.NoError(t, err)
		require.Equal(t, len(b)-2, jsonRuneCost(r), "rune %U", r)
	}
	for _, r := range []rune{0x1F680, 0x10FFFF, 0xFFFD, 0xFEFF} {
		b, err := marshalResult(string(r))
		require.NoError(t, err)
		require.Equal(t, len(b)-2, jsonRuneCost(r), "rune %U", r)
	}
	s := "a\xffb\xc3" // invalid bytes become \ufffd
	b, err := marshalResult(s)
	require.NoError(t, err)
	assert.Equal(t, len(b), jsonStringCost(s))
}

func listedSkills(n int, descLen int) []ListedSkill {
	out := make([]ListedSkill, n)
	for i := range out {
		pkg := fmt.Sprintf("skill://local/user-0123456789/skill-%03d", i)
		out[i] = ListedSkill{
			Authority: Authority{Kind: KindLocal, ID: LocalAuthorityID}, Package: pkg,
			Name: fmt.Sprintf("skill-%03d", i), Description: strings.Repeat("d", descLen), MainResource: pkg + "/SKILL.md",
		}
	}
	return out
}

// listPages pages through skills like skills.list and returns the pages.
func listPages(t testing.TB, skills []ListedSkill, warnings []string, base bool) []ListResult {
	var pages []ListResult
	offset := 0
	for range len(skills) + 2 {
		res, raw, err := pageList(skills, offset, warnings, base, func(next int) string {
			return fmt.Sprintf("%0*d", cursorLen, next)
		})
		if err != nil {
			t.Fatalf("page at %d: %v", offset, err)
		}
		if len(raw) > PageBudgetBytes {
			t.Fatalf("page at %d is %d bytes", offset, len(raw))
		}
		if len(res.Skills) > MaxPageSkills {
			t.Fatalf("page at %d has %d skills", offset, len(res.Skills))
		}
		pages = append(pages, res)
		if res.NextCursor == nil {
			return pages
		}
		next, _ := strconv.Atoi(strings.TrimLeft(*res.NextCursor, "0"))
		if next <= offset {
			t.Fatalf("no progress at %d", offset)
		}
		offset = next
	}
	t.Fatalf("listing did not end")
	return nil
}

func TestPageListSplitsBySizeAndCount(t *testing.T) {
	// 30 small skills: 20 per page.
	pages := listPages(t, listedSkills(30, 10), nil, false)
	require.Len(t, pages, 2)
	assert.Len(t, pages[0].Skills, 20)
	assert.True(t, pages[0].Truncated)
	assert.Len(t, pages[1].Skills, 10)
	assert.False(t, pages[1].Truncated)
	assert.Equal(t, []string{}, pages[1].Warnings)

	// Large descriptions: the byte budget splits first.
	skills := listedSkills(30, 500)
	pages = listPages(t, skills, []string{"w1"}, false)
	require.Greater(t, len(pages), 2)
	var all []ListedSkill
	for _, p := range pages {
		all = append(all, p.Skills...)
		assert.Equal(t, []string{"w1"}, p.Warnings)
	}
	assert.Equal(t, skills, all, "pages cover every skill once, in order")
}

func TestPageListSkipsSkillThatNeverFits(t *testing.T) {
	skills := listedSkills(3, 10)
	skills[1].Description = strings.Repeat("\x01", 1400) // 8 400 bytes escaped
	pages := listPages(t, skills, nil, false)
	var names []string
	for _, p := range pages {
		for _, s := range p.Skills {
			names = append(names, s.Name)
		}
	}
	assert.Equal(t, []string{"skill-000", "skill-002"}, names)
	assert.True(t, pages[len(pages)-1].Truncated, "a skipped skill marks the result truncated")
}

func TestPageListEmpty(t *testing.T) {
	res, raw, err := pageList(nil, 0, nil, false, nil)
	require.NoError(t, err)
	assert.JSONEq(t, `{"skills":[],"next_cursor":null,"warnings":[],"truncated":false}`, string(raw))
	assert.Nil(t, res.NextCursor)
}

// FuzzReadPager: every page fits, pages concatenate to the original, no
// panic, whatever the text.
func FuzzReadPager(f *testing.F) {
	f.Add("hello", uint16(1))
	f.Add("🚀部署\"\\\n\x00\u2028", uint16(3000))
	f.Add(strings.Repeat("\x01", 5000), uint16(2))
	f.Fuzz(func(t *testing.T, unit string, repeat uint16) {
		if !utf8.ValidString(unit) {
			unit = strings.ToValidUTF8(unit, "?")
		}
		text := strings.Repeat(unit, int(repeat)%2000)
		if len(text) > 60_000 {
			text = text[:60_000]
			for !utf8.ValidString(text) {
				text = text[:len(text)-1]
			}
		}
		pieces := readPages(t, "skill://h/p/r.md", text)
		if got := strings.Join(pieces, ""); got != text {
			t.Fatalf("pages do not reassemble the text")
		}
	})
}

// FuzzListPager: every list page fits and the pages cover the listable
// skills in order, skipping only ones that can never fit.
func FuzzListPager(f *testing.F) {
	f.Add(uint8(30), uint16(10), "desc", "warn")
	f.Add(uint8(100), uint16(512), "\"\\\x01é🚀", "")
	f.Fuzz(func(t *testing.T, n uint8, descRepeat uint16, unit, warning string) {
		skills := listedSkills(int(n)%(MaxListedSkills+1), 0)
		desc, _ := truncateUTF8(strings.Repeat(strings.ToValidUTF8(unit, "?"), int(descRepeat)%600), maxListedDescriptionBytes)
		for i := range skills {
			if i%3 == 0 {
				skills[i].Description = desc
			}
		}
		w, _ := truncateUTF8(oneLine(warning), maxWarningBytes)
		pages := listPages(t, skills, []string{w, w, w, w}, false)
		seen := 0
		for _, p := range pages {
			for _, s := range p.Skills {
				for seen < len(skills) && skills[seen].Package != s.Package {
					seen++
				}
				if seen == len(skills) {
					t.Fatalf("page lists %q out of order", s.Package)
				}
				seen++
			}
		}
	})
}
