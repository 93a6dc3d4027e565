# The whole test suite is `make test`; CI runs exactly that (.ci/run).
GO ?= go
GOTESTFLAGS ?=

.PHONY: test deps vet build bench fmt

test: deps vet
	$(GO) test -race -count=1 -timeout 15m $(GOTESTFLAGS) ./...

# Installs (as root) or checks the system tools the tests use.
deps:
	@scripts/test-deps.sh

vet:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...

# Static: nothing needs cgo, and a cgo build (which links the psx library
# externally) keeps ~18 MB more of the binary resident.
build:
	CGO_ENABLED=0 $(GO) build -trimpath -o bin/appserver ./cmd/appserver

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./bench/...

fmt:
	gofmt -w $$(git ls-files '*.go')
