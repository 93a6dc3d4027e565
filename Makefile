# The whole test suite is `make test`; CI runs exactly that (.ci/run).
GO ?= go
GOTESTFLAGS ?=

.PHONY: test deps vet build bench fmt sdk-test console-test console

test: deps vet
	$(GO) test -race -count=1 -timeout 30m $(GOTESTFLAGS) ./...
	@GO=$(GO) scripts/sdk-test.sh
	@GO=$(GO) scripts/console-test.sh

# The TypeScript client library's tests (sdk/typescript), against a daemon
# built from this checkout.
sdk-test:
	@GO=$(GO) scripts/sdk-test.sh

# The web console's tests: its build checked, then a real browser
# (Debian's chromium) against a daemon built from this checkout.
console-test:
	@GO=$(GO) scripts/console-test.sh

# Rebuilds the console's embedded assets (internal/console/assets) from
# web/console; commit what it writes.
console:
	cd sdk/typescript && npm ci --no-audit --no-fund --loglevel=error
	cd web/console && npm ci --no-audit --no-fund --loglevel=error && npm run build

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
