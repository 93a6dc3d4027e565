package fuzzy

// Matcher scores paths against patterns. It keeps buffers between calls,
// so one Matcher is used by one goroutine at a time.
type Matcher struct {
	cf     *config // nil is pathConfig
	hay    []rune
	folded []rune
	bonus  []uint16
	m      []mCell
	p      []pCell
	rows   []int
	idx    []uint32
}

// mCell is the best alignment whose last needle character is matched at
// one column; pCell the best one whose last matched character lies
// before that column, the column itself skipped.
type mCell struct {
	score uint16
	// bonus is the bonus a consecutive run through this cell carries on.
	bonus  uint8
	consec bool // reached from the previous character matched just before
	valid  bool
}

type pCell struct {
	score uint16
	fromM bool // the gap starts here (after a match) rather than going on
}

// Score returns path's score under p and whether it matches at all.
func (m *Matcher) Score(p *Pattern, path string) (uint32, bool) {
	s, _, ok := m.run(p, path, false)
	return s, ok
}

// Indices is Score with the positions (in characters) of path that the
// pattern's atoms matched, ascending and without repeats.
func (m *Matcher) Indices(p *Pattern, path string) (uint32, []uint32, bool) {
	s, idx, ok := m.run(p, path, true)
	if !ok {
		return 0, nil, false
	}
	out := append(make([]uint32, 0, len(idx)), idx...)
	sortDedup(&out)
	return s, out, true
}

func (m *Matcher) run(p *Pattern, path string, indices bool) (uint32, []uint32, bool) {
	m.hay = appendChars(m.hay[:0], path)
	hayASCII := isASCII(path)
	m.idx = m.idx[:0]
	if m.cf == nil {
		m.cf = &pathConfig
	}
	var total uint32
	for i := range p.atoms {
		a := &p.atoms[i]
		s, ok := m.atom(a, hayASCII, indices && !a.negative)
		if a.negative {
			if ok {
				return 0, nil, false
			}
			continue
		}
		if !ok {
			return 0, nil, false
		}
		total += uint32(s)
	}
	return total, m.idx, true
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

func sortDedup(s *[]uint32) {
	a := *s
	for i := 1; i < len(a); i++ {
		for j := i; j > 0 && a[j] < a[j-1]; j-- {
			a[j], a[j-1] = a[j-1], a[j]
		}
	}
	out := a[:0]
	for i, v := range a {
		if i == 0 || v != a[i-1] {
			out = append(out, v)
		}
	}
	*s = out
}

// ctx is one atom against one haystack.
type ctx struct {
	m         *Matcher
	cf        *config
	h         []rune
	n         []rune
	hayASCII  bool
	normalize bool
	indices   bool
}

// norm is a haystack character as compared with the needle.
func (c *ctx) norm(r rune) rune { return fold(r, c.normalize && !c.hayASCII) }

func (c *ctx) prevClass(i int) class {
	if i <= 0 {
		return c.cf.initial
	}
	return c.cf.classOf(c.h[i-1])
}

func (m *Matcher) atom(a *atom, hayASCII, indices bool) (uint16, bool) {
	c := &ctx{m: m, cf: m.cf, h: m.hay, n: a.needle, hayASCII: hayASCII, normalize: a.normalize, indices: indices}
	switch a.kind {
	case kindExact:
		return c.exact()
	case kindPrefix:
		return c.prefix()
	case kindPostfix:
		return c.postfix()
	case kindSubstring:
		return c.substring(a.ascii)
	}
	return c.fuzzy(a.ascii)
}

func (c *ctx) isHaySpace(r rune) bool {
	if c.hayASCII {
		return asciiSpace(r)
	}
	return isSpace(r)
}

func (c *ctx) leadingSpace() int {
	for i, r := range c.h {
		if !c.isHaySpace(r) {
			return i
		}
	}
	return 0
}

func (c *ctx) trailingSpace() int {
	for i := len(c.h) - 1; i >= 0; i-- {
		if !c.isHaySpace(c.h[i]) {
			return len(c.h) - 1 - i
		}
	}
	return 0
}

func (c *ctx) exact() (uint16, bool) {
	lead, trail := 0, 0
	if !isSpace(c.n[0]) {
		lead = c.leadingSpace()
	}
	if !isSpace(c.n[len(c.n)-1]) {
		trail = c.trailingSpace()
	}
	if trail == len(c.h) {
		return 0, false
	}
	return c.exactAt(lead, len(c.h)-trail)
}

func (c *ctx) prefix() (uint16, bool) {
	lead := 0
	if !isSpace(c.n[0]) {
		lead = c.leadingSpace()
	}
	if len(c.h)-lead < len(c.n) {
		return 0, false
	}
	return c.exactAt(lead, lead+len(c.n))
}

func (c *ctx) postfix() (uint16, bool) {
	trail := 0
	if !isSpace(c.n[len(c.n)-1]) {
		trail = c.trailingSpace()
	}
	if len(c.h)-trail < len(c.n) {
		return 0, false
	}
	return c.exactAt(len(c.h)-len(c.n)-trail, len(c.h)-trail)
}

// exactAt matches the needle with exactly h[start:end].
func (c *ctx) exactAt(start, end int) (uint16, bool) {
	if len(c.n) != end-start || start < 0 {
		return 0, false
	}
	for i, r := range c.h[start:end] {
		if c.norm(r) != c.n[i] {
			return 0, false
		}
	}
	return c.calculate(start, end), true
}

// calculate scores the needle matched in h[start:end], from a match at
// start, each further needle character taken at its first occurrence.
func (c *ctx) calculate(start, end int) uint16 {
	prev := c.prevClass(start)
	ni := 0
	need := c.n[0]
	if c.indices {
		c.m.idx = append(c.m.idx, uint32(start))
	}
	cls := c.cf.classOf(c.h[start])
	first := c.cf.bonusFor(prev, cls)
	score := uint16(scoreMatch) + first*bonusFirstCharMultiplier
	prev = cls
	if ni+1 < len(c.n) {
		ni++
		need = c.n[ni]
	}
	inGap := false
	consecutive := 1
	for i := start + 1; i < end; i++ {
		r := c.h[i]
		cls := c.cf.classOf(r)
		if c.norm(r) == need {
			if c.indices {
				c.m.idx = append(c.m.idx, uint32(i))
			}
			bonus := c.cf.bonusFor(prev, cls)
			if consecutive != 0 {
				if bonus >= bonusBoundary && bonus > first {
					first = bonus
				}
				bonus = max(bonus, first, bonusConsecutive)
			} else {
				first = bonus
			}
			score += scoreMatch + bonus
			inGap = false
			consecutive++
			if ni+1 < len(c.n) {
				ni++
				need = c.n[ni]
			}
		} else {
			penalty := uint16(penaltyGapStart)
			if inGap {
				penalty = penaltyGapExtension
			}
			score = satSub(score, penalty)
			inGap = true
			consecutive = 0
		}
		prev = cls
	}
	return score
}

func satSub(a, b uint16) uint16 {
	if a < b {
		return 0
	}
	return a - b
}

// single matches a one-character needle at its best position from
// start: the first one with the highest bonus.
func (c *ctx) single(start int) (uint16, bool) {
	var best uint16
	pos := 0
	prev := c.prevClass(start)
	for i := start; i < len(c.h); i++ {
		r := c.h[i]
		cls := c.cf.classOf(r)
		if c.hayASCII {
			prev = c.prevClass(i)
		}
		if c.norm(r) != c.n[0] {
			continue
		}
		bonus := c.cf.bonusFor(prev, cls)
		// Outside ASCII the reference carries the class of the
		// previous match, not of the previous character.
		prev = cls
		if s := bonus*bonusFirstCharMultiplier + scoreMatch; s > best {
			best, pos = s, i
			if bonus >= c.cf.boundaryWhite {
				break
			}
		}
	}
	if best == 0 {
		return 0, false
	}
	if c.indices {
		c.m.idx = append(c.m.idx, uint32(pos))
	}
	return best, true
}

func (c *ctx) substring(needleASCII bool) (uint16, bool) {
	n, h := len(c.n), len(c.h)
	if n > h {
		return 0, false
	}
	if n == h {
		return c.exactAt(0, h)
	}
	if c.hayASCII && !needleASCII {
		return 0, false
	}
	if n == 1 {
		return c.single(0)
	}
	first, last := 0, h-n+1
	if !c.hayASCII {
		start, ok := c.firstOf(c.n[0], 0, h-n+1)
		if !ok {
			return 0, false
		}
		// The reference stops one position short outside ASCII.
		first, last = start, h-n
	}
	var best uint16
	pos := -1
	prev := c.prevClass(first)
	for i := first; i < last; i++ {
		if c.hayASCII {
			prev = c.prevClass(i)
		}
		if c.norm(c.h[i]) != c.n[0] {
			continue
		}
		cls := c.cf.classOf(c.h[i])
		bonus := c.cf.bonusFor(prev, cls)
		prev = cls
		s := bonus*bonusFirstCharMultiplier + scoreMatch
		if s <= best || !c.equalAt(i+1, c.n[1:]) {
			continue
		}
		best, pos = s, i
		if bonus >= c.cf.boundaryWhite {
			break
		}
	}
	if pos < 0 {
		return 0, false
	}
	return c.calculate(pos, pos+n), true
}

func (c *ctx) equalAt(i int, n []rune) bool {
	if i+len(n) > len(c.h) {
		return false
	}
	for k, r := range n {
		if c.norm(c.h[i+k]) != r {
			return false
		}
	}
	return true
}

// firstOf is the first index in [from, to) holding r.
func (c *ctx) firstOf(r rune, from, to int) (int, bool) {
	for i := from; i < to; i++ {
		if c.norm(c.h[i]) == r {
			return i, true
		}
	}
	return 0, false
}

func (c *ctx) fuzzy(needleASCII bool) (uint16, bool) {
	n, h := len(c.n), len(c.h)
	switch {
	case n > h:
		return 0, false
	case n == h:
		return c.exactAt(0, h)
	case c.hayASCII && !needleASCII:
		return 0, false
	}
	if c.hayASCII {
		if n == 1 {
			return c.single(0)
		}
		start, ok := c.firstOf(c.n[0], 0, h-n+1)
		if !ok {
			return 0, false
		}
		greedyEnd := start + 1
		for _, r := range c.n[1:] {
			i, ok := c.firstOf(r, greedyEnd, h)
			if !ok {
				return 0, false
			}
			greedyEnd = i + 1
		}
		end := greedyEnd
		for i := h - 1; i >= greedyEnd; i-- {
			if c.norm(c.h[i]) == c.n[n-1] {
				end = i + 1
				break
			}
		}
		if n == end-start {
			return c.calculate(start, greedyEnd), true
		}
		return c.optimal(start, greedyEnd, end)
	}
	start, ok := c.firstOf(c.n[0], 0, h-n+1)
	if !ok {
		return 0, false
	}
	if n == 1 {
		if h-start < n {
			return 0, false
		}
		return c.single(start)
	}
	end := -1
	for i := h - 1; i > start; i-- {
		if c.norm(c.h[i]) == c.n[n-1] {
			end = i + 1
			break
		}
	}
	if end < 0 || end-start < n {
		return 0, false
	}
	if n == end-start {
		return c.exactAt(start, end)
	}
	return c.optimal(start, start+1, end)
}

// The reference solves the alignment exactly while its matrix fits in a
// fixed slab, and greedily beyond.
const (
	maxMatrixCells = 100 * 1024
	maxSlabBytes   = 2048*4 + 2048 + 2048*2 + 2048*8 + maxMatrixCells
)

func (c *ctx) fitsSlab(l int) bool {
	n := len(c.n)
	if l*n > maxMatrixCells || l > 0xffff || n > 2048 {
		return false
	}
	cs := 4
	if c.hayASCII {
		cs = 1
	}
	align := func(v, a int) int { return (v + a - 1) / a * a }
	rows := align(l*cs+l, 2)
	score := align(rows+2*n, 8)
	return score+8*(l+1-n)+(l+1-n)*n <= maxSlabBytes
}

// optimal finds the best alignment of the needle in h[start:end].
func (c *ctx) optimal(start, greedyEnd, end int) (uint16, bool) {
	l, n := end-start, len(c.n)
	if !c.fitsSlab(l) {
		return c.greedy(start, greedyEnd)
	}
	m := c.m
	m.folded = grow(m.folded, l)
	m.bonus = grow(m.bonus, l)
	prev := c.prevClass(start)
	for k := range l {
		r := c.h[start+k]
		cls := c.cf.classOf(r)
		m.folded[k] = c.norm(r)
		m.bonus[k] = c.cf.bonusFor(prev, cls)
		prev = cls
	}
	// The first column each needle character can take, found greedily.
	m.rows = grow(m.rows, n)
	ni := 0
	for k := 0; k < l && ni < n; k++ {
		if m.folded[k] == c.n[ni] {
			m.rows[ni] = k
			ni++
		}
	}
	if ni < n {
		return 0, false
	}
	m.m = grow(m.m, n*l)
	m.p = grow(m.p, n*l)
	for i := range n {
		row := m.m[i*l : (i+1)*l]
		prow := m.p[i*l : (i+1)*l]
		off := m.rows[i]
		for j := off; j < l; j++ {
			cell := mCell{}
			switch {
			case m.folded[j] != c.n[i]:
			case i == 0:
				b := m.bonus[j]
				cell = mCell{score: b*bonusFirstCharMultiplier + scoreMatch, bonus: uint8(b), valid: true}
			case j > m.rows[i-1]:
				cell = nextM(m.p[(i-1)*l+j-1].score, m.bonus[j], m.m[(i-1)*l+j-1])
			}
			row[j] = cell
			if j == off {
				prow[j] = pCell{}
				continue
			}
			prow[j] = nextP(prow[j-1].score, row[j-1])
		}
	}
	last := m.m[(n-1)*l : n*l]
	best := -1
	for j := m.rows[n-1]; j < l; j++ {
		if last[j].valid && (best < 0 || last[j].score >= last[best].score) {
			best = j
		}
	}
	if best < 0 {
		return 0, false
	}
	if c.indices {
		c.reconstruct(start, l, best)
	}
	return last[best].score, true
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// nextM scores matching the next needle character at a column whose
// bonus is bonus, after the alignment prev (the previous character at
// the column before) or after a gap (p).
func nextM(p, bonus uint16, prev mCell) mCell {
	if !prev.valid {
		return mCell{score: p + bonus + scoreMatch, bonus: uint8(bonus), valid: true}
	}
	run := max(uint16(prev.bonus), bonusConsecutive)
	if bonus >= bonusBoundary && bonus > run {
		run = bonus
	}
	viaRun := prev.score + max(run, bonus)
	viaGap := p + bonus
	if viaRun > viaGap {
		return mCell{score: viaRun + scoreMatch, bonus: uint8(run), consec: true, valid: true}
	}
	return mCell{score: viaGap + scoreMatch, bonus: uint8(bonus), valid: true}
}

// nextP scores skipping a column after the column whose cells are
// prevP and prevM.
func nextP(prevP uint16, prevM mCell) pCell {
	var m uint16
	if prevM.valid {
		m = satSub(prevM.score, penaltyGapStart)
	}
	skip := satSub(prevP, penaltyGapExtension)
	if m > skip {
		return pCell{score: m, fromM: true}
	}
	return pCell{score: skip}
}

// reconstruct appends the columns of the best alignment ending at best.
func (c *ctx) reconstruct(start, l, best int) {
	m := c.m
	n := len(c.n)
	base := len(m.idx)
	for range n {
		m.idx = append(m.idx, 0)
	}
	out := m.idx[base:]
	out[n-1] = uint32(start + best)
	row, col := n-2, best-1
	inM := m.m[(n-1)*l+best].consec
	for row >= 0 && col >= 0 && col >= m.rows[row] {
		if inM {
			out[row] = uint32(start + col)
		}
		var next bool
		if inM {
			next = m.m[row*l+col].consec
		} else {
			next = m.p[row*l+col].fromM
		}
		if inM {
			if row == 0 {
				break
			}
			row--
		}
		col--
		inM = next
	}
}

// greedy is the reference's fallback for alignments too large to solve
// exactly: the first occurrences, then as late a start as they allow.
func (c *ctx) greedy(start, end int) (uint16, bool) {
	if !c.hayASCII {
		ni := 1
		found := false
		for i := end; i < len(c.h); i++ {
			if c.norm(c.h[i]) == c.n[ni] {
				ni++
				if ni == len(c.n) {
					end = i + 1
					found = true
					break
				}
			}
		}
		if !found {
			return 0, false
		}
	}
	ni := len(c.n) - 1
	for i := end - 1; i >= start; i-- {
		if c.norm(c.h[i]) == c.n[ni] {
			if ni == 0 {
				start = i
				break
			}
			ni--
		}
	}
	return c.calculate(start, end), true
}
