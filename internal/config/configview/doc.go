// Package configview renders the daemon's configuration in wire types: the
// model/list entries, config/read's effective values with their layers, and
// the configWarning notifications of a load.
//
// It imports api and internal/config only: config itself stays free of the
// wire contract, and no service depends on this view.
package configview
