// Package deploy holds the files that run appserver for real: the systemd
// unit, the example configuration, a Grafana dashboard of the daemon's
// metrics (its queries are checked by internal/daemon's tests) and, in the
// repository's root, the Dockerfile, docker-compose.yml and .dockerignore. It has no code; its
// tests hold the files to what docs/operations.md ("Deploying") promises
// (a hardened unit whose score systemd-analyze confirms, credentials out of
// the config, a compose healthcheck on /readyz, no secret in the image).
//
// Several daemons on one Postgres: docker-compose.yml here runs two behind
// nginx (nginx.conf, nginx.Dockerfile) and k8s/ holds a Deployment, its
// Service and the Secret with the database URL. Their tests check them
// against the daemon itself (the flags `appserver serve --help` lists, the
// probe paths a started daemon answers); bench's TestNginx runs nginx.conf
// in front of two daemons.
//
// It must not import any package of the module.
package deploy
