// Package tlscerttest writes self-signed certificates for tests of TLS
// listeners.
//
// It must not import any package of the module: it stands for the
// operator's certificate authority.
package tlscerttest
