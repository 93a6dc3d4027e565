// Package testenv prepares the process environment of test binaries that
// run commands the way the daemon does. It is imported by tests only.
//
// It must not import any package of the module.
package testenv
