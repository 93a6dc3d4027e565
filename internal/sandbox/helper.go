package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"

	"github.com/appserver/appserver/internal/policy"
)

// The helper's command line:
//
//	<exe> __appserver-sandbox --sandbox-policy-json <json> --sandbox-policy-cwd <dir>
//	      [--filesystem landlock|external] -- <argv...>
//	<exe> __appserver-sandbox --probe
//
// The command's working directory is the helper's own (exec.Cmd.Dir).
const (
	flagPolicy     = "--sandbox-policy-json"
	flagPolicyCwd  = "--sandbox-policy-cwd"
	flagFilesystem = "--filesystem"
	flagProbe      = "--probe"
	flagHold       = "--hold"
	flagNetnsFD    = "--netns-fd"

	// netnsChildFD is where the shared namespace descriptor lands in the
	// helper (ExtraFiles[0]).
	netnsChildFD = 3

	// fsLandlock restricts the file system with Landlock in the helper.
	fsLandlock = "landlock"
	// fsExternal leaves the file system alone: bubblewrap already built the
	// view the command sees.
	fsExternal = "external"
)

// helperPrefix starts every message the helper prints about itself; the
// word "sandbox" makes the denial heuristic treat a setup failure as a
// denial, so the orchestrator can offer to re-run outside the sandbox.
const helperPrefix = "appserver sandbox: "

// MaybeRunHelper runs the sandbox helper and exits when the process was
// started as one (os.Args[1] == HelperCommand); otherwise it returns at once.
// Call it first thing in main, before flags, signals or goroutines.
func MaybeRunHelper() {
	if len(os.Args) > 1 && os.Args[1] == HelperCommand {
		os.Exit(HelperMain(os.Args[2:]))
	}
}

// helperConfig is the parsed helper command line.
type helperConfig struct {
	policy    policy.SandboxPolicy
	policyCwd string
	fs        string
	argv      []string
	probe     bool
	hold      bool
	netnsFD   int // -1: none
}

func parseHelperArgs(args []string) (helperConfig, error) {
	cfg := helperConfig{fs: fsLandlock, netnsFD: -1}
	havePolicy := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			cfg.argv = args[i+1:]
			break
		}
		if a == flagProbe || a == flagHold {
			cfg.probe = cfg.probe || a == flagProbe
			cfg.hold = cfg.hold || a == flagHold
			continue
		}
		if i+1 >= len(args) {
			return cfg, fmt.Errorf("flag %s needs a value", a)
		}
		v := args[i+1]
		i++
		switch a {
		case flagPolicy:
			if err := json.Unmarshal([]byte(v), &cfg.policy); err != nil {
				return cfg, fmt.Errorf("bad %s: %w", flagPolicy, err)
			}
			havePolicy = true
		case flagPolicyCwd:
			cfg.policyCwd = v
		case flagNetnsFD:
			fd, err := strconv.Atoi(v)
			if err != nil || fd < 3 {
				return cfg, fmt.Errorf("bad %s %q", flagNetnsFD, v)
			}
			cfg.netnsFD = fd
		case flagFilesystem:
			if v != fsLandlock && v != fsExternal {
				return cfg, fmt.Errorf("bad %s %q", flagFilesystem, v)
			}
			cfg.fs = v
		default:
			return cfg, fmt.Errorf("unknown flag %q", a)
		}
	}
	if cfg.probe {
		return cfg, nil
	}
	switch {
	case !havePolicy:
		return cfg, fmt.Errorf("missing %s", flagPolicy)
	case !filepath.IsAbs(cfg.policyCwd):
		return cfg, fmt.Errorf("%s must be an absolute path", flagPolicyCwd)
	case len(cfg.argv) == 0:
		return cfg, errors.New("missing command after --")
	}
	return cfg, nil
}

// HelperMain is the sandbox helper's entry point: args are the arguments
// after HelperCommand. It applies the policy's restrictions to the current
// process and execs the command, so it only returns on failure, with the
// exit code to use: 1 when the sandbox could not be set up, 126 or 127 when
// the command could not be executed (as a shell would).
func HelperMain(args []string) int {
	cfg, err := parseHelperArgs(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s%v\n", helperPrefix, err)
		return 1
	}
	if cfg.probe {
		if cfg.hold {
			// holdNetns: signal that we run, then wait for stdin to close.
			_, _ = os.Stdout.Write([]byte{1})
			_, _ = io.Copy(io.Discard, os.Stdin)
		}
		return 0
	}
	// Namespaces and the exec belong to this thread (see joinNetns).
	runtime.LockOSThread()
	if cfg.netnsFD >= 0 {
		if err := joinNetns(cfg.netnsFD); err != nil {
			fmt.Fprintf(os.Stderr, "%s%v\n", helperPrefix, err)
			return 1
		}
	}
	env := restoreLoaderEnv(os.Environ())
	dir, _ := os.Getwd()
	path, err := lookPath(cfg.argv[0], envValue(env, "PATH"), dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return execFailureCode(err)
	}
	if err := applyPolicy(cfg, env); err != nil {
		fmt.Fprintf(os.Stderr, "%s%v\n", helperPrefix, err)
		return 1
	}
	err = syscall.Exec(path, cfg.argv, env)
	fmt.Fprintf(os.Stderr, "exec: %q: %v\n", cfg.argv[0], err)
	return execFailureCode(err)
}

func execFailureCode(err error) int {
	if isNotFound(err) || errors.Is(err, syscall.ENOENT) {
		return 127
	}
	if errors.Is(err, fs.ErrPermission) {
		return 126
	}
	return 126
}
