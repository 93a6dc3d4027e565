// Package console serves the web console: a single page, built from
// web/console (TypeScript on the client library in sdk/typescript) and
// embedded in the binary, so the daemon serves it with no Node step. It
// answers plain GET and HEAD requests for "/" and "/console/..." and hands
// every other request (the websocket upgrade at "/" included) to the
// handler it wraps.
//
// It knows no protocol and must not import anything of ours.
package console
