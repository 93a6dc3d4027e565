package console

import (
	"bytes"
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

// The build of web/console (npm run build there writes it); a test checks
// that it is what the sources build.
//
//go:embed assets
var assets embed.FS

// securityHeaders are sent with every page and asset: the console loads
// nothing from elsewhere (no fonts, no CDNs) and talks only to its own
// origin, over fetch and the websocket.
var securityHeaders = map[string]string{
	"Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
		"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
	"X-Content-Type-Options": "nosniff",
	"Referrer-Policy":        "no-referrer",
	"X-Frame-Options":        "DENY",
}

// Handler returns a handler that serves the console and hands every other
// request to next.
func Handler(next http.Handler) http.Handler {
	files, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, ok := page(r)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		body, err := fs.ReadFile(files, name)
		if err != nil {
			http.NotFound(w, r)
			return
		}
		h := w.Header()
		for k, v := range securityHeaders {
			h.Set(k, v)
		}
		// index.html names its assets without a content hash, so every
		// load asks whether they changed (the ETag answers cheaply).
		h.Set("Cache-Control", "no-cache")
		http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(body))
	})
}

// page says which embedded file r asks for, if it asks for the console.
func page(r *http.Request) (string, bool) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return "", false
	}
	if isUpgrade(r) {
		return "", false
	}
	p := r.URL.Path
	if p == "/" {
		return "index.html", true
	}
	rest, ok := strings.CutPrefix(p, "/console/")
	if !ok || rest == "" || strings.Contains(rest, "/") || strings.HasPrefix(rest, ".") || path.Clean(rest) != rest {
		return "", false
	}
	return rest, true
}

// isUpgrade reports whether r asks to switch protocols (the websocket).
func isUpgrade(r *http.Request) bool {
	for _, v := range r.Header.Values("Connection") {
		for _, tok := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(tok), "upgrade") {
				return true
			}
		}
	}
	return false
}
