package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/go-chi/chi/v5"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
)

// loadServedSpec fetches GET /v1/openapi.yaml from a running API and loads
// it as an OpenAPI document, checked against the OpenAPI 3 rules.
func loadServedSpec(t *testing.T, e *env) *openapi3.T {
	t.Helper()
	r := e.do(req{method: "GET", path: "/v1/openapi.yaml"})
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	require.Equal(t, "application/yaml", r.header.Get("Content-Type"))
	require.Equal(t, api.OpenAPI, string(r.body), "the document built into the binary")
	doc, err := openapi3.NewLoader().LoadFromData(r.body)
	require.NoError(t, err)
	require.NoError(t, doc.Validate(context.Background()))
	return doc
}

// TestOpenAPIDescribesEveryRoute keeps api/openapi.yaml and the router in
// step: every route (method and path) is documented, nothing else is, and
// every problem type is listed. The document is the one the API serves,
// behind the API's auth.
func TestOpenAPIDescribesEveryRoute(t *testing.T) {
	e := newEnv(t, envOpts{token: "op"})
	r := e.do(req{method: "GET", path: "/v1/openapi.yaml", token: tok("")})
	require.Equal(t, http.StatusUnauthorized, r.status)
	doc := loadServedSpec(t, e)

	documented := map[string]bool{}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			documented[method+" "+path] = true
		}
	}
	routes := map[string]bool{}
	param := regexp.MustCompile(`\{(\w+)ID\}`)
	require.NoError(t, chi.Walk((&API{}).routes(), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		routes[method+" "+param.ReplaceAllString(route, "{${1}Id}")] = true
		return nil
	}))
	require.Len(t, routes, 32)
	require.Equal(t, routes, documented)

	var listed []string
	for _, v := range doc.Components.Schemas["Problem"].Value.Properties["type"].Value.Enum {
		listed = append(listed, v.(string))
	}
	for _, typ := range []string{
		api.ProblemInvalidRequest, api.ProblemUnauthorized, api.ProblemNotFound, api.ProblemMethodNotAllowed,
		api.ProblemConflict, api.ProblemEventsGone, api.ProblemPayloadTooLarge, api.ProblemUnsupportedMediaType,
		api.ProblemIdempotencyKeyReused, api.ProblemInternal, api.ProblemNotImplemented, api.ProblemUnavailable,
	} {
		require.Contains(t, listed, typ, "problem type %s is listed", typ)
		require.NotEmpty(t, titles[typ])
	}
}

// The turns the API answers with, completed or failed, and read back from
// the store without usage, are valid instances of the document's Turn: a
// client generated from it accepts them.
func TestOpenAPITurnSchemaAcceptsAnswers(t *testing.T) {
	e := newEnv(t, envOpts{script: `{"steps":[
		{"text":"Hello","usage":{"input_tokens":10,"output_tokens":5,"total_tokens":15}},
		{"error":{"status":401,"message":"bad key"}}]}`})
	schema := loadServedSpec(t, e).Components.Schemas["Turn"].Value
	th := e.createThread(nil, nil)

	r, done := e.postTurn(th.ID, "?wait=true", textInput("hi"), nil, nil)
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	require.Equal(t, api.TurnCompleted, done.Status)
	require.Nil(t, done.Error)
	r2, failed := e.postTurn(th.ID, "?wait=true", textInput("again"), nil, nil)
	require.Equal(t, http.StatusOK, r2.status, string(r2.body))
	require.Equal(t, api.TurnFailed, failed.Status)
	require.NotNil(t, failed.Error)
	fromStore, p := e.api.turnView(context.Background(), th, done.ID)
	require.Nil(t, p)
	require.NotNil(t, fromStore.Usage)
	fromStore.Usage = nil // a turn of a version that kept no usage
	b, err := json.Marshal(fromStore)
	require.NoError(t, err)

	for name, body := range map[string][]byte{"completed": r.body, "failed": r2.body, "without usage": b} {
		var v any
		require.NoError(t, json.Unmarshal(body, &v))
		require.NoError(t, schema.VisitJSON(v, openapi3.MultiErrors()), "%s: %s", name, body)
	}
	// And the schema is not so loose that anything goes.
	require.Error(t, schema.VisitJSON(map[string]any{"id": "x"}))
	bad := map[string]any{}
	require.NoError(t, json.Unmarshal(r.body, &bad))
	bad["usage"] = "lots"
	require.Error(t, schema.VisitJSON(bad))
	require.True(t, slices.Contains(schema.Required, "usage"))
}
