package httpapi

import (
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
)

// TestOpenAPIDescribesEveryRoute keeps api/openapi.yaml and the router in
// step: every route (method and path) is documented, nothing else is, and
// every problem type is listed.
func TestOpenAPIDescribesEveryRoute(t *testing.T) {
	raw, err := os.ReadFile("../../api/openapi.yaml")
	require.NoError(t, err)
	spec := string(raw)
	require.True(t, strings.HasPrefix(spec, "openapi: 3."), "an OpenAPI 3 document")

	// Paths are the keys at two spaces under "paths:", methods at four.
	documented := map[string]bool{}
	inPaths, path := false, ""
	pathKey := regexp.MustCompile(`^  (/[^:]*):\s*$`)
	methodKey := regexp.MustCompile(`^    (get|post|put|patch|delete):\s*$`)
	for _, line := range strings.Split(spec, "\n") {
		switch {
		case line == "paths:":
			inPaths = true
		case inPaths && len(line) > 0 && line[0] != ' ':
			inPaths = false
		case inPaths:
			if m := pathKey.FindStringSubmatch(line); m != nil {
				path = m[1]
			} else if m := methodKey.FindStringSubmatch(line); m != nil {
				documented[strings.ToUpper(m[1])+" "+path] = true
			}
		}
	}

	a := &API{}
	routes := map[string]bool{}
	param := regexp.MustCompile(`\{(\w+)ID\}`)
	require.NoError(t, chi.Walk(a.routes(), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		routes[method+" "+param.ReplaceAllString(route, "{${1}Id}")] = true
		return nil
	}))
	require.Len(t, routes, 10)
	require.Equal(t, routes, documented)

	for _, typ := range []string{
		api.ProblemInvalidRequest, api.ProblemUnauthorized, api.ProblemNotFound, api.ProblemMethodNotAllowed,
		api.ProblemConflict, api.ProblemEventsGone, api.ProblemPayloadTooLarge, api.ProblemUnsupportedMediaType,
		api.ProblemIdempotencyKeyReused, api.ProblemInternal, api.ProblemNotImplemented, api.ProblemUnavailable,
	} {
		require.Contains(t, spec, "- "+typ, "problem type %s is listed", typ)
		require.NotEmpty(t, titles[typ])
	}
}
