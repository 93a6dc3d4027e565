// Package spectest compares our tool specs with the reference's captured
// ones by shape: the captures keep the reference's names, types, enums and
// required lists, not its wording, since the descriptions the model reads
// are written in our own words.
//
// It must not import any package of the module, and only tests import it.
package spectest
