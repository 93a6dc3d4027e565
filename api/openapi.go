package api

import _ "embed" // for OpenAPI

// OpenAPI is openapi.yaml, the description of the HTTP/JSON API, built into
// the binary so that the daemon serves the document of its own version
// (GET /v1/openapi.yaml).
//
//go:embed openapi.yaml
var OpenAPI string
