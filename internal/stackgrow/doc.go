// Package stackgrow grows a new goroutine's stack in one step, before the
// goroutine goes deep.
//
// A goroutine starts on a small stack (2 KiB, or the runtime's running
// average of stack use). Each time a call does not fit, the runtime
// allocates a stack twice the size, copies the old one and adjusts every
// frame on it (runtime.copystack): the deeper the goroutine is when it
// runs out, the more frames there are to walk. A goroutine that encodes
// JSON through reflection or calls into the store grows three or four
// times, each time deep in such a call. The daemon's per-request
// goroutine, a turn's goroutine, its commits' goroutines and the queue's
// did so at every turn: runtime.copystack was 4–6 % of the daemon's CPU
// for a plain turn (CPU profiles of BenchmarkEventLogCost/threads=1,
// 2026-12-05), about 1 % with Grow (bench/README.md, "Stacks grown once").
//
// Grow, called first thing on such a goroutine, takes it to Size (16 KiB)
// in one growth while its stack holds two frames. 16 KiB is the largest
// size the runtime keeps in its per-processor stack caches (and the size
// these goroutines reached anyway); at the goroutine's end the stack goes
// back as any such stack does. A goroutine that parks for long with little
// on its stack is shrunk by the collector as before.
// BenchmarkGoroutine (a goroutine started, 10 KiB deep in 40 frames,
// ended): 5.2–5.3 µs plain, 1.3–1.4 µs with Grow.
//
// It must not import any package of the module.
package stackgrow
