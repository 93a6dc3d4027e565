// Package logtest captures a daemon's JSON log in tests: a Buffer that
// many goroutines may write, read back as decoded lines.
//
// It is imported by test files only and imports nothing of ours.
package logtest
