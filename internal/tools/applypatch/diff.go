package applypatch

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
)

// The diffs follow what Codex renders with the `similar` crate: Myers'
// algorithm over lines (newlines included), edits shifted to join
// neighbouring edits, deletions before insertions in each changed run,
// and GNU-style hunk headers with a "\ No newline at end of file" hint.

type opTag uint8

const (
	opEqual opTag = iota
	opDelete
	opInsert
)

// diffOp covers oldLen lines of old at oldIndex and newLen lines of new at
// newIndex; an equal op has oldLen == newLen.
type diffOp struct {
	tag      opTag
	oldIndex int
	oldLen   int
	newIndex int
	newLen   int
}

func (o diffOp) oldEnd() int { return o.oldIndex + o.oldLen }
func (o diffOp) newEnd() int { return o.newIndex + o.newLen }

func (o diffOp) size() int {
	if o.tag == opInsert {
		return o.newLen
	}
	return o.oldLen
}

// splitKeepNewlines splits s into lines that keep their "\n".
func splitKeepNewlines(s string) []string {
	var out []string
	for s != "" {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			out = append(out, s)
			break
		}
		out = append(out, s[:i+1])
		s = s[i+1:]
	}
	return out
}

// maxDiffCost bounds the Myers search (in visited diagonals); past it the
// remaining middle of the diff is emitted as one delete and one insert.
const maxDiffCost = 1 << 24

// myers computes the edit script from old to new.
type myers struct {
	old, new []int
	vf, vb   []int
	offset   int
	ops      []diffOp
	cost     int
}

func diffLines(oldLines, newLines []string) []diffOp {
	ids := map[string]int{}
	intern := func(ls []string) []int {
		out := make([]int, len(ls))
		for i, l := range ls {
			id, ok := ids[l]
			if !ok {
				id = len(ids)
				ids[l] = id
			}
			out[i] = id
		}
		return out
	}
	m := &myers{old: intern(oldLines), new: intern(newLines)}
	maxD := (len(oldLines)+len(newLines)+1)/2 + 1
	m.offset = maxD + 1
	m.vf = make([]int, 2*maxD+3)
	m.vb = make([]int, 2*maxD+3)
	m.conquer(0, len(m.old), 0, len(m.new))
	ops := compactOps(m.old, m.new, mergeOps(m.ops))
	return ops
}

func (m *myers) equal(oi, ni, n int) {
	if n > 0 {
		m.ops = append(m.ops, diffOp{tag: opEqual, oldIndex: oi, oldLen: n, newIndex: ni, newLen: n})
	}
}

func (m *myers) prefix(o0, o1, n0, n1 int) int {
	k := 0
	for o0+k < o1 && n0+k < n1 && m.old[o0+k] == m.new[n0+k] {
		k++
	}
	return k
}

func (m *myers) suffix(o0, o1, n0, n1 int) int {
	k := 0
	for o1-k > o0 && n1-k > n0 && m.old[o1-k-1] == m.new[n1-k-1] {
		k++
	}
	return k
}

func (m *myers) conquer(o0, o1, n0, n1 int) {
	p := m.prefix(o0, o1, n0, n1)
	m.equal(o0, n0, p)
	o0, n0 = o0+p, n0+p
	s := m.suffix(o0, o1, n0, n1)
	o1, n1 = o1-s, n1-s
	switch {
	case o0 == o1 && n0 == n1:
	case n0 == n1:
		m.ops = append(m.ops, diffOp{tag: opDelete, oldIndex: o0, oldLen: o1 - o0, newIndex: n0})
	case o0 == o1:
		m.ops = append(m.ops, diffOp{tag: opInsert, oldIndex: o0, newIndex: n0, newLen: n1 - n0})
	default:
		x, y, ok := m.middleSnake(o0, o1, n0, n1)
		if !ok {
			m.ops = append(m.ops,
				diffOp{tag: opDelete, oldIndex: o0, oldLen: o1 - o0, newIndex: n0},
				diffOp{tag: opInsert, oldIndex: o1, newIndex: n0, newLen: n1 - n0})
			break
		}
		m.conquer(o0, x, n0, y)
		m.conquer(x, o1, y, n1)
	}
	m.equal(o1, n1, s)
}

// middleSnake finds the start of the middle snake of an optimal path
// (the `similar` crate's find_middle_snake).
func (m *myers) middleSnake(o0, o1, n0, n1 int) (int, int, bool) {
	n, mm := o1-o0, n1-n0
	delta := n - mm
	odd := delta&1 == 1
	vf := func(k int) *int { return &m.vf[k+m.offset] }
	vb := func(k int) *int { return &m.vb[k+m.offset] }
	*vf(1), *vb(1) = 0, 0
	dMax := (n+mm+1)/2 + 1
	for d := 0; d < dMax; d++ {
		m.cost += 2*d + 1
		if m.cost > maxDiffCost {
			return 0, 0, false
		}
		for k := d; k >= -d; k -= 2 {
			var x int
			if k == -d || (k != d && *vf(k - 1) < *vf(k + 1)) {
				x = *vf(k + 1)
			} else {
				x = *vf(k - 1) + 1
			}
			y := x - k
			x0, y0 := x, y
			if x < n && y < mm {
				x += m.prefix(o0+x, o1, n0+y, n1)
			}
			*vf(k) = x
			if odd && abs(k-delta) <= d-1 && *vf(k)+*vb(-(k - delta)) >= n {
				return x0 + o0, y0 + n0, true
			}
		}
		for k := d; k >= -d; k -= 2 {
			var x int
			if k == -d || (k != d && *vb(k - 1) < *vb(k + 1)) {
				x = *vb(k + 1)
			} else {
				x = *vb(k - 1) + 1
			}
			y := x - k
			if x < n && y < mm {
				a := m.suffix(o0, o0+n-x, n0, n0+mm-y)
				x += a
				y += a
			}
			*vb(k) = x
			if !odd && abs(k-delta) <= d && *vb(k)+*vf(-(k - delta)) >= n {
				return n - x + o0, mm - y + n0, true
			}
		}
	}
	return 0, 0, false
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// mergeOps joins adjacent ops of the same kind.
func mergeOps(ops []diffOp) []diffOp {
	var out []diffOp
	for _, o := range ops {
		if n := len(out); n > 0 && out[n-1].tag == o.tag && o.tag != opInsert && out[n-1].oldEnd() == o.oldIndex {
			out[n-1].oldLen += o.oldLen
			out[n-1].newLen += o.newLen
			continue
		}
		if n := len(out); n > 0 && out[n-1].tag == opInsert && o.tag == opInsert && out[n-1].newEnd() == o.newIndex {
			out[n-1].newLen += o.newLen
			continue
		}
		out = append(out, o)
	}
	return out
}

// compactOps moves each deletion and then each insertion up and then down
// so that it joins neighbouring edits where it can (the `similar` crate's
// Compact hook: deletions only merge with or swap past adjacent edits,
// insertions also slide over equal lines).
func compactOps(old, new []int, ops []diffOp) []diffOp {
	for _, tag := range []opTag{opDelete, opInsert} {
		for i := 0; i < len(ops); i++ {
			if ops[i].tag != tag {
				continue
			}
			i = shiftUp(old, new, &ops, i)
			i = shiftDown(old, new, &ops, i)
		}
	}
	return ops
}

// editLines returns the lines an edit op deletes or inserts.
func editLines(old, new []int, o diffOp) []int {
	if o.tag == opInsert {
		return new[o.newIndex:o.newEnd()]
	}
	return old[o.oldIndex:o.oldEnd()]
}

// shiftUp moves the edit at i upwards: an insertion rotates through equal
// lines above it while its last line equals the line before it; adjacent
// edits of the same kind merge, of the other kind swap.
func shiftUp(old, new []int, ops *[]diffOp, i int) int {
	for i > 0 {
		o, prev := (*ops)[i], (*ops)[i-1]
		switch {
		case prev.tag == opEqual:
			// Like similar, only insertions slide over equal lines.
			if o.tag != opInsert {
				return i
			}
			lines := editLines(old, new, o)
			if prev.oldLen == 0 || lines[len(lines)-1] != old[prev.oldEnd()-1] {
				return i
			}
			// Rotate one line: the edit starts one line earlier and the
			// equal run after it grows by one.
			(*ops)[i-1].oldLen--
			(*ops)[i-1].newLen--
			o.oldIndex--
			o.newIndex--
			(*ops)[i] = o
			if i+1 < len(*ops) && (*ops)[i+1].tag == opEqual {
				(*ops)[i+1].oldIndex--
				(*ops)[i+1].newIndex--
				(*ops)[i+1].oldLen++
				(*ops)[i+1].newLen++
			} else {
				eq := diffOp{tag: opEqual, oldIndex: o.oldIndex + o.oldLen, newIndex: o.newIndex + o.newLen, oldLen: 1, newLen: 1}
				*ops = insertOp(*ops, i+1, eq)
			}
			if (*ops)[i-1].oldLen == 0 {
				*ops = removeOp(*ops, i-1)
				i--
			}
		case prev.tag == o.tag:
			if o.tag == opInsert {
				(*ops)[i-1].newLen += o.newLen
			} else {
				(*ops)[i-1].oldLen += o.oldLen
			}
			*ops = removeOp(*ops, i)
			i--
		default:
			// A delete next to an insert: swap so the run can keep moving.
			(*ops)[i-1], (*ops)[i] = swapEdits(prev, o)
			i--
		}
	}
	return i
}

// shiftDown is shiftUp's mirror image.
func shiftDown(old, new []int, ops *[]diffOp, i int) int {
	for i+1 < len(*ops) {
		o, next := (*ops)[i], (*ops)[i+1]
		switch {
		case next.tag == opEqual:
			if o.tag != opInsert {
				return i
			}
			lines := editLines(old, new, o)
			if next.oldLen == 0 || lines[0] != old[next.oldIndex] {
				return i
			}
			(*ops)[i+1].oldIndex++
			(*ops)[i+1].newIndex++
			(*ops)[i+1].oldLen--
			(*ops)[i+1].newLen--
			if i > 0 && (*ops)[i-1].tag == opEqual {
				(*ops)[i-1].oldLen++
				(*ops)[i-1].newLen++
			} else {
				eq := diffOp{tag: opEqual, oldIndex: o.oldIndex, newIndex: o.newIndex, oldLen: 1, newLen: 1}
				*ops = insertOp(*ops, i, eq)
				i++
			}
			o.oldIndex++
			o.newIndex++
			(*ops)[i] = o
			if (*ops)[i+1].oldLen == 0 {
				*ops = removeOp(*ops, i+1)
			}
		case next.tag == o.tag:
			if o.tag == opInsert {
				(*ops)[i].newLen += next.newLen
			} else {
				(*ops)[i].oldLen += next.oldLen
			}
			*ops = removeOp(*ops, i+1)
		default:
			(*ops)[i], (*ops)[i+1] = swapEdits(o, next)
			i++
		}
	}
	return i
}

// swapEdits exchanges the order of two adjacent edits of different kinds,
// keeping the indexes consistent.
func swapEdits(a, b diffOp) (diffOp, diffOp) {
	// A delete and an insert at the same point commute; only the index of
	// the other sequence moves.
	b.oldIndex, b.newIndex = a.oldIndex, a.newIndex
	if b.tag == opInsert {
		a.newIndex = b.newIndex + b.newLen
	} else {
		a.oldIndex = b.oldIndex + b.oldLen
	}
	return b, a
}

func insertOp(ops []diffOp, i int, o diffOp) []diffOp {
	ops = append(ops, diffOp{})
	copy(ops[i+1:], ops[i:])
	ops[i] = o
	return ops
}

func removeOp(ops []diffOp, i int) []diffOp { return append(ops[:i], ops[i+1:]...) }

// groupOps splits ops into hunks with n lines of context (the `similar`
// crate's group_diff_ops).
func groupOps(ops []diffOp, n int) [][]diffOp {
	if len(ops) == 0 {
		return nil
	}
	ops = append([]diffOp(nil), ops...)
	if f := &ops[0]; f.tag == opEqual {
		off := max(f.oldLen-n, 0)
		f.oldIndex += off
		f.newIndex += off
		f.oldLen -= off
		f.newLen -= off
	}
	if l := &ops[len(ops)-1]; l.tag == opEqual {
		cut := max(l.oldLen-n, 0)
		l.oldLen -= cut
		l.newLen -= cut
	}
	var groups [][]diffOp
	var pending []diffOp
	for _, o := range ops {
		if o.tag == opEqual && o.oldLen > 2*n {
			pending = append(pending, diffOp{tag: opEqual, oldIndex: o.oldIndex, newIndex: o.newIndex, oldLen: n, newLen: n})
			groups = append(groups, pending)
			off := o.oldLen - n
			pending = []diffOp{{tag: opEqual, oldIndex: o.oldIndex + off, newIndex: o.newIndex + off, oldLen: n, newLen: n}}
			continue
		}
		pending = append(pending, o)
	}
	if !(len(pending) == 0 || (len(pending) == 1 && pending[0].tag == opEqual)) {
		groups = append(groups, pending)
	}
	return groups
}

// rangeText formats a hunk range GNU-style: "start" for one line,
// "start,len" otherwise, with start one before the range when it is empty.
func rangeText(start, end int) string {
	begin := start + 1
	n := end - start
	if n == 1 {
		return strconv.Itoa(begin)
	}
	if n == 0 {
		begin--
	}
	return fmt.Sprintf("%d,%d", begin, n)
}

// unifiedDiff renders the hunks turning oldText into newText with the given
// context; header, when non-empty, is written as "--- a\n+++ b\n" before
// the first hunk.
func unifiedDiff(oldText, newText string, context int, oldHeader, newHeader string) string {
	oldLines, newLines := splitKeepNewlines(oldText), splitKeepNewlines(newText)
	groups := groupOps(diffLines(oldLines, newLines), context)
	var b strings.Builder
	for gi, g := range groups {
		if gi == 0 && oldHeader != "" {
			b.WriteString("--- " + oldHeader + "\n+++ " + newHeader + "\n")
		}
		first, last := g[0], g[len(g)-1]
		fmt.Fprintf(&b, "@@ -%s +%s @@\n", rangeText(first.oldIndex, last.oldEnd()), rangeText(first.newIndex, last.newEnd()))
		write := func(sign byte, line string) {
			b.WriteByte(sign)
			b.WriteString(line)
			if !strings.HasSuffix(line, "\n") {
				b.WriteString("\n\\ No newline at end of file\n")
			}
		}
		// Within a changed run, deletions come before insertions.
		for i := 0; i < len(g); {
			if g[i].tag == opEqual {
				for _, l := range oldLines[g[i].oldIndex:g[i].oldEnd()] {
					write(' ', l)
				}
				i++
				continue
			}
			j := i
			for j < len(g) && g[j].tag != opEqual {
				j++
			}
			for _, o := range g[i:j] {
				if o.tag == opDelete {
					for _, l := range oldLines[o.oldIndex:o.oldEnd()] {
						write('-', l)
					}
				}
			}
			for _, o := range g[i:j] {
				if o.tag == opInsert {
					for _, l := range newLines[o.newIndex:o.newEnd()] {
						write('+', l)
					}
				}
			}
			i = j
		}
	}
	return b.String()
}

// gitBlobOID is the SHA-1 git gives content stored as a blob.
func gitBlobOID(content string) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(content))
	h.Write([]byte(content))
	return hex.EncodeToString(h.Sum(nil))
}
