// Package lossy turns bytes that should be UTF-8 (command output, file
// lines, names) into valid text the way Rust's String::from_utf8_lossy does,
// so tool outputs match the reference byte for byte.
//
// It must not import any package of the module.
package lossy
