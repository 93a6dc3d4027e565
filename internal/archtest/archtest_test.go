package archtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"io"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// rule says which of our packages a set of our packages must not depend on,
// directly or through other packages of ours. Packages are written relative
// to the module path; a pattern is a package path, "p/..." for p and every
// package below it, or "..." for every package of the module.
type rule struct {
	// pkgs are the packages the rule constrains.
	pkgs []string
	// except are packages matched by pkgs that the rule leaves out.
	except []string
	// mustNot are the packages the constrained ones must not depend on.
	mustNot []string
	// unless are packages matched by mustNot that remain allowed.
	unless []string
	// tests extends the rule to the packages' test files (in-package and
	// external), whose imports are otherwise free: an integration test may
	// assemble the layers above the package it tests.
	tests bool
	// why is the reason, printed with every violation; the package's
	// doc.go says the same in prose.
	why string
}

// Groups of packages the rules name more than once.
var (
	// transports are the adapters of clients to the turns layer, and the
	// front door that serves them.
	transports = []string{"internal/server/...", "internal/httpapi", "internal/hub", "internal/frontdoor"}
	// leafTools are tool handlers: they get an invocation and return an
	// output, knowing nothing about threads, storage or transports.
	leafTools = []string{
		"internal/tools/applypatch", "internal/tools/execsession", "internal/tools/files",
		"internal/tools/shell", "internal/tools/agents", "internal/tools/goals", "internal/registry/planning", "internal/dynamic", "internal/skills",
	}
)

// rules is the dependency direction of the module, lowest layers first.
// docs/design.md §2 shows the same as a table; change both together.
var rules = []rule{
	{
		pkgs:    []string{"api"},
		mustNot: []string{"..."},
		why:     "api is the wire contract: every layer and every client depends on it, so it depends on nothing of ours",
	},
	{
		pkgs:    []string{"api/schema"},
		mustNot: []string{"..."},
		why:     "the reference schema and its checks are the contract's tests: they know no package of ours",
	},
	{
		pkgs:    []string{"..."},
		except:  []string{"api/internal/gen"},
		mustNot: []string{"api/schema"},
		why:     "the schema is read by tests and by the generator only: the daemon does not carry it",
	},
	{
		pkgs:    []string{"api/internal/gen"},
		mustNot: []string{"..."},
		unless:  []string{"api", "api/schema"},
		why:     "the generator writes api's tables from the schema and api.Unserved",
	},
	{
		pkgs:    []string{"internal/apperr", "internal/jsonscan", "internal/lossy", "internal/gctune", "internal/stackgrow", "internal/reqlog", "internal/feedback", "internal/service", "migrations"},
		mustNot: []string{"..."},
		why:     "foundations used across the layers depend on nothing of ours",
	},
	{
		pkgs:    []string{"internal/tlscert", "internal/pgnotify"},
		mustNot: []string{"..."},
		unless:  []string{"internal/service"},
		why:     "services of the daemon that know none of its layers: only the one life cycle they share",
	},
	{
		pkgs:    []string{"internal/audit"},
		mustNot: []string{"..."},
		unless:  []string{"internal/apperr", "internal/service", "internal/store", "migrations"},
		why:     "the audit log is recorded by every door and the tool layer and read back over the HTTP API: it knows only the store it writes through and the one life cycle",
	},
	{
		pkgs:    []string{"internal/testenv", "internal/logtest", "internal/store/pgtest", "internal/tlscert/tlscerttest", "internal/registry/spectest"},
		mustNot: []string{"..."},
		why:     "test helpers stand for the outside world (an environment, a database, a model server) and share no code with what they test",
	},
	{
		pkgs:    []string{"internal/model/fakemodel"},
		mustNot: []string{"..."},
		unless:  []string{"internal/jsonscan"},
		why:     "the fake model stands for a model server and shares no code with what it tests, but for the strict JSON scanner, a foundation that accepts exactly what encoding/json accepts (its tests hold it), with which it reads the fields it matches on in a long thread's request and leaves the rest unread",
	},
	{
		pkgs:    []string{"internal/config"},
		mustNot: []string{"..."},
		unless:  []string{"internal/apperr"},
		why:     "configuration is read by the composition root; it must not reach into the services it configures",
	},
	{
		pkgs:    []string{"internal/auth"},
		mustNot: []string{"..."},
		unless:  []string{"internal/apperr", "internal/store", "migrations"},
		why:     "authentication is read by the transports; it keeps the browser credentials it issues in the store (its interface), and must not reach into the services it guards",
	},
	{
		pkgs:    []string{"internal/principal"},
		mustNot: []string{"..."},
		unless:  []string{"api", "internal/apperr"},
		why:     "the principals' rules are one place every front door and the turns layer consult; they know no door, thread table or store",
	},
	{
		pkgs:    []string{"internal/policy"},
		mustNot: []string{"..."},
		unless:  []string{"api"},
		why:     "policy is pure decision logic over the wire's policy values: the sandbox, the tools and their orchestration build on it",
	},
	{
		pkgs:    []string{"internal/config/configview"},
		mustNot: []string{"..."},
		unless:  []string{"api", "internal/config", "internal/apperr"},
		why:     "the wire views of the configuration are read by the composition root; they know no service",
	},
	{
		pkgs:    []string{"internal/execclient"},
		mustNot: []string{"..."},
		unless:  []string{"api"},
		why:     "the exec client sees the daemon as any bot does, through the public HTTP API's types only",
	},
	{
		pkgs:    []string{"internal/model"},
		mustNot: []string{"..."},
		unless:  []string{"internal/apperr", "internal/jsonscan"},
		why:     "model clients speak to model providers; they know nothing of the client protocol, threads, tools or storage",
	},
	{
		pkgs:    []string{"internal/fsguard"},
		mustNot: []string{"..."},
		unless:  []string{"internal/policy", "api"},
		why:     "the path rule of the daemon's own tools is decided on policies and paths alone; tools and client methods call it, it calls none of them",
	},
	{
		pkgs:    []string{"internal/fuzzy"},
		mustNot: []string{"..."},
		why:     "fuzzy scoring is pure logic over strings: the file search and any other caller build on it",
	},
	{
		pkgs:    []string{"internal/clientfs"},
		mustNot: []string{"..."},
		unless:  []string{"api", "internal/apperr", "internal/fsguard", "internal/policy", "internal/fuzzy", "internal/principal"},
		why:     "the file system methods reach the disk through the path rule only; the JSON-RPC edge calls them, they know no transport, thread or store",
	},
	{
		pkgs:    []string{"internal/sandbox"},
		mustNot: []string{"..."},
		unless:  []string{"internal/policy", "api"},
		why:     "the sandbox enforces a policy on a command; it knows no tool, thread or transport",
	},
	{
		pkgs:    []string{"internal/registry"},
		mustNot: append([]string{"internal/turns/...", "internal/store/...", "internal/tools/...", "internal/registry/planning", "internal/dynamic", "internal/skills", "internal/model/...", "cmd/..."}, transports...),
		why:     "the tool contract knows nothing about threads, transports, storage or any handler",
	},
	{
		pkgs:    []string{"internal/store/..."},
		mustNot: []string{"..."},
		unless:  []string{"internal/store/...", "internal/apperr", "migrations"},
		why:     "the store keeps transcripts as opaque records; the layers above it depend on it, never the reverse",
	},
	{
		pkgs:    []string{"internal/store", "internal/store/internal/backend", "internal/store/storetest"},
		mustNot: []string{"internal/store/memory", "internal/store/postgres", "internal/store/sqlite"},
		why:     "the interface, the shared backend code and the contract suite are below the backends, which import them",
	},
	{
		pkgs:    []string{"internal/store/memory", "internal/store/postgres", "internal/store/sqlite"},
		mustNot: []string{"internal/store/memory", "internal/store/postgres", "internal/store/sqlite"},
		why:     "the backends are siblings; what they share lives in internal/store/internal/backend",
	},
	{
		pkgs:    leafTools,
		mustNot: append([]string{"internal/turns/...", "internal/tools/orchestrate", "internal/store/...", "internal/model/...", "cmd/..."}, transports...),
		why:     "a tool handler gets an invocation and returns an output; it knows nothing about threads, storage or transports",
	},
	{
		pkgs:    []string{"internal/turns/transcript"},
		mustNot: append([]string{"internal/turns", "internal/turns/...", "internal/tools/...", "internal/dynamic", "internal/skills", "internal/sandbox", "internal/config", "internal/auth", "internal/principal", "internal/store/memory", "internal/store/postgres", "internal/store/sqlite", "cmd/..."}, transports...),
		why:     "the read side reads what the store holds and converts it: it knows no loaded thread, running turn or transport, and the thread table and the agent loop build on it",
	},
	{
		pkgs:    []string{"internal/turns/subagents"},
		mustNot: append([]string{"internal/turns", "internal/tools/...", "internal/dynamic", "internal/skills", "internal/sandbox", "internal/config", "internal/auth", "internal/principal", "internal/budget", "internal/policy", "internal/store/memory", "internal/store/postgres", "internal/store/sqlite", "cmd/..."}, transports...),
		why:     "sub-agents see the thread table only through the Table interface they declare: the table builds them and calls their hooks, never the reverse",
	},
	{
		pkgs:    []string{"internal/turns/loop"},
		mustNot: append([]string{"internal/turns", "internal/turns/subagents", "internal/tools/...", "internal/dynamic", "internal/skills", "internal/sandbox", "internal/config", "internal/auth", "internal/principal", "internal/policy", "internal/store/memory", "internal/store/postgres", "internal/store/sqlite", "cmd/..."}, transports...),
		why:     "the agent loop sees its thread only through the Thread interface it declares: the thread table builds each turn's loop, implements that interface with its own locks and commits the turn's end, never the reverse",
	},
	{
		pkgs:    []string{"internal/turns"},
		mustNot: append([]string{"internal/tools/...", "internal/dynamic", "internal/skills", "internal/sandbox", "internal/config", "internal/auth", "internal/store/memory", "internal/store/postgres", "internal/store/sqlite", "cmd/..."}, transports...),
		why:     "turns owns threads and turns behind interfaces: it emits to one sink the transports' hub implements, tools come through its ToolsFactory, its stores (the durable one and the memory one of ephemeral threads) are chosen by the composition root",
	},
	{
		pkgs:    []string{"internal/tools/orchestrate"},
		mustNot: append([]string{"cmd/..."}, transports...),
		why:     "tool orchestration reaches clients only through the turns interfaces, so it is tested without a transport",
	},
	{
		pkgs:    []string{"internal/mcp"},
		mustNot: append([]string{"internal/turns/...", "internal/tools/...", "internal/dynamic", "internal/skills", "internal/sandbox", "internal/store/...", "internal/model/...", "cmd/..."}, transports...),
		why:     "MCP connections are a tool provider like the others: tools reach turns and clients through the registry and the orchestrator's adapters",
	},
	{
		pkgs:    []string{"internal/mcp/mcptest"},
		mustNot: []string{"..."},
		why:     "test helpers stand for the outside world (here an MCP server) and share no code with what they test",
	},
	{
		pkgs:    []string{"internal/cluster"},
		mustNot: append([]string{"internal/turns/...", "internal/tools/...", "internal/dynamic", "internal/skills", "internal/sandbox", "internal/model/...", "internal/store/memory", "internal/store/postgres", "internal/store/sqlite", "cmd/..."}, transports...),
		why:     "thread ownership is a service the turns manager uses through its own interface; it keeps its table through the pool it is handed",
	},
	{
		pkgs:    []string{"internal/hub"},
		mustNot: []string{"internal/server/...", "internal/httpapi", "internal/tools/...", "internal/store/memory", "internal/store/postgres", "internal/store/sqlite", "cmd/..."},
		why:     "the hub is transport-neutral: the websocket server and the HTTP API are its adapters, never the reverse",
	},
	{
		pkgs:    []string{"internal/eventlog"},
		mustNot: []string{"internal/server/...", "internal/httpapi", "internal/tools/...", "internal/store/sqlite", "internal/daemon", "cmd/..."},
		why:     "the event log is the hub's journal and a client of the store: the transports sit above it, and it speaks Postgres only to LISTEN",
	},
	{
		pkgs:    []string{"internal/webhook"},
		mustNot: []string{"internal/server/...", "internal/httpapi", "internal/frontdoor", "internal/tools/...", "internal/store/memory", "internal/store/postgres", "internal/store/sqlite", "internal/daemon", "cmd/..."},
		why:     "the webhook sender is an in-process consumer of the event log: it reads events through the hub and the log, keeps its cursor through the store's interface, and no transport or backend is its concern",
	},
	{
		pkgs:    []string{"internal/budget"},
		mustNot: append([]string{"internal/turns", "internal/turns/...", "internal/tools/...", "internal/config", "internal/store/memory", "internal/store/postgres", "internal/store/sqlite", "internal/daemon", "cmd/..."}, transports...),
		why:     "budgets are a service of the turns layer: limits, prices and the principals' spending through the store's interface; the turns layer and the daemon decide what happens at a limit",
	},
	{
		pkgs:    []string{"internal/mcpserver"},
		mustNot: []string{"internal/server/...", "internal/frontdoor", "internal/httpapi", "internal/tools/...", "internal/store/postgres", "internal/store/sqlite", "internal/daemon", "cmd/..."},
		why:     "the MCP front door is a sibling of the websocket server and the HTTP API: an adapter of the hub and turns, authenticated by whoever mounts it",
	},
	{
		pkgs:    []string{"internal/daemon"},
		mustNot: []string{"internal/mcpserver", "internal/httpapi", "internal/serve", "cmd/..."},
		why:     "the daemon's core is shared by every front door; the front doors are added on top of it by internal/serve",
	},
	{
		pkgs:    []string{"..."},
		except:  []string{"cmd/appserver", "internal/serve", "internal/apptest"},
		mustNot: []string{"internal/daemon"},
		why:     "the daemon's core is the composition root's library: only the commands of internal/serve build it (tests start a daemon through internal/apptest)",
	},
	{
		pkgs:    []string{"internal/serve"},
		mustNot: []string{"internal/apptest", "cmd/..."},
		why:     "the daemon's commands are the composition root's library: they wire every service, and know nothing of their callers",
	},
	{
		pkgs:    []string{"..."},
		except:  []string{"cmd/appserver", "internal/apptest"},
		mustNot: []string{"internal/serve"},
		why:     "the daemon's commands are run by cmd/appserver, and by tests through internal/apptest",
	},
	{
		pkgs:    []string{"internal/apptest"},
		mustNot: []string{"cmd/..."},
		why:     "the e2e harness starts the daemon through internal/serve, as cmd/appserver does, and drives it over the wire",
	},
	{
		pkgs:    []string{"internal/frontdoor"},
		mustNot: []string{"..."},
		unless:  []string{"internal/reqlog"},
		why:     "the front door serves the handlers the composition root gives it (the HTTP API, /mcp, the websocket upgrade), each with its request id and access log line; it knows no protocol, session or service",
	},
	{
		pkgs:    []string{"internal/console"},
		mustNot: []string{"..."},
		why:     "the web console is a built page the binary embeds; it talks to the daemon over the protocol like any client, so the package serves files and knows nothing of ours",
	},
	{
		pkgs:    []string{"internal/server/rpcws"},
		mustNot: []string{"internal/server", "internal/httpapi", "internal/hub", "internal/turns/...", "internal/tools/...", "internal/dynamic", "internal/store/...", "cmd/..."},
		why:     "the JSON-RPC connection owns framing (over any transport's Framer) and correlation only; its caller decides what the methods mean",
	},
	{
		pkgs:    []string{"internal/server"},
		mustNot: []string{"internal/httpapi", "internal/frontdoor", "internal/tools/orchestrate", "internal/store/postgres", "internal/store/sqlite", "cmd/..."},
		why:     "the JSON-RPC sessions and the HTTP API are sibling adapters of the hub and turns, whatever the transport; the composition root gives both to the front door",
	},
	{
		pkgs:    []string{"internal/httpapi"},
		mustNot: []string{"internal/server/...", "internal/frontdoor", "internal/tools/...", "internal/store/memory", "internal/store/postgres", "internal/store/sqlite", "cmd/..."},
		why:     "the HTTP API is an adapter of the hub and turns like the websocket server, not a client of it: it reads turns through the thread table's read side and keeps its idempotency keys through an interface of its own, never through a store backend",
	},
	{
		pkgs:    []string{"bench"},
		mustNot: []string{"..."},
		unless:  []string{"internal/model/fakemodel", "internal/jsonscan", "internal/store/...", "internal/apperr", "migrations"},
		tests:   true,
		why:     "the end-to-end benchmarks drive the built binary as a deployment would; they may use the fakes of the outside world only (and the JSON scanner the fake model reads with), and the store to seed the data a daemon then opens",
	},
	{
		pkgs:    []string{"deploy"},
		mustNot: []string{"..."},
		tests:   true,
		why:     "the deployment files are checked as an operator reads them, not through our code",
	},
	{
		pkgs:    []string{"docs"},
		mustNot: []string{"..."},
		tests:   true,
		why:     "the documentation is checked as a reader follows it, not through our code",
	},
	{
		pkgs:    []string{"internal/archtest"},
		mustNot: []string{"..."},
		tests:   true,
		why:     "the architecture tests read the import graph from the go command, not from our code",
	},
	{
		pkgs:    []string{"..."},
		except:  []string{"internal/apptest"},
		mustNot: []string{"internal/testenv", "internal/logtest", "internal/store/pgtest", "internal/store/storetest", "internal/registry/spectest"},
		why:     "test helpers are imported by test files only (and by the e2e harness, itself imported by test files only)",
	},
	{
		pkgs:    []string{"..."},
		mustNot: []string{"internal/apptest"},
		why:     "the e2e harness is imported by test files only",
	},
	{
		pkgs:    []string{"..."},
		except:  []string{"cmd/appserver", "internal/apptest"},
		mustNot: []string{"internal/model/fakemodel"},
		why:     "the fake model server is for tests (the e2e harness included), and for the composition root's mockmodel subcommand",
	},
	{
		pkgs:    []string{"..."},
		mustNot: []string{"cmd/..."},
		tests:   true,
		why:     "cmd/appserver is the composition root: it may import everything, and nothing imports it",
	},
}

// pkgInfo is one package of the module as the rules see it.
type pkgInfo struct {
	// imports are the packages of ours its non-test files import.
	imports []string
	// testImports are the packages of ours its test files import.
	testImports []string
}

// graph maps each package of the module, by path relative to the module,
// to what it imports.
type graph map[string]pkgInfo

// match reports whether pkg is matched by one of the patterns.
func match(pkg string, patterns []string) bool {
	for _, p := range patterns {
		switch {
		case p == "...":
			return true
		case strings.HasSuffix(p, "/..."):
			base := strings.TrimSuffix(p, "/...")
			if pkg == base || strings.HasPrefix(pkg, base+"/") {
				return true
			}
		case pkg == p:
			return true
		}
	}
	return false
}

// check returns one line per forbidden dependency in g, each with the
// import chain that leads to it and the rule's reason.
func check(g graph, rules []rule) []string {
	var out []string
	for _, r := range rules {
		for _, from := range sortedKeys(g) {
			if !match(from, r.pkgs) || match(from, r.except) {
				continue
			}
			start := g[from].imports
			if r.tests {
				start = append(slices.Clip(start), g[from].testImports...)
			}
			for _, chain := range reach(g, from, start) {
				to := chain[len(chain)-1]
				if to == from || !forbidden(to, r) || slices.ContainsFunc(chain[:len(chain)-1], func(p string) bool { return forbidden(p, r) }) {
					// Allowed, or reached through a package already
					// reported: one line per forbidden import, not per
					// package behind it.
					continue
				}
				out = append(out, fmt.Sprintf("%s must not import %s (%s): %s",
					from, to, strings.Join(append([]string{from}, chain...), " → "), r.why))
			}
		}
	}
	return out
}

// forbidden reports whether r forbids depending on pkg.
func forbidden(pkg string, r rule) bool { return match(pkg, r.mustNot) && !match(pkg, r.unless) }

// reach walks the non-test imports of g from start, breadth first, and
// returns the shortest import chain from from to every package it reaches.
func reach(g graph, from string, start []string) [][]string {
	parent := map[string]string{}
	var order, queue []string
	for _, p := range start {
		if _, seen := parent[p]; !seen {
			parent[p] = ""
			queue = append(queue, p)
		}
	}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		order = append(order, p)
		for _, q := range g[p].imports {
			if _, seen := parent[q]; !seen && q != from {
				parent[q] = p
				queue = append(queue, q)
			}
		}
	}
	chains := make([][]string, 0, len(order))
	for _, p := range order {
		var chain []string
		for q := p; q != ""; q = parent[q] {
			chain = append(chain, q)
		}
		slices.Reverse(chain)
		chains = append(chains, chain)
	}
	return chains
}

func sortedKeys(g graph) []string {
	keys := make([]string, 0, len(g))
	for k := range g {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// listed is the part of `go list -json` these tests read.
type listed struct {
	ImportPath     string
	Dir            string
	Imports        []string
	TestImports    []string
	XTestImports   []string
	GoFiles        []string
	CgoFiles       []string
	IgnoredGoFiles []string
}

// goList runs `go list` over every package of the module, test files
// included in the imports, and returns them with the module path.
func goList(t *testing.T) (module string, pkgs []listed) {
	t.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to read the import graph: %v", err)
	}
	run := func(args ...string) []byte {
		cmd := exec.Command(goCmd, args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
		}
		return out
	}
	module = strings.TrimSpace(string(run("list", "-m")))
	out := run("list", "-json=ImportPath,Dir,Imports,TestImports,XTestImports,GoFiles,CgoFiles,IgnoredGoFiles", module+"/...")
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decoding go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) == 0 {
		t.Fatalf("go list found no packages in %s", module)
	}
	return module, pkgs
}

// buildGraph keeps the packages of module and their imports of module's
// packages, with paths relative to module.
func buildGraph(module string, pkgs []listed) graph {
	rel := func(paths ...[]string) []string {
		var out []string
		for _, ps := range paths {
			for _, p := range ps {
				if p == module {
					out = append(out, ".")
				} else if r, ok := strings.CutPrefix(p, module+"/"); ok {
					out = append(out, r)
				}
			}
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	g := graph{}
	for _, p := range pkgs {
		g[rel([]string{p.ImportPath})[0]] = pkgInfo{
			imports:     rel(p.Imports),
			testImports: rel(p.TestImports, p.XTestImports),
		}
	}
	return g
}

// TestImportRules checks the module's real import graph against rules.
func TestImportRules(t *testing.T) {
	module, pkgs := goList(t)
	for _, v := range check(buildGraph(module, pkgs), rules) {
		t.Error(v)
	}
}

// TestEveryPackageHasRules keeps the table complete: a new package must be
// given its place in the dependency direction, not just the rules that
// hold for every package. The composition root is the one exception: it
// may import everything.
func TestEveryPackageHasRules(t *testing.T) {
	module, pkgs := goList(t)
	for pkg := range buildGraph(module, pkgs) {
		named := slices.ContainsFunc(rules, func(r rule) bool {
			return !slices.Contains(r.pkgs, "...") && match(pkg, r.pkgs)
		})
		if !named && pkg != "cmd/appserver" {
			t.Errorf("%s is named by no rule: add what it must not import to rules and to its doc.go", pkg)
		}
	}
}

// TestEveryPackageHasDocGo holds the rule that each package says what it
// owns and what it must not import in one place: the package comment of
// its doc.go, and no other file.
func TestEveryPackageHasDocGo(t *testing.T) {
	_, pkgs := goList(t)
	for _, p := range pkgs {
		files := slices.Concat(p.GoFiles, p.CgoFiles, p.IgnoredGoFiles)
		if !slices.Contains(files, "doc.go") {
			t.Errorf("%s has no doc.go", p.ImportPath)
		}
		for _, name := range files {
			f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(p.Dir, name), nil, parser.PackageClauseOnly|parser.ParseComments)
			if err != nil {
				t.Errorf("%s: %v", p.ImportPath, err)
				continue
			}
			switch hasDoc := f.Doc != nil; {
			case name == "doc.go" && !hasDoc:
				t.Errorf("%s: doc.go has no package comment", p.ImportPath)
			case name != "doc.go" && hasDoc:
				t.Errorf("%s: %s has a package comment; it belongs in doc.go", p.ImportPath, name)
			}
		}
	}
}

// TestCheckFindsViolations shows that check catches each kind of forbidden
// dependency in a graph made for the purpose, so TestImportRules passing
// means the real graph is clean, not that check sees nothing.
func TestCheckFindsViolations(t *testing.T) {
	clean := graph{
		"api":                  {},
		"internal/apperr":      {},
		"internal/turns":       {imports: []string{"api", "internal/apperr"}},
		"internal/hub":         {imports: []string{"api", "internal/turns"}},
		"internal/server":      {imports: []string{"internal/hub", "internal/turns"}},
		"internal/httpapi":     {imports: []string{"internal/hub"}, testImports: []string{"internal/server"}},
		"internal/tools/shell": {imports: []string{"internal/apperr"}},
		"cmd/appserver":        {imports: []string{"internal/server", "internal/httpapi", "internal/tools/shell"}},
	}
	if got := check(clean, rules); len(got) != 0 {
		t.Fatalf("a clean graph (an integration test importing a sibling is allowed) got violations:\n%s", strings.Join(got, "\n"))
	}

	for _, tc := range []struct {
		name string
		edit graph // packages replaced in the clean graph
		want string
	}{
		{"api imports ours",
			graph{"api": {imports: []string{"internal/apperr"}}},
			"api must not import internal/apperr (api → internal/apperr)"},
		{"turns imports a transport",
			graph{"internal/turns": {imports: []string{"api", "internal/hub"}}},
			"internal/turns must not import internal/hub (internal/turns → internal/hub)"},
		{"httpapi reaches server through an allowed package",
			graph{"internal/hub": {imports: []string{"api", "internal/turns", "internal/server"}}},
			"internal/httpapi must not import internal/server (internal/httpapi → internal/hub → internal/server)"},
		{"a test file imports cmd",
			graph{"internal/tools/shell": {imports: []string{"internal/apperr"}, testImports: []string{"cmd/appserver"}}},
			"internal/tools/shell must not import cmd/appserver (internal/tools/shell → cmd/appserver)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := maps.Clone(clean)
			maps.Copy(g, tc.edit)
			got := check(g, rules)
			if !slices.ContainsFunc(got, func(v string) bool { return strings.HasPrefix(v, tc.want) }) {
				t.Errorf("want a violation starting %q, got:\n%s", tc.want, strings.Join(got, "\n"))
			}
		})
	}
}

// TestOnlyTheDaemonImportsOpenTelemetry: traces are the composition
// root's concern. The turns report through their Observer, so no layer
// below the daemon depends on the OpenTelemetry API or SDK.
func TestOnlyTheDaemonImportsOpenTelemetry(t *testing.T) {
	module, pkgs := goList(t)
	allowed := []string{module + "/internal/daemon", module + "/cmd/appserver"}
	for _, p := range pkgs {
		if slices.Contains(allowed, p.ImportPath) {
			continue
		}
		for _, imp := range p.Imports {
			if strings.HasPrefix(imp, "go.opentelemetry.io/") {
				t.Errorf("%s imports %s: only internal/daemon builds the tracer; report through turns.Observer", p.ImportPath, imp)
			}
		}
	}
}
