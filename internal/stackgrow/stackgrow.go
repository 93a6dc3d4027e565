package stackgrow

// frame is the size of Grow's frame: with the runtime's guard it fits in
// 16 KiB, not in 8 KiB, so that the one growth lands on 16 KiB.
const frame = 10 << 10

// Size is the stack a goroutine has after Grow (when it had less).
const Size = 16 << 10

// Grow makes sure the calling goroutine's stack has about Size bytes. It
// costs one stack growth on a shallow stack and the clearing of its frame;
// on a goroutine whose stack is that large already, the clearing only.
// Call it first thing on the goroutine: with more than about 5 KiB of the
// stack in use, the growth doubles past Size.
//
//go:noinline
func Grow() {
	var buf [frame]byte
	_ = touch(&buf)
}

// touch reads the frame's array, which keeps it from being optimised away.
//
//go:noinline
func touch(b *[frame]byte) byte { return b[len(b)-1] }
