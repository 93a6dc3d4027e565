// Package rpcws is the JSON-RPC connection of appserver's clients, in
// Codex framing, over any transport: one message per frame, no "jsonrpc"
// member on output and none required on input, request ids that are
// strings or signed 64-bit integers echoed back exactly as written, frames
// that are not one of the four message shapes dropped without closing the
// connection, and an outbound queue bounded in frames and in bytes whose
// overflow disconnects the slow client instead of stalling the server.
//
// A Framer is the transport: it cuts the inbound bytes into messages and
// writes outbound ones. WebSocket is one (a text message per frame, close
// frames with a status; it serves ws://, wss:// and the unix:// control
// socket), Lines another (newline-delimited JSON, for stdio://). Nothing
// above the Framer knows which one it runs on.
//
// Memory is bounded in bytes: an InboundBudget shared by the server's
// connections holds the inbound frames in flight (read and not yet done
// being handled); a frame that does not fit is refused with -32001 rather
// than waited for (see InboundBudget for why). Large frames are read in
// chunks and copied once into a slice of their size, and the pools keep no
// buffer above 64 KiB, so a burst of large frames leaves nothing pooled.
// A reply too large to build whole (a StreamedResult: thread/read of a big
// thread) is queued as a StreamedFrame that the writer has encode itself
// into the message, in pieces, while it is sent.
//
// A Stream is a Framer's frames (frames in within the inbound budget, a
// lazily started writer out); a Conn reads a Stream, decodes each frame
// once into a Request, hands it to a Handler, encodes each reply once, and
// keeps the in-flight state of both directions (requests being served,
// server→client requests awaiting their answer) under one lock, cleaned up
// when the connection ends.
//
// It owns framing and correlation only: which methods exist, who may call
// them, and in what order they run belong to the caller (internal/server).
// It must not import internal/server or anything above it.
package rpcws
