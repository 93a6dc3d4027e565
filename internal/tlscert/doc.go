// Package tlscert serves the daemon's TLS certificate from a certificate
// file and a key file, and reads them again on demand (SIGHUP), so that a
// renewed certificate is served without a restart and without dropping the
// connections that are open.
//
// The certificate in use is held behind an atomic pointer that the TLS
// handshake reads (tls.Config.GetCertificate): a reload swaps it, and every
// handshake after the swap presents the new one. A reload that fails (a
// missing file, a key that does not match the certificate) keeps the
// certificate in use and is logged: a botched renewal must not take the
// listener down.
//
// It must not import any package of the module: the composition root wraps
// the listener with it.
package tlscert
