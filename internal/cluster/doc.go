// Package cluster owns thread ownership when several daemons share one
// Postgres database: which node runs a thread's turns, how it keeps that
// right (a lease renewed by one heartbeat UPDATE for all the node's
// leases), how the database refuses the writes of a node that lost it
// (every batch of a leased thread carries the lease's fencing token, checked
// in the write's own transaction), and how the turns of a dead node are
// settled (a failover scan, at start-up and periodically, that takes only
// free or expired leases and marks each dead turn interrupted exactly
// once).
//
// It exists only with the Postgres store: a daemon on the embedded store
// builds none of it and behaves as one node. It reaches the turns manager
// through the Events it is started with and the Lease methods the manager
// calls (the turns package declares the interface it uses), so it must not
// import internal/turns, the transports, the tools or the store backends:
// it keeps its own table in the store's database through the pool the
// composition root hands it.
package cluster
