package deploy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// This file holds the files that run several daemons (docker-compose.yml
// and nginx.conf beside it, k8s/) to the daemon they start: every flag and
// APPSERVER_* variable they pass is one the daemon has, the ports agree
// from the listen address to the load balancer, and the probe paths answer
// on a real daemon. The end-to-end run of nginx.conf in front of two
// daemons is bench's TestNginx.

// buildDir holds the daemon built once for the package's tests; TestMain
// removes it.
var (
	buildOnce sync.Once
	buildDir  string
	buildBin  string
	buildErr  error
)

// daemonBinary builds ./cmd/appserver once and returns its path.
func daemonBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "appserver-deploy-")
		if buildErr != nil {
			return
		}
		bin := filepath.Join(buildDir, "appserver")
		cmd := exec.Command("go", "build", "-o", bin, "./cmd/appserver")
		cmd.Dir = ".."
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/appserver: %v\n%s", err, out)
			return
		}
		buildBin = bin
	})
	require.NoError(t, buildErr)
	return buildBin
}

// removeBuild deletes the binary daemonBinary built, if any.
func removeBuild() {
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
}

// serveFlags are the flags `appserver serve --help` lists, without dashes.
func serveFlags(t *testing.T) map[string]bool {
	t.Helper()
	out, err := exec.Command(daemonBinary(t), "serve", "--help").CombinedOutput()
	require.NoError(t, err, "%s", out)
	flags := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^  -([a-z0-9-]+)`).FindAllSubmatch(out, -1) {
		flags[string(m[1])] = true
	}
	require.Contains(t, flags, "database-url", "%s", out)
	return flags
}

// checkDaemonArgs checks a daemon command line and environment against the
// real daemon: the subcommand is serve, every flag exists, every
// APPSERVER_* variable names a key that has a flag. It returns the
// settings by key (flags over environment, as the daemon layers them).
func checkDaemonArgs(t *testing.T, flags map[string]bool, args []string, env map[string]string) map[string]string {
	t.Helper()
	require.NotEmpty(t, args)
	require.Equal(t, "serve", args[0])
	set := map[string]string{}
	for k, v := range env {
		key, ok := strings.CutPrefix(k, "APPSERVER_")
		if !ok {
			continue
		}
		name := strings.ReplaceAll(strings.ToLower(key), "_", "-")
		require.True(t, flags[name], "%s: the daemon has no key %s", k, strings.ToLower(key))
		set[name] = v
	}
	for i := 1; i < len(args); i++ {
		name, ok := strings.CutPrefix(args[i], "--")
		require.True(t, ok, "argument %q is not a flag", args[i])
		name, value, hasValue := strings.Cut(name, "=")
		require.True(t, flags[name], "the daemon has no flag --%s", name)
		if name == "migrate" {
			value = "true"
		} else if !hasValue {
			require.Less(t, i+1, len(args), "--%s needs a value", name)
			i++
			value = args[i]
		}
		set[name] = value
	}
	return set
}

// listenPort is the port of a ws:// listen address on all interfaces
// (what a container must listen on to be reachable).
func listenPort(t *testing.T, listen string) int {
	t.Helper()
	u, err := url.Parse(listen)
	require.NoError(t, err)
	require.Equal(t, "ws", u.Scheme, "TLS ends at the load balancer")
	require.Equal(t, "0.0.0.0", u.Hostname(), "a container listens on every interface")
	p, err := strconv.Atoi(u.Port())
	require.NoError(t, err)
	return p
}

// nginxConf is what the tests read from nginx.conf.
type nginxConf struct {
	raw       string
	upstreams map[string][]string // name → "host:port" of each server
	listen    int
}

func readNginx(t *testing.T) nginxConf {
	t.Helper()
	raw, err := os.ReadFile("nginx.conf")
	require.NoError(t, err)
	c := nginxConf{raw: string(raw), upstreams: map[string][]string{}}
	var current string
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		f := strings.Fields(strings.TrimSuffix(strings.TrimSpace(sc.Text()), ";"))
		switch {
		case len(f) == 0 || strings.HasPrefix(f[0], "#"):
		case f[0] == "upstream":
			current = f[1]
		case f[0] == "}":
			current = ""
		case f[0] == "server" && current != "":
			c.upstreams[current] = append(c.upstreams[current], f[1])
		case f[0] == "listen":
			c.listen, err = strconv.Atoi(f[1])
			require.NoError(t, err, "listen %s", f[1])
		}
	}
	require.NoError(t, sc.Err())
	return c
}

// directive returns the arguments of the one top-level-or-server directive
// name in nginx.conf (it must appear once).
func (c nginxConf) directive(t *testing.T, name string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^\s*`+regexp.QuoteMeta(name)+`\s+([^;]*);`).FindAllStringSubmatch(c.raw, -1)
	require.Len(t, m, 1, "nginx.conf: %s", name)
	return m[0][1]
}

// nginxSeconds parses an nginx time such as 75s, 10m or 1h.
func nginxSeconds(t *testing.T, v string) time.Duration {
	t.Helper()
	v = strings.TrimSpace(v)
	unit := map[byte]time.Duration{'s': time.Second, 'm': time.Minute, 'h': time.Hour}[v[len(v)-1]]
	require.NotZero(t, unit, "time %q", v)
	n, err := strconv.Atoi(v[:len(v)-1])
	require.NoError(t, err)
	return time.Duration(n) * unit
}

// The load balancer passes websockets and event streams through as the
// daemon writes them, and outlives their idle periods.
func TestNginxConf(t *testing.T) {
	c := readNginx(t)
	require.Equal(t, "1.1", c.directive(t, "proxy_http_version"), "websocket upgrades need HTTP/1.1 upstream")
	require.Regexp(t, `(?m)^\s*proxy_set_header Upgrade \$http_upgrade;`, c.raw)
	require.Regexp(t, `(?m)^\s*proxy_set_header Connection \$connection_upgrade;`, c.raw)
	require.Regexp(t, `(?s)map \$http_upgrade \$connection_upgrade \{\s*default upgrade;`, c.raw)
	require.Equal(t, "off", c.directive(t, "proxy_buffering"), "server-sent events must not wait in nginx's buffers")
	// The SSE keep-alive comes every 15 s (the HTTP API's default
	// heartbeat): an idle event stream must not hit the read timeout.
	require.Greater(t, nginxSeconds(t, c.directive(t, "proxy_read_timeout")), 15*time.Second)
	require.GreaterOrEqual(t, nginxSeconds(t, c.directive(t, "proxy_send_timeout")), time.Minute)
	// Browsers' tickets ride in query strings: the access log's format
	// leaves them out.
	require.Equal(t, "/dev/stdout appserver", c.directive(t, "access_log"))
	format := c.directive(t, "log_format")
	require.True(t, strings.HasPrefix(format, "appserver "), format)
	require.NotRegexp(t, `\$(request|request_uri|args|query_string|arg_\w+)([^_a-z]|$)`, format, "no query string in the access log")
	require.Len(t, c.upstreams, 2)
	for name, servers := range c.upstreams {
		require.Len(t, servers, 2, "upstream %s balances two daemons", name)
	}
	require.Equal(t, c.upstreams["appserver"], c.upstreams["appserver_by_thread"], "both upstreams name the same daemons")
}

// compose runs two daemons, configured alike, on one Postgres, behind
// nginx: the upstreams are the daemon services at the daemons' port, and
// nginx is published on the port it listens on.
func TestComposeCluster(t *testing.T) {
	raw, err := os.ReadFile("docker-compose.yml")
	require.NoError(t, err)
	type service struct {
		Build       any               `yaml:"build"`
		Image       string            `yaml:"image"`
		Environment map[string]string `yaml:"environment"`
		Command     []string          `yaml:"command"`
		Secrets     []string          `yaml:"secrets"`
		Expose      []string          `yaml:"expose"`
		Ports       []string          `yaml:"ports"`
		Volumes     []string          `yaml:"volumes"`
		DependsOn   map[string]struct {
			Condition string `yaml:"condition"`
		} `yaml:"depends_on"`
		StopGracePeriod string `yaml:"stop_grace_period"`
		Healthcheck     struct {
			Test []string `yaml:"test"`
		} `yaml:"healthcheck"`
	}
	var c struct {
		Services map[string]service `yaml:"services"`
		Secrets  map[string]struct {
			File string `yaml:"file"`
		} `yaml:"secrets"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &c))
	flags := serveFlags(t)
	ng := readNginx(t)

	var daemons []string
	var dbURL string
	for name, s := range c.Services {
		if len(s.Command) == 0 || s.Command[0] != "serve" {
			continue
		}
		daemons = append(daemons, name)
		set := checkDaemonArgs(t, flags, s.Command, s.Environment)
		require.Equal(t, "service_healthy", s.DependsOn["postgres"].Condition, name)
		require.True(t, strings.HasPrefix(set["database-url"], "postgres://"), "%s: database_url %q", name, set["database-url"])
		require.Contains(t, set["database-url"], "@postgres:5432/", "%s: the compose Postgres", name)
		if dbURL == "" {
			dbURL = set["database-url"]
		}
		require.Equal(t, dbURL, set["database-url"], "%s: every daemon on one Postgres", name)
		require.Equal(t, "capability-token", set["ws-auth"], "%s: a daemon on every interface needs websocket auth", name)
		tokenFile := set["ws-token-file"]
		require.True(t, strings.HasPrefix(tokenFile, "/run/secrets/"), name)
		require.Contains(t, s.Secrets, filepath.Base(tokenFile), name)
		require.Equal(t, "./ws-token", c.Secrets[filepath.Base(tokenFile)].File)
		port := listenPort(t, set["listen"])
		require.Contains(t, s.Expose, strconv.Itoa(port), name)
		hc := strings.Join(s.Healthcheck.Test, " ")
		require.Contains(t, hc, fmt.Sprintf("http://127.0.0.1:%d/readyz", port), name)
		for _, up := range ng.upstreams {
			require.Contains(t, up, fmt.Sprintf("%s:%d", name, port), "nginx balances %s", name)
		}
		grace, err := time.ParseDuration(s.StopGracePeriod)
		require.NoError(t, err)
		require.Greater(t, grace, 10*time.Second, "%s: more than the daemon's shutdown_grace_period", name)
	}
	slices.Sort(daemons)
	require.Len(t, daemons, 2, "two daemon replicas")
	for _, up := range ng.upstreams {
		require.Len(t, up, len(daemons), "nginx balances exactly the compose daemons")
	}
	require.Equal(t, c.Services[daemons[0]].Environment, c.Services[daemons[1]].Environment, "the replicas are configured alike")

	lb, ok := c.Services["nginx"]
	require.True(t, ok)
	require.Contains(t, lb.Volumes, "./nginx.conf:/etc/nginx/nginx.conf:ro")
	require.Equal(t, []string{fmt.Sprintf("127.0.0.1:7878:%d", ng.listen)}, lb.Ports)
	for _, d := range daemons {
		require.Equal(t, "service_healthy", lb.DependsOn[d].Condition, "nginx waits for %s", d)
	}
	build, ok := lb.Build.(map[string]any)
	require.True(t, ok, "nginx is built from the distribution's package")
	dockerfile, err := os.ReadFile(build["dockerfile"].(string))
	require.NoError(t, err)
	require.Regexp(t, `(?m)^FROM debian:`, string(dockerfile))
	require.Regexp(t, `apt-get install [^\n]*\bnginx`, string(dockerfile))
}

// k8sObject is the part of a manifest the test reads.
type k8sObject struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name   string            `yaml:"name"`
		Labels map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
	StringData map[string]string `yaml:"stringData"`
	Spec       struct {
		Replicas int              `yaml:"replicas"`
		Selector yaml.Node        `yaml:"selector"` // a Deployment's matchLabels or a Service's map
		Ports    []k8sServicePort `yaml:"ports"`
		Template k8sPodTemplate   `yaml:"template"`
	} `yaml:"spec"`
}

type k8sServicePort struct {
	Port       int    `yaml:"port"`
	TargetPort string `yaml:"targetPort"`
}

type k8sProbe struct {
	HTTPGet struct {
		Path string `yaml:"path"`
		Port string `yaml:"port"`
	} `yaml:"httpGet"`
}

type k8sPodTemplate struct {
	Metadata struct {
		Labels map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
	Spec struct {
		TerminationGracePeriodSeconds int `yaml:"terminationGracePeriodSeconds"`
		Containers                    []struct {
			Args []string `yaml:"args"`
			Env  []struct {
				Name      string `yaml:"name"`
				Value     string `yaml:"value"`
				ValueFrom struct {
					SecretKeyRef struct {
						Name string `yaml:"name"`
						Key  string `yaml:"key"`
					} `yaml:"secretKeyRef"`
				} `yaml:"valueFrom"`
			} `yaml:"env"`
			Ports []struct {
				Name          string `yaml:"name"`
				ContainerPort int    `yaml:"containerPort"`
			} `yaml:"ports"`
			ReadinessProbe k8sProbe `yaml:"readinessProbe"`
			LivenessProbe  k8sProbe `yaml:"livenessProbe"`
			Resources      struct {
				Requests map[string]string `yaml:"requests"`
			} `yaml:"resources"`
			VolumeMounts []struct {
				Name      string `yaml:"name"`
				MountPath string `yaml:"mountPath"`
			} `yaml:"volumeMounts"`
		} `yaml:"containers"`
		Volumes []struct {
			Name   string `yaml:"name"`
			Secret struct {
				SecretName string `yaml:"secretName"`
				Items      []struct {
					Key  string `yaml:"key"`
					Path string `yaml:"path"`
				} `yaml:"items"`
			} `yaml:"secret"`
		} `yaml:"volumes"`
	} `yaml:"spec"`
}

// readK8s reads every manifest under k8s/, by kind and name.
func readK8s(t *testing.T) map[string]k8sObject {
	t.Helper()
	files, err := filepath.Glob("k8s/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	out := map[string]k8sObject{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		dec := yaml.NewDecoder(bytes.NewReader(raw))
		for {
			var o k8sObject
			if err := dec.Decode(&o); errors.Is(err, io.EOF) {
				break
			} else {
				require.NoError(t, err, f)
			}
			out[o.Kind+"/"+o.Metadata.Name] = o
		}
	}
	return out
}

// The Deployment runs several replicas of the real daemon on the Postgres
// its Secret names, the probes use paths and ports the daemon serves, and
// the Service reaches them.
func TestKubernetes(t *testing.T) {
	objs := readK8s(t)
	dep, ok := objs["Deployment/appserver"]
	require.True(t, ok, "a Deployment named appserver")
	require.GreaterOrEqual(t, dep.Spec.Replicas, 2, "several replicas")
	pod := dep.Spec.Template
	var sel struct {
		MatchLabels map[string]string `yaml:"matchLabels"`
	}
	require.NoError(t, dep.Spec.Selector.Decode(&sel))
	require.NotEmpty(t, sel.MatchLabels)
	for k, v := range sel.MatchLabels {
		require.Equal(t, v, pod.Metadata.Labels[k], "the selector matches the pods")
	}
	require.Len(t, pod.Spec.Containers, 1)
	ctr := pod.Spec.Containers[0]

	secrets := map[string]k8sObject{}
	for _, o := range objs {
		if o.Kind == "Secret" {
			secrets[o.Metadata.Name] = o
		}
	}
	env := map[string]string{}
	for _, e := range ctr.Env {
		ref := e.ValueFrom.SecretKeyRef
		if ref.Name != "" {
			s, ok := secrets[ref.Name]
			require.True(t, ok, "%s: Secret %s is in k8s/", e.Name, ref.Name)
			require.Contains(t, s.StringData, ref.Key, "%s: Secret %s has %s", e.Name, ref.Name, ref.Key)
			env[e.Name] = s.StringData[ref.Key]
			continue
		}
		require.NotEqual(t, "APPSERVER_DATABASE_URL", e.Name, "the database URL comes from a Secret")
		env[e.Name] = e.Value
	}
	set := checkDaemonArgs(t, serveFlags(t), ctr.Args, env)
	require.True(t, strings.HasPrefix(set["database-url"], "postgres://"), "database_url from the Secret: %q", set["database-url"])
	require.Equal(t, "true", set["migrate"])
	require.Equal(t, "capability-token", set["ws-auth"])

	// The token file is a key of the Secret, mounted where the flag says.
	tokenDir, tokenName := filepath.Split(set["ws-token-file"])
	mounted := false
	for _, m := range ctr.VolumeMounts {
		if filepath.Clean(m.MountPath) != filepath.Clean(tokenDir) {
			continue
		}
		for _, v := range pod.Spec.Volumes {
			if v.Name != m.Name {
				continue
			}
			s, ok := secrets[v.Secret.SecretName]
			require.True(t, ok, "volume %s: Secret %q is in k8s/", v.Name, v.Secret.SecretName)
			for _, it := range v.Secret.Items {
				if it.Path == tokenName {
					require.Contains(t, s.StringData, it.Key)
					mounted = true
				}
			}
		}
	}
	require.True(t, mounted, "--ws-token-file %s is a mounted Secret key", set["ws-token-file"])

	port := listenPort(t, set["listen"])
	ports := map[string]int{}
	for _, p := range ctr.Ports {
		ports[p.Name] = p.ContainerPort
	}
	portOf := func(ref string) int {
		if n, err := strconv.Atoi(ref); err == nil {
			return n
		}
		require.Contains(t, ports, ref, "named port %s", ref)
		return ports[ref]
	}
	require.Equal(t, "/readyz", ctr.ReadinessProbe.HTTPGet.Path)
	require.Equal(t, port, portOf(ctr.ReadinessProbe.HTTPGet.Port), "the readiness probe reaches the listener")
	require.Equal(t, "/healthz", ctr.LivenessProbe.HTTPGet.Path, "liveness does not depend on the store")
	require.Equal(t, port, portOf(ctr.LivenessProbe.HTTPGet.Port), "the liveness probe reaches the listener")
	require.NotEmpty(t, ctr.Resources.Requests["cpu"])
	require.NotEmpty(t, ctr.Resources.Requests["memory"])
	require.Greater(t, pod.Spec.TerminationGracePeriodSeconds, 10, "more than the daemon's shutdown_grace_period")

	svc, ok := objs["Service/appserver"]
	require.True(t, ok, "a Service named appserver")
	var svcSel map[string]string
	require.NoError(t, svc.Spec.Selector.Decode(&svcSel))
	require.NotEmpty(t, svcSel)
	for k, v := range svcSel {
		require.Equal(t, v, pod.Metadata.Labels[k], "the Service selects the pods")
	}
	require.Len(t, svc.Spec.Ports, 1)
	require.Equal(t, port, portOf(svc.Spec.Ports[0].TargetPort), "the Service reaches the listener")
}

// The probe paths the manifests use answer 200 on a real daemon.
func TestProbePaths(t *testing.T) {
	cmd := exec.Command(daemonBinary(t), "serve", "--listen", "ws://127.0.0.1:0", "--data-dir", t.TempDir(), "--log-level", "warn")
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	addr := make(chan string, 1)
	exited := make(chan error, 1)
	go func() {
		// The daemon's address is on its first line; the rest is drained
		// so that it never blocks on a full pipe.
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "appserver listening on "); ok {
				select {
				case addr <- a:
				default:
				}
			}
		}
		exited <- cmd.Wait()
	}()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			require.NoError(t, err, "clean exit on SIGTERM\n%s", &stderr)
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			t.Errorf("no exit within 10 s of SIGTERM")
		}
	}()
	var base string
	select {
	case a := <-addr:
		base = "http://" + strings.TrimPrefix(a, "ws://")
	case <-time.After(30 * time.Second):
		t.Fatalf("the daemon printed no address within 30 s\n%s", &stderr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, p := range []string{"/readyz", "/healthz"} {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+p, nil)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, p)
	}
}
