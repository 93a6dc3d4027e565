// Package transcript is the read side of threads and the stored forms it
// reads: what a thread's record keeps besides its columns (ThreadMeta, with
// a child's SubAgent record, its parent's SpawnEdges and the Goal), a
// turn's model history with its two encodings (History: the stored one of
// the turn meta and the wire one of every later model request), the
// conversions between stored records, wire types and model input, and the
// reading of a thread's turns and items from whichever store holds them
// (Reader): thread/read's turns, thread/turns/list and thread/items/list
// pages, the ThreadStream a websocket reply is encoded from while it is
// written, the model history a turn starts from, and the single turns and
// item pages the HTTP API answers with (TurnRecord, ItemRecords).
//
// It reads what the store holds, never what a client saw: a turn's status,
// items and usage come from its records. It knows no loaded thread, no
// running turn and no transport: the thread table (internal/turns) says
// which store holds a thread and what it has in memory, and its agent loop
// adds to a History.
//
// It must not import internal/turns or its other subpackages, the
// transports, the tool packages, any store backend or cmd: it sees the
// store through store.Store only.
package transcript
