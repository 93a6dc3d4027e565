// Package bench holds end-to-end benchmarks of the appserver daemon. They
// build the real binary (./cmd/appserver), run it as a subprocess and drive
// it over websockets, so they measure what a deployment sees: handshake
// latency and the memory an idle connection costs.
//
// Run them with
//
//	go test -run '^$' -bench Handshake -benchmem ./bench/
//	go test -run '^$' -bench IdleConnections -benchtime=1x ./bench/
//
// See bench/README.md for what each metric means and the targets.
//
// It imports no package of the module, and its tests only the fakes of the
// outside world (internal/model/fakemodel, internal/store/pgtest): it
// measures the built binary as a deployment sees it.
package bench
