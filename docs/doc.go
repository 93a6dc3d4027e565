// Package docs holds appserver's documentation: the reference of each
// subject (configuration, the protocol, the HTTP API, CI jobs, tools, MCP,
// operations, several daemons, security, building a frontend) and the design. It has no code;
// its tests keep the repository's README.md a front page of at most
// MaxREADMELines lines, and every relative link of README.md, these files
// and the other READMEs pointing at a file that exists and, for a link to
// a heading, at a heading that exists.
//
// It must not import any package of the module, tests included: it checks
// the documents as a reader follows them.
package docs

// MaxREADMELines is the most lines README.md may have: it is the front
// page, and reference material belongs in this directory.
const MaxREADMELines = 300
