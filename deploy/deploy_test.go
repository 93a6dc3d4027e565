package deploy

import (
	"bufio"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"go.yaml.in/yaml/v3"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		removeBuild()
		os.Exit(code)
	}))
}

// maxExposure is the highest `systemd-analyze security` exposure the unit
// may have (0 is locked down, 10 unprotected); the unit's header quotes
// the score and why the rest stays open.
const maxExposure = 3.5

// unitDirectives reads appserver.service's [Service] directives, each
// with every value it is given.
func unitDirectives(t *testing.T) map[string][]string {
	t.Helper()
	f, err := os.Open("appserver.service")
	require.NoError(t, err)
	defer f.Close()
	out := map[string][]string{}
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "["):
			section = line
		case section == "[Service]":
			k, v, ok := strings.Cut(line, "=")
			require.True(t, ok, "not a directive: %q", line)
			out[k] = append(out[k], v)
		}
	}
	require.NoError(t, sc.Err())
	return out
}

// The unit is hardened, and systemd's own analysis agrees: the exposure
// score is at most maxExposure and matches the one the header quotes.
func TestSystemdUnitScore(t *testing.T) {
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("systemd-analyze not found with CI=true: scripts/test-deps.sh installs systemd")
		}
		t.Skip("systemd-analyze not found: install systemd to score the unit")
	}
	out, err := exec.Command("systemd-analyze", "security", "--offline=true", "--no-pager", "appserver.service").CombinedOutput()
	require.NoError(t, err, "%s", out)
	m := regexp.MustCompile(`Overall exposure level for appserver\.service: (\d+\.\d)`).FindSubmatch(out)
	require.NotNil(t, m, "%s", out)
	score, err := strconv.ParseFloat(string(m[1]), 64)
	require.NoError(t, err)
	require.LessOrEqual(t, score, maxExposure, "%s", out)
	unit, err := os.ReadFile("appserver.service")
	require.NoError(t, err)
	require.Contains(t, string(unit), "rates this unit\n# "+string(m[1])+" ", "the header quotes the score")
}

// What the hardening must leave open for the sandbox, and how state,
// workspaces and secrets reach the service.
func TestSystemdUnitDirectives(t *testing.T) {
	d := unitDirectives(t)
	one := func(k string) string {
		t.Helper()
		require.Len(t, d[k], 1, k)
		return d[k][0]
	}
	require.Equal(t, "strict", one("ProtectSystem"))
	require.Equal(t, "appserver", one("StateDirectory"))
	require.NotEmpty(t, d["ReadWritePaths"], "workspace-write needs writable workspaces under ProtectSystem=strict")
	require.True(t, strings.HasPrefix(one("LoadCredential"), "ws-token:"), "the websocket token comes as a credential")
	require.NotEmpty(t, d["EnvironmentFile"], "the model key comes from an environment file")
	require.Contains(t, one("ExecReload"), "-HUP", "reload re-reads the TLS certificate")
	require.Equal(t, "yes", one("NoNewPrivileges"))
	require.Equal(t, "", one("CapabilityBoundingSet"))

	// bubblewrap builds the sandbox from user, mount, pid and net
	// namespaces and mounts a fresh /proc, which any of the /proc
	// protections would make the kernel refuse.
	ns := strings.Fields(one("RestrictNamespaces"))
	for _, want := range []string{"user", "mnt", "pid", "net"} {
		require.Contains(t, ns, want, "RestrictNamespaces")
	}
	for _, k := range []string{"ProtectKernelTunables", "ProtectKernelLogs", "ProtectProc", "ProcSubset", "MemoryDenyWriteExecute"} {
		require.Empty(t, d[k], "%s stays off (see the unit's header)", k)
	}
	filter := one("SystemCallFilter")
	require.True(t, strings.HasPrefix(filter, "~"), "a deny list: %s", filter)
	for _, group := range []string{"@mount", "@privileged", "@debug", "@resources"} {
		require.NotContains(t, strings.Fields(filter[1:]), group)
	}
	require.Contains(t, strings.Fields(one("RestrictAddressFamilies")), "AF_NETLINK")
}

// compose runs the daemon with a healthcheck on /readyz, the model key
// from the host and the token as a secret.
func TestCompose(t *testing.T) {
	raw, err := os.ReadFile("../docker-compose.yml")
	require.NoError(t, err)
	var c struct {
		Services map[string]struct {
			Environment map[string]string `yaml:"environment"`
			Secrets     []string          `yaml:"secrets"`
			Command     []string          `yaml:"command"`
			Healthcheck struct {
				Test []string `yaml:"test"`
			} `yaml:"healthcheck"`
		} `yaml:"services"`
		Secrets map[string]struct {
			File string `yaml:"file"`
		} `yaml:"secrets"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &c))
	app, ok := c.Services["appserver"]
	require.True(t, ok)
	require.Contains(t, strings.Join(app.Healthcheck.Test, " "), "/readyz")
	require.Contains(t, app.Environment["OPENAI_API_KEY"], "${OPENAI_API_KEY")
	require.Contains(t, app.Secrets, "ws-token")
	require.Equal(t, "./deploy/ws-token", c.Secrets["ws-token"].File)
	require.Contains(t, app.Command, "/run/secrets/ws-token")

	// The healthcheck's tool is in the image.
	dockerfile, err := os.ReadFile("../Dockerfile")
	require.NoError(t, err)
	require.Regexp(t, `apt-get install [^\n]*\b`+app.Healthcheck.Test[1]+`\b`, string(dockerfile))
}

// .dockerignore keeps the repository's history and the secrets written
// under deploy/ out of the build context, hence out of every image layer.
func TestDockerignore(t *testing.T) {
	raw, err := os.ReadFile("../.dockerignore")
	require.NoError(t, err)
	var patterns []string
	for _, l := range strings.Split(string(raw), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			patterns = append(patterns, l)
		}
	}
	for _, want := range []string{".git", "deploy/ws-token", "deploy/env", ".env"} {
		require.Contains(t, patterns, want)
	}
}
