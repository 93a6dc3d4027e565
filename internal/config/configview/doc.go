// Package configview renders the daemon's configuration in wire types and
// takes clients' edits of it: the model/list and modelProvider/list
// entries, the context window clients are told, config/read's effective
// values with their layers, the configWarning notifications of a load, and
// the writer of config/value/write and config/batchWrite (the user configs
// in data_dir: the daemon-wide one, and one per principal).
//
// It imports api, internal/config and internal/apperr only: config itself
// stays free of the wire contract, and no service depends on this view.
package configview
