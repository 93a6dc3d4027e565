// Package budget enforces token and cost limits: of each turn, of each
// thread over its life and of each principal per period. It owns the
// limits and their tightening by a thread's own config, the prices that
// give a model response its cost, the periods, the principals' period
// spending kept in the store (one row per principal and period, added to
// atomically, so that daemons sharing a database share the budget), the
// error a turn ends with at a limit, and the budgets' metrics.
//
// The turns layer charges each response's usage and checks the limits
// before each model request; what a turn does at a limit (fail, or ask
// its client) is the turns layer's, as Config.Ask says.
//
// It imports apperr and the store's interface; it must not import the
// turns layer, the transports, the tools, the configuration, the store
// backends or cmd.
package budget
