// Package apperr defines the one domain error type of appserver. Errors carry
// a Code that the transports map once, at the edge, to JSON-RPC codes and HTTP
// statuses; internal details stay in the log.
//
// It must not import any package of the module: every layer returns its
// errors.
package apperr
