// Package jsonscan is a strict JSON scanner: it finds where values end
// without decoding them. It accepts exactly what encoding/json accepts
// (up to MaxDepth of nesting), so that callers with fast paths of their
// own can leave anything it rejects to encoding/json for the error.
//
// It must not import any package of the module: the model clients, the
// JSON-RPC connection, the server and the dynamic tools use it on their hot
// paths.
package jsonscan
