// Package deploy holds the files that run appserver for real: the systemd
// unit, the example configuration, a Grafana dashboard of the daemon's
// metrics (its queries are checked by internal/daemon's tests) and, in the
// repository's root, the Dockerfile, docker-compose.yml and .dockerignore. It has no code; its
// tests hold the files to what the README's Deploying section promises
// (a hardened unit whose score systemd-analyze confirms, credentials out of
// the config, a compose healthcheck on /readyz, no secret in the image).
//
// It must not import any package of the module.
package deploy
